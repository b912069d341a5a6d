/* eventlog.h — reads a run's events.msgpack: every EVENT message the logger
 * received, appended back to back as it came off the wire.
 *
 * Read by the run scan (runscan.h), for the run model every report renders
 * (model.h), and by the trace (trace.h).
 */
#ifndef ZP_EVENTLOG_H
#define ZP_EVENTLOG_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

/* Called with each whole record (the EVENT message, its `body` a map or
 * not); 0 goes on, anything else stops the scan and is returned by it. */
typedef int zp_eventlog_fn(void *ctx, const msgpack_object *record);

typedef struct {
    int64_t records;         /* whole records handed to the callback */
    int64_t skipped_bytes;   /* torn by a kill, garbled, or before the first record */
    int64_t skipped_records; /* spans of such bytes */
} zp_eventlog_count_t;

/* Containers nested deeper than this are refused (msgpack-c's own limit). */
#define ZP_EVENTS_DEPTH 32

/* Hands each record of `data` (size bytes of events.msgpack) to fn. A
 * record spans from one record start to the next; a span that is not
 * exactly one msgpack object — torn, garbled, nested deeper than
 * ZP_EVENTS_DEPTH, or counting more elements or bytes than the span holds —
 * is skipped and counted in *count, and the records after it are read; what
 * is allocated is bounded by the span's size. Returns 0 or fn's non-zero
 * value. */
int zp_eventlog_scan(const char *data, size_t size, zp_eventlog_fn *fn, void *ctx,
                   zp_eventlog_count_t *count);

/* <run_dir>/events.msgpack, mapped read-only: what is there now (a running
 * logger appends). 0, or a negative errno with the path and the reason in
 * err (-ENOENT: no events file); *data is NULL for an empty file. Release
 * with zp_eventlog_unmap. */
int zp_eventlog_map(const char *run_dir, const char **data, size_t *size, char *err, size_t errlen);
void zp_eventlog_unmap(const char **data, size_t size);

#endif

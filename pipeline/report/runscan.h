/* runscan.h — reads back the records of a run directory from whatever it
 * still holds: events.msgpack (every record, timer samples included) when it
 * has one, else metrics.jsonl and stats.jsonl (what the logger wrote of the
 * same records as JSON lines: no timer samples), so that a crashed or an old
 * run still gets a report, saying what it lacks.
 *
 * The run model (model.h) reads a run through it, once, for every report.
 */
#ifndef ZP_RUNSCAN_H
#define ZP_RUNSCAN_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

/* Called with each record's body (a map: {kind, stage, instance, pid, time,
 * ...}, or whatever the file held); 0 goes on, anything else stops the scan
 * and is returned by it. The object is valid during the call only. */
typedef int zp_runscan_fn(void *ctx, const msgpack_object *body);

/* What a scan read, and what it had to do without. */
typedef struct {
    int from_events;         /* 1: the records came from events.msgpack */
    int from_metrics, from_stats; /* 1: from metrics.jsonl, stats.jsonl (no usable events) */
    int64_t records;         /* bodies handed to the callback */
    int64_t skipped_bytes;   /* torn or garbled bytes */
    int64_t skipped_records; /* events.msgpack: spans of such bytes; jsonl: lines not a JSON object */
    const char *source;      /* "events.msgpack", "metrics.jsonl and stats.jsonl", ... (static) */
    char missing[400];       /* "" or a sentence: which files were missing or unreadable and
                              * what the report lacks for it */
} zp_runscan_t;

/* Hands every record of <run_dir> to fn: from events.msgpack when it holds
 * at least one record; else from metrics.jsonl and stats.jsonl, whichever
 * exist (then scan->missing says so). Returns 0 (also for an empty
 * events.msgpack and nothing else), fn's non-zero value, ZP_ENOMEM, or —
 * when there is nothing to read at all — events.msgpack's error with the
 * path and the reason in err: -ENOENT (no file) or ZP_EPROTO (not one record
 * in it). */
int zp_runscan(const char *run_dir, zp_runscan_fn *fn, void *ctx, zp_runscan_t *scan, char *err,
               size_t errlen);

/* Parses one line of JSON holding a flat object into a msgpack map in sb
 * (strings, numbers — with a '.', 'e' or 'E' as floats, else integers —,
 * true, false, null; a nested array or object becomes nil). 0, or -1 when
 * the line is not such an object. */
int zp_runscan_json_line(const char *line, size_t len, msgpack_sbuffer *sb);

#endif

/* event.h — the records a process sends the logger (schemas/records.h), built
 * in this thread's buffer and sent without ever blocking. */
#ifndef ZP_EVENT_H
#define ZP_EVENT_H

#include "pipeline/stage/stage.h"
#include "schemas/records.h"

#include <msgpack.h>
#include <stdint.h>

/* Events: the records of schemas/records.h, a msgpack map body {kind, stage,
 * instance, pid, time, [event,] ...fields}. Build with zp_event_record, then any
 * number of zp_event_* calls naming their keys with ZP_KEY(RECORD, key), then
 * send: the map's size is counted as the fields are added and written at
 * send, so no count is typed by hand. Dropped (and counted) when the logger
 * cannot keep up. */
typedef struct {
    msgpack_packer pk;
    msgpack_sbuffer *buf; /* this thread's event buffer (zp_sock_thread_buffer) */
    size_t map_at;        /* where in buf the body's map header is */
    uint32_t fields;      /* the body's pairs so far */
} zp_event_t;

/* Starts record `type`: its head (with its `event` for a metric record). */
void zp_event_record(zp_stage_t *st, zp_event_t *ev, zp_record_type_t type);
/* The same with the head's `time` given (wall-clock seconds): for fields
 * that are offsets from that very moment (the timer record's starts). */
void zp_event_record_at(zp_stage_t *st, zp_event_t *ev, zp_record_type_t type, double wall);
/* The same with the kind given by name and no `event` written for it (a
 * metric's `event` is then a field like the others). */
void zp_event_begin(zp_stage_t *st, zp_event_t *ev, const char *kind);
void zp_event_str(zp_event_t *ev, const char *key, const char *val);
void zp_event_int(zp_event_t *ev, const char *key, int64_t val);
void zp_event_num(zp_event_t *ev, const char *key, double val);
void zp_event_ints(zp_event_t *ev, const char *key, const int64_t *v, int n);
void zp_event_send(zp_stage_t *st, zp_event_t *ev);

#endif

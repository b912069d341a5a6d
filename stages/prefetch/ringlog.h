/* ringlog.h — the prefetch's log of its ring's messages: each BATCH it sends
 * the trainer and each FREE that comes back, with when, sent to the logger as
 * "ring" records (schemas/records.h) for the run's timeline (pipeline/report/trace.h):
 * which slot the trainer held from when to when, and how many at a time. */
#ifndef ZP_RINGLOG_H
#define ZP_RINGLOG_H

#include "pipeline/stage/stage.h"

#include <stdint.h>

#define ZP_RINGLOG_MAX 256

typedef struct {
    int64_t at[ZP_RINGLOG_MAX]; /* zp_now_ns() */
    int64_t slot[ZP_RINGLOG_MAX], gen[ZP_RINGLOG_MAX], free[ZP_RINGLOG_MAX];
    int n;
    int64_t in_use; /* batches sent and not yet freed */
    int64_t next_ns; /* when to send what there is */
} zp_ringlog_t;

/* Notes a BATCH sent (is_free 0) or a FREE received (1) of (slot, gen);
 * sends the record at once when the log is full. */
void zp_ringlog_add(zp_ringlog_t *l, zp_stage_t *st, int is_free, uint32_t slot, uint32_t gen);
/* Sends what was gathered once the stats interval has passed (or now, with
 * force: as the stage exits). Cheap otherwise. */
void zp_ringlog_tick(zp_ringlog_t *l, zp_stage_t *st, int force);

#endif

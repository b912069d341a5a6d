/* plan.h — which phase (a split's epoch) the prefetch runs next. Without a
 * SEEK it runs every epoch's train phase, then its test phase; a consumer's
 * SEEK names a position (split, epoch, batch) and the plan after it: the
 * splits it reads each epoch (ZP_PLAN_* of schemas/msg.h) and their order.
 * Pure functions of the run's shape: no sockets, no state of the stage. */
#ifndef ZP_PREFETCH_PLAN_H
#define ZP_PREFETCH_PLAN_H

#include "pipeline/stage/stage.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int split;
    int64_t epoch;
} zp_phase_t;

typedef struct {
    unsigned plan;              /* ZP_PLAN_* bits: the phases run after a SEEK's */
    int64_t epochs;             /* trainer.epochs */
    int runs[ZP_SPLITS];        /* the split has samples and the mode runs it */
    int64_t batches[ZP_SPLITS]; /* this rank's batches a phase of the split has */
    const zp_stage_t *st;       /* the run's shape: its samples, ranks and batch size */
} zp_plan_t;

/* The run's shape for rank st->instance: both splits, train first. */
void zp_plan_init(zp_plan_t *pl, const zp_stage_t *st);

/* The first phase of the plan at or after position `from` (included when
 * `at` is 1, excluded when 0), into *ph. Returns 1, or 0 when there is none
 * (the run's last epoch is done). */
int zp_plan_next(const zp_plan_t *pl, zp_phase_t from, int at, zp_phase_t *ph);

/* This rank's batches in a phase of `split` whose shards start at entry
 * `from` of the epoch's permutation (0: the whole epoch), limits applied. */
int64_t zp_plan_batches(const zp_plan_t *pl, int split, int64_t from);

/* Checks a SEEK's position (batch `batch` of shards from entry `from`) and
 * plan against the run. Returns 0, or ZP_EINVAL with a sentence for the
 * consumer in `why` (what is out of range and the range). */
int zp_plan_check(const zp_plan_t *pl, uint64_t split, uint64_t epoch, uint64_t from,
                  uint64_t batch, uint64_t plan, char *why, size_t len);

#endif

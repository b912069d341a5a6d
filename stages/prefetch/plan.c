/* plan.c — the order of the prefetch's phases (plan.h). */
#include "stages/prefetch/plan.h"
#include "pipeline/base/names.h"
#include "pipeline/dataset/sampler.h"
#include "schemas/errors.h"
#include "schemas/msg.h"

#include <stdio.h>

int64_t zp_plan_batches(const zp_plan_t *pl, int split, int64_t from)
{
    const zp_stage_t *st = pl->st;
    const zp_config_t *c = &st->cfg;
    int train = split == ZP_SPLIT_TRAIN;
    int64_t n = zp_sampler_shard_batches(st->meta.n[split] - from, st->instance, zp_stage_world(st),
                                         c->batch_size, train && c->drop_last);
    int64_t limit = train ? c->limit_train_batches : c->limit_test_batches;
    return limit && (n > limit || st->mode == ZP_MODE_OVERFIT) ? limit : n;
}

void zp_plan_init(zp_plan_t *pl, const zp_stage_t *st)
{
    const zp_config_t *c = &st->cfg;
    pl->st = st;
    pl->plan = ZP_PLAN_TRAIN | ZP_PLAN_TEST;
    pl->epochs = zp_config_epochs(c);
    for (int s = 0; s < ZP_SPLITS; s++) {
        int train = s == ZP_SPLIT_TRAIN;
        pl->runs[s] = st->meta.n[s] > 0 && !(st->mode == ZP_MODE_EVAL && train) &&
                      !(st->mode == ZP_MODE_OVERFIT && !train);
        pl->batches[s] = zp_plan_batches(pl, s, 0); /* as run_phase counts them */
    }
}

/* A phase's place in the run: epoch by epoch, the plan's first split first. */
static int64_t position(unsigned plan, zp_phase_t ph)
{
    int second = plan & ZP_PLAN_TEST_FIRST ? ph.split == ZP_SPLIT_TRAIN : ph.split == ZP_SPLIT_TEST;
    return ph.epoch * 2 + second;
}

static zp_phase_t phase_at(unsigned plan, int64_t pos)
{
    int first = plan & ZP_PLAN_TEST_FIRST ? ZP_SPLIT_TEST : ZP_SPLIT_TRAIN;
    return (zp_phase_t){.epoch = pos / 2, .split = pos % 2 ? 1 - first : first};
}

int zp_plan_next(const zp_plan_t *pl, zp_phase_t from, int at, zp_phase_t *ph)
{
    if (from.epoch < 0 || from.epoch >= pl->epochs)
        return 0; /* nor does position() overflow */
    for (int64_t pos = position(pl->plan, from) + !at;; pos++) {
        zp_phase_t p = phase_at(pl->plan, pos);
        if (p.epoch >= pl->epochs)
            return 0;
        if (pl->runs[p.split] && (pl->plan & (1u << p.split))) {
            *ph = p;
            return 1;
        }
    }
}

int zp_plan_check(const zp_plan_t *pl, uint64_t split, uint64_t epoch, uint64_t from,
                  uint64_t batch, uint64_t plan, char *why, size_t len)
{
    const char *name = split < ZP_SPLITS ? zp_dataset_split_name((int)split) : "?";
    if (split >= ZP_SPLITS || !pl->runs[split])
        snprintf(why, len, "seek to split %llu (%s): this run sends no %s batches (an empty "
                 "split, or a mode that does not run it)", (unsigned long long)split, name, name);
    else if (epoch >= (uint64_t)pl->epochs)
        snprintf(why, len, "seek to %s epoch %llu: the run has epochs 0..%lld (trainer.epochs "
                 "%lld)", name, (unsigned long long)epoch, (long long)pl->epochs - 1,
                 (long long)pl->epochs);
    else if (from > (uint64_t)pl->st->meta.n[split])
        snprintf(why, len, "seek to %s epoch %llu from entry %llu: its permutation has entries "
                 "0..%lld", name, (unsigned long long)epoch, (unsigned long long)from,
                 (long long)pl->st->meta.n[split]);
    else if (batch >= (uint64_t)zp_plan_batches(pl, (int)split, (int64_t)from) && (batch || !from))
        snprintf(why, len, "seek to batch %llu of %s epoch %llu: an epoch of %s has batches "
                 "0..%lld on this rank%s", (unsigned long long)batch, name, (unsigned long long)epoch,
                 name, (long long)zp_plan_batches(pl, (int)split, (int64_t)from) - 1,
                 from ? " from that entry" : "");
    else if (plan & ~(uint64_t)ZP_PLAN_ALL)
        snprintf(why, len, "seek with plan %llu: a plan is bits 1 (train), 2 (test) and 4 (test "
                 "first)", (unsigned long long)plan);
    else
        return 0;
    return ZP_EINVAL;
}

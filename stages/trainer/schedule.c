/* schedule.c — the learning-rate schedule; see schedule.h. */
#define _GNU_SOURCE
#include "stages/trainer/schedule.h"
#include "pipeline/dataset/sampler.h"

#include <math.h>

double zp_schedule_lr(const zp_config_t *c, int64_t step, int64_t epoch, int64_t per_epoch)
{
    double lr = c->lr;
    if (c->schedule == ZP_SCHED_STEP) {
        lr *= pow(c->gamma, (double)(epoch / c->step_epochs));
    } else if (c->schedule == ZP_SCHED_COSINE) {
        double total = (double)c->epochs * (double)per_epoch;
        double f = total > 1 ? fmin(1.0, (double)step / (total - 1)) : 1;
        lr = c->min_lr + (c->lr - c->min_lr) * 0.5 * (1 + cos(M_PI * f));
    }
    if (step < c->warmup_steps)
        lr *= (double)(step + 1) / (double)c->warmup_steps;
    return lr;
}

int64_t zp_schedule_shard_steps(const zp_config_t *c, int64_t samples, int rank, int world)
{
    int64_t b = zp_sampler_shard_batches(samples, rank, world, c->batch_size, c->drop_last);
    return c->limit_train_batches && b > c->limit_train_batches ? c->limit_train_batches : b;
}

int64_t zp_schedule_epoch_steps(const zp_config_t *c, int64_t samples, int world,
                                uint64_t batches)
{
    return world > 1 ? zp_schedule_shard_steps(c, samples, 0, world) : (int64_t)batches;
}

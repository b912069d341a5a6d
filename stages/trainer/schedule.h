/* schedule.h — the learning rate and the steps of an epoch: functions of
 * the position only (step, epoch), so a resumed run follows the same curve
 * as one that never stopped. */
#ifndef ZP_TRAINER_SCHEDULE_H
#define ZP_TRAINER_SCHEDULE_H

#include "pipeline/config/config.h"

#include <stdint.h>

/* The learning rate of the step after `step` steps, in epoch `epoch` of
 * `per_epoch` steps: trainer.schedule (constant, step, cosine), then the
 * linear warm-up over trainer.warmup_steps. */
double zp_schedule_lr(const zp_config_t *c, int64_t step, int64_t epoch, int64_t per_epoch);

/* Train steps an epoch of rank `rank` of `world` takes over a split of
 * `samples` (trainer.limit_train_batches applied). */
int64_t zp_schedule_shard_steps(const zp_config_t *c, int64_t samples, int rank, int world);

/* Steps of the current epoch, whose BATCH says `batches`: with ranks, rank
 * 0's (its shard is the largest), which every rank takes. */
int64_t zp_schedule_epoch_steps(const zp_config_t *c, int64_t samples, int world,
                                uint64_t batches);

#endif

/* nan_guard.h — a NaN or infinity in the loss or a gradient stops the run:
 * the error says where (step, epoch, batch, layer, tensor), and the batch's
 * sample indices are written to <run>/nan-batch.txt so that it can be
 * replayed. trainer.debug.nan_at_step poisons one gradient on purpose, to
 * test exactly this. */
#ifndef ZP_TRAINER_NAN_GUARD_H
#define ZP_TRAINER_NAN_GUARD_H

#include "pipeline/config/config.h"
#include "stages/trainer/backend.h"

#include <stdint.h>

/* Writes nan-batch.txt under run_dir ("# step S, epoch E, batch B, split X:
 * N sample indices", then one index a line), logs the error naming `what`
 * (the loss, a gradient), layer `layer` (from 0) and `tensor`, and returns
 * ZP_EINVAL: the caller stops. `step` is the steps taken before this one. */
int zp_nan_guard_stop(const char *run_dir, int64_t step, const zp_batch_view_t *v, int layer,
                const char *tensor, const char *what);

/* Whether trainer.debug.nan_at_step asks for a NaN in the step after `step`. */
int zp_nan_guard_due(const zp_config_t *c, int64_t step);

#endif

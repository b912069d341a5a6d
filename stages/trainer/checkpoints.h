/* checkpoints.h — the trainer's checkpoints and --resume. A checkpoint's
 * payload is the best test accuracy so far (f64), then the backend's model
 * and optimizer state; its position (step, epoch, batch, seed) is where the
 * sampler goes on (pipeline/stage/ckpt.h). Every rank holds the same model: only
 * the writer (rank 0) writes. A backend with no state writes none. */
#ifndef ZP_TRAINER_CHECKPOINTS_H
#define ZP_TRAINER_CHECKPOINTS_H

#include "stages/trainer/backend.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    zp_stage_t *st;
    zp_backend_t *be; /* not owned */
    int writer;
    double best;      /* best test accuracy so far; -1 before any */
    uint8_t *buf;     /* the payload; owned; NULL without a model */
    size_t bytes;
} zp_checkpoints_t;

/* Creates <run>/checkpoints where the backend has a model. Returns 0, or
 * ZP_ENOMEM / -errno (the folder cannot be made), logged. */
int zp_checkpoints_open(zp_checkpoints_t *k, zp_stage_t *st, zp_backend_t *be, int writer);
void zp_checkpoints_close(zp_checkpoints_t *k);

/* Writes <run>/checkpoints/<name>.ckpt: the position is batch `batch` of
 * `epoch` on every rank, whose shards start at entry `from` of its
 * permutation, with `flags` (ZP_CKPT_TRAIN_RECORDED: that train epoch is
 * recorded; pipeline/stage/ckpt.h); a failure is logged, the run goes on. */
void zp_checkpoints_write(zp_checkpoints_t *k, const char *name, int64_t step, uint64_t epoch,
                          uint64_t from, uint64_t batch, uint64_t flags);

/* After epoch `epoch`'s evaluation (accuracy -1 without a test split), as
 * trainer.checkpoint says: last, best (when better), epoch-N. */
void zp_checkpoints_epoch(zp_checkpoints_t *k, int64_t step, uint64_t epoch, double accuracy);

/* Loads "last" into the backend: *step, and the epoch, the entry its shards
 * start at and the batch the run goes on from (*recorded: that epoch's train
 * split is over and recorded), for this run's number of
 * ranks (zp_ckpt_regroup: another number than the checkpoint's shards the
 * epoch's rest anew). A backend with no model resumes nothing (0, positions
 * -1). Returns 0, or the error (logged) when the file cannot be read or
 * holds another model. */
int zp_checkpoints_resume(zp_checkpoints_t *k, int64_t *step, int64_t *epoch, int64_t *from,
                          int64_t *batch, int *recorded);

#endif

/* backend.h — what trains on the ring's batches: one interface, several
 * implementations. The trainer's loop (trainer.c) owns the ring, the epoch
 * coverage, the schedule, checkpoints and the records; a backend owns the
 * model and its compute, and never sees a message or a slot number.
 *
 *   cpu   (backend_cpu.c)   the MLP on OpenBLAS (mlp.c); with ranks, the
 *                           gradients summed through pipeline/ring/comm.c
 *   cuda  (backend_cuda.c)  the same MLP on one GPU (gpu_load.c -> the
 *                           module zeus-pipe-cuda.so); with ranks, NCCL
 *   eval  (backend_eval.c)  `zeus-pipe eval`: test batches through several
 *                           checkpoints at once (scores.c)
 *   null  (backend_null.c)  trainer.backend: null, no model: coverage only
 *
 * What a backend must do (a third kind, e.g. a user's own program reached
 * through the ring's client library, implements the same table):
 *  - open: from the stage (config, dataset meta) and the ranks (comm: sums
 *    over every rank; with one rank a sum is the values themselves). Every
 *    rank opens the same backend and takes the same number of steps.
 *  - attach: once the ring is mapped, before the first batch (cuda
 *    page-locks it). With pins_ring set, the ring may never be remapped.
 *  - input: the batch as the model sees it (normalised, augmented), for
 *    trainer.debug.log_batches; called for every batch, before `batch`.
 *  - batch: train (split 0: forward, backward, the rank sum, an optimizer
 *    step with s->lr) or evaluate (else) on the view; n may be 0 for a train
 *    batch (a shard a batch shorter, or every sample skipped): the step the
 *    other ranks' samples make, with zeros of this rank's. When it returns,
 *    nothing in the view is read again: the slot goes back to the prefetch.
 *    Loss and hits go to `out` now, or later through collect.
 *  - collect: metrics held back (on a GPU) since the last call, and a
 *    non-finite loss or gradient found meanwhile (an error then).
 *  - state: bytes of the model and optimizer state, save, load (ZP_EINVAL
 *    for another model's); a backend without a model has 0 bytes, and the
 *    run no checkpoints.
 *  - epoch_end: after an epoch's record (eval writes its result files).
 *  - destroy: waits for outstanding work, frees, NULLs the pointer; safe on
 *    NULL and twice. */
#ifndef ZP_TRAINER_BACKEND_H
#define ZP_TRAINER_BACKEND_H

#include "pipeline/ring/consumer.h"
#include "pipeline/ring/ring.h"
#include "pipeline/stage/stage.h"
#include "pipeline/ring/comm.h"

#include <stddef.h>
#include <stdint.h>

/* The step a train batch makes. */
typedef struct {
    int64_t step;  /* train steps taken before this one */
    int64_t epoch; /* from 0 */
    double lr;     /* zp_schedule_lr of this step */
} zp_step_t;

/* What a batch (or collect) adds: the caller zeroes it. */
typedef struct {
    double loss_sum;     /* this rank's samples' loss sum, to the epoch record */
    int64_t correct;     /* and their correct predictions */
    double win_loss;     /* train: to the step record's window (with ranks, cpu: every rank's) */
    int64_t win_correct, win_samples;
    int stepped;         /* an optimizer step was taken with s->lr */
    int trained;         /* this rank's samples went forward and backward: `loss` is theirs */
    double loss;         /* their mean loss */
    int64_t compute_ns;  /* time inside timed regions (the rest of the batch is "other") */
} zp_batch_out_t;

typedef struct zp_backend zp_backend_t;

typedef struct {
    const char *name;
    int metrics;   /* computes loss and accuracy (the epoch record carries them) */
    int pins_ring; /* attach page-locks the ring: it may never be remapped */
    int (*attach)(zp_backend_t *b, zp_ring_t *ring);
    int (*input)(zp_backend_t *b, const zp_batch_view_t *v, const void **x, size_t *sample_bytes,
                 int64_t *compute_ns);
    int (*batch)(zp_backend_t *b, const zp_batch_view_t *v, const zp_step_t *s, zp_batch_out_t *out);
    int (*collect)(zp_backend_t *b, int split, const zp_step_t *s, zp_batch_out_t *out);
    size_t (*state_bytes)(const zp_backend_t *b);
    int (*save)(zp_backend_t *b, void *buf);
    int (*load)(zp_backend_t *b, const void *buf, size_t bytes);
    int (*epoch_end)(zp_backend_t *b, int split);
    void (*destroy)(zp_backend_t **b);
} zp_backend_ops_t;

/* Every implementation's state starts with this. */
struct zp_backend {
    const zp_backend_ops_t *ops;
    zp_stage_t *st;
    zp_comm_t *comm; /* not owned */
};

/* Opens the backend trainer.backend names (auto: cuda where a GPU is found;
 * eval and overfit on the cpu), `eval` for ZP_MODE_EVAL. Returns 0, or an
 * error code (logged: ZP_EGPU when trainer.backend is cuda and no GPU is
 * usable, ZP_EINVAL for a model too deep, ZP_ENOMEM) with *out NULL. */
int zp_backend_create(zp_backend_t **out, zp_stage_t *st, zp_comm_t *comm);
/* Safe on NULL and twice; NULLs *b. */
void zp_backend_destroy(zp_backend_t **b);

/* Each implementation's open, with the same contract. */
int zp_backend_cpu_create(zp_backend_t **out, zp_stage_t *st, zp_comm_t *comm);
int zp_backend_cuda_create(zp_backend_t **out, zp_stage_t *st, zp_comm_t *comm);
int zp_backend_eval_create(zp_backend_t **out, zp_stage_t *st, zp_comm_t *comm);
int zp_backend_null_create(zp_backend_t **out, zp_stage_t *st, zp_comm_t *comm);

/* ---- shared by the implementations ---- */

#include "pipeline/image/augment.h"
#include "stages/trainer/mlp.h"

/* The model trainer.model.hidden describes over the dataset's samples:
 * dims[0..*layers]. ZP_EINVAL when it has too many layers. */
int zp_backend_dims(const zp_stage_t *st, int *dims, int *layers);
/* trainer.optimizer and its settings. */
zp_opt_t zp_backend_opt(const zp_config_t *c);

/* The batch as a model on the host reads it: uint8 samples normalised into
 * a float buffer, train samples augmented (dataset.augment.where = trainer). */
typedef struct {
    zp_stage_t *st;
    float *lut;       /* uint8 samples: zp_dataset_normalize_lut's table; owned */
    float *norm;      /* the normalised batch; owned; NULL for float32 samples */
    float *augmented; /* the augmented train batch; owned; NULL without augmentation */
    zp_augment_t aug;
} zp_backend_input_t;

/* normalise: uint8 samples get a float copy; augment: train batches are
 * augmented. Returns 0 or ZP_ENOMEM (or zp_augment_init's error); free it
 * with zp_backend_input_free in either case. */
int zp_backend_input_init(zp_backend_input_t *h, zp_stage_t *st, int normalise, int augment);
/* The view's samples as floats (time into *compute_ns); valid until the next call. */
const float *zp_backend_input(zp_backend_input_t *h, const zp_batch_view_t *v, int64_t *compute_ns);
void zp_backend_input_free(zp_backend_input_t *h);

#endif

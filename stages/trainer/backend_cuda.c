/* backend_cuda.c — the cuda backend: the MLP on one GPU (gpu.h, through the
 * module gpu_load.c opens). A batch's copy and compute are enqueued and the
 * call returns once the copy is done (the slot then goes back); the compute
 * runs on while the next batch arrives. Losses stay on the GPU until they
 * are collected. With ranks, gradients are summed by NCCL; rank 0's NCCL id
 * reaches the others through comm.c. */
#define _GNU_SOURCE
#include "pipeline/base/log.h"
#include "stages/trainer/backend.h"
#include "stages/trainer/gpu.h"

#include <stdlib.h>

typedef struct {
    zp_backend_t base;
    zp_mlp_t mlp;         /* the host copy: initial weights, checkpoints, resume */
    zp_opt_t opt;
    zp_gpu_t *gpu;        /* from attach on */
    float *lut;           /* uint8 samples: their normalisation, done on the GPU; owned */
    zp_augment_t aug;     /* dataset.augment.where = trainer: drawn here, applied on the GPU */
    zp_aug_draw_t *draws; /* the batch's draws; owned */
} cuda_t;

/* Ranks > 1: rank 0's NCCL id to every rank (a sum: the others add zeros),
 * then every rank joins the communicator. */
static int join_ranks(cuda_t *b)
{
    zp_stage_t *st = b->base.st;
    int rank = zp_comm_rank(b->base.comm), world = zp_comm_world(b->base.comm);
    uint8_t id[ZP_NCCL_ID_BYTES] = {0};
    double sum[ZP_NCCL_ID_BYTES];
    char err[512];
    int rc = rank == 0 ? zp_gpu_nccl_id(id, err, sizeof err) : 0;
    if (rc) {
        zp_error("trainer.gpus: %s", err);
        return rc;
    }
    for (int i = 0; i < ZP_NCCL_ID_BYTES; i++)
        sum[i] = id[i];
    float none = 0;
    if ((rc = zp_comm_sum(b->base.comm, &none, 0, sum, ZP_NCCL_ID_BYTES)))
        return rc;
    for (int i = 0; i < ZP_NCCL_ID_BYTES; i++)
        id[i] = (uint8_t)sum[i];
    if ((rc = zp_gpu_join(b->gpu, id, rank, world, (int)st->cfg.comm_timeout_s, err, sizeof err)))
        zp_error("trainer.gpus: %s", err);
    else
        zp_info("cuda backend: rank %d of %d joined the NCCL communicator", rank, world);
    return rc;
}

/* Rank r uses GPU r; under Slurm a task uses its node-local rank's GPU
 * among those it sees (one, when Slurm gives each task its own). */
static int pick_device(cuda_t *b, int *device)
{
    zp_stage_t *st = b->base.st;
    int rank = zp_comm_rank(b->base.comm), world = zp_comm_world(b->base.comm);
    char err[512];
    *device = rank;
    if (world == 1)
        return 0;
    const zp_slurm_t *sl = &st->slurm;
    int n = zp_gpu_count(err, sizeof err);
    if (sl->world > 1 ? n < 1 : n < world) {
        zp_error("%s: %d ranks, but %d GPU(s) here%s%s", sl->world > 1 ? "Slurm" : "trainer.gpus",
                 world, n, n ? "" : ": ", n ? "" : err);
        return ZP_ECONFIG;
    }
    if (sl->world > 1)
        *device = sl->local % n;
    return 0;
}

/* Opens the GPU with the host model (resumed by now) and page-locks the ring. */
static int cuda_attach(zp_backend_t *base, zp_ring_t *ring)
{
    cuda_t *b = (cuda_t *)base;
    zp_stage_t *st = base->st;
    char err[512];
    int device, rc = pick_device(b, &device);
    if (rc)
        return rc;
    rc = zp_gpu_create(&b->gpu, device, &b->mlp, ring->base, ring->map_bytes, b->lut,
                     (int)st->meta.shape[0], err, sizeof err);
    if (rc) {
        zp_error("cuda backend: %s", err);
        return rc;
    }
    zp_info("cuda backend: MLP with %d weight layers on %s; the ring (%zu bytes) is page-locked",
            b->mlp.nlayers, zp_gpu_name(b->gpu), ring->map_bytes);
    if (st->cfg.nan_at_step)
        zp_warn("trainer.debug.nan_at_step is not applied by the cuda backend");
    return zp_comm_world(base->comm) > 1 ? join_ranks(b) : 0;
}

/* The batch as it came: the GPU normalises and augments it. */
static int cuda_input(zp_backend_t *base, const zp_batch_view_t *v, const void **x,
                      size_t *sample_bytes, int64_t *compute_ns)
{
    *x = v->data;
    *sample_bytes = base->st->meta.sample_bytes;
    return 0;
}

/* Ranks > 1 take every step together, with n = 0 where this rank has no
 * batch; one rank skips an empty batch. */
static int cuda_batch(zp_backend_t *base, const zp_batch_view_t *v, const zp_step_t *s,
                      zp_batch_out_t *out)
{
    cuda_t *b = (cuda_t *)base;
    int train = v->split == ZP_SPLIT_TRAIN;
    if (v->n == 0 && !(train && zp_comm_world(base->comm) > 1))
        return 0;
    zp_gpu_aug_t aug = {b->aug.c, b->aug.h, b->aug.w, b->aug.padding, b->aug.fill, b->draws};
    if (train) {
        b->opt.lr = (float)s->lr;
        b->opt.t = s->step + 1;
        for (int i = 0; b->aug.on && i < v->n; i++)
            zp_augment_draw(&b->aug, v->epoch, v->idx[i], &b->draws[i]);
        out->stepped = 1;
        out->win_samples += v->n;
    }
    int64_t t0 = zp_now_ns();
    int rc = zp_gpu_batch(b->gpu, v->data, v->labels, v->n, v->split, &b->opt,
                          b->aug.on && train ? &aug : NULL);
    if (!rc)
        rc = zp_gpu_wait_copy(b->gpu);
    /* the GPU's own times go to h2d, forward, backward; the host's wait is not "other" */
    out->compute_ns += zp_now_ns() - t0;
    zp_gpu_harvest(b->gpu, &base->st->timers, 0);
    return rc;
}

/* The loss and hits of `split` since the last call; a NaN stops the run. */
static int cuda_collect(zp_backend_t *base, int split, const zp_step_t *s, zp_batch_out_t *out)
{
    cuda_t *b = (cuda_t *)base;
    double loss;
    int64_t correct;
    int non_finite;
    int rc = b->gpu ? zp_gpu_take(b->gpu, split, &loss, &correct, &non_finite) : 0;
    if (rc || !b->gpu)
        return rc;
    out->loss_sum += loss;
    out->correct += correct;
    if (split == ZP_SPLIT_TRAIN) {
        out->win_loss += loss;
        out->win_correct += correct;
    }
    if (non_finite) {
        zp_error("step %lld (epoch %lld): a loss or gradient is not finite (the cuda backend "
                 "checks at every metric record: the first such step is at most "
                 "trainer.log_every_steps earlier)", (long long)s->step, (long long)s->epoch + 1);
        return ZP_EINVAL;
    }
    return 0;
}

static size_t cuda_state_bytes(const zp_backend_t *base)
{
    return zp_mlp_state_bytes(&((const cuda_t *)base)->mlp);
}

static int cuda_save(zp_backend_t *base, void *buf)
{
    cuda_t *b = (cuda_t *)base;
    if (b->gpu && zp_gpu_download(b->gpu, &b->mlp)) {
        zp_error("cannot write a checkpoint: the model cannot be read from the GPU");
        return ZP_EGPU;
    }
    zp_mlp_save(&b->mlp, buf);
    return 0;
}

/* Before attach: the GPU starts from the loaded host model. */
static int cuda_load(zp_backend_t *base, const void *buf, size_t bytes)
{
    return zp_mlp_load(&((cuda_t *)base)->mlp, buf, bytes);
}

static int cuda_epoch_end(zp_backend_t *b, int split) { return 0; }

/* Harvests the last GPU times, then unregisters the ring: before it is unmapped. */
static void cuda_destroy(zp_backend_t **bp)
{
    cuda_t *b = (cuda_t *)*bp;
    if (!b)
        return;
    int64_t untimed = b->gpu ? zp_gpu_harvest(b->gpu, &b->base.st->timers, 1) : 0;
    if (untimed)
        zp_info("cuda backend: %lld batches went untimed (the event pool was full)",
                (long long)untimed);
    zp_gpu_destroy(&b->gpu);
    zp_mlp_free(&b->mlp);
    zp_augment_free(&b->aug);
    free(b->lut);
    free(b->draws);
    free(b);
    *bp = NULL;
}

static const zp_backend_ops_t cuda_ops = {
    .name = "cuda", .metrics = 1, .pins_ring = 1, .attach = cuda_attach, .input = cuda_input,
    .batch = cuda_batch, .collect = cuda_collect, .state_bytes = cuda_state_bytes,
    .save = cuda_save, .load = cuda_load, .epoch_end = cuda_epoch_end, .destroy = cuda_destroy,
};

int zp_backend_cuda_create(zp_backend_t **out, zp_stage_t *st, zp_comm_t *comm)
{
    const zp_config_t *c = &st->cfg;
    int dims[ZP_MLP_MAX_LAYERS + 1], L;
    *out = NULL;
    cuda_t *b = calloc(1, sizeof *b);
    if (!b)
        return ZP_ENOMEM;
    b->base = (zp_backend_t){&cuda_ops, st, comm};
    zp_backend_t *base = &b->base;
    int rc = zp_backend_dims(st, dims, &L);
    b->opt = zp_backend_opt(c);
    if (!rc)
        rc = zp_mlp_init(&b->mlp, dims, L, (int)c->batch_size, (uint64_t)c->seed);
    if (!rc && c->aug_where == ZP_AUG_IN_TRAINER)
        rc = zp_augment_init(&b->aug, c, (int)st->meta.shape[0], (int)st->meta.shape[1],
                        (int)st->meta.shape[2]);
    if (!rc && b->aug.on && !(b->draws = malloc(sizeof *b->draws * (size_t)c->batch_size)))
        rc = ZP_ENOMEM;
    if (!rc && st->meta.dtype == ZP_DTYPE_U8 && !(b->lut = zp_dataset_normalize_lut(c, st->meta.shape[0])))
        rc = ZP_ENOMEM;
    if (rc) {
        cuda_destroy(&base);
        return rc;
    }
    *out = base;
    return 0;
}

/* backend_cpu.c — the cpu backend: the MLP on OpenBLAS (mlp.c). With ranks,
 * every train step's gradients are summed over them through comm.c. */
#define _GNU_SOURCE
#include "pipeline/base/log.h"
#include "stages/trainer/backend.h"
#include "stages/trainer/nan_guard.h"

#include <math.h>
#include <stdlib.h>

char *openblas_get_corename(void);

typedef struct {
    zp_backend_t base;
    zp_mlp_t mlp;
    zp_opt_t opt;
    zp_backend_input_t in;
    const float *x; /* the batch input() prepared */
    float *gsum;   /* ranks > 1: the gradients packed for a sum; owned */
    size_t gcount; /* floats in gsum */
} cpu_t;

/* The tail of a step's sum over the ranks: samples, loss sum, correct. */
enum { SUM_N, SUM_LOSS, SUM_CORRECT, SUM_COUNT };

static void pack(cpu_t *b, int n)
{
    zp_mlp_t *mlp = &b->mlp;
    float *p = b->gsum;
    for (int l = 0; l < mlp->nlayers; l++) {
        size_t w = (size_t)mlp->dims[l] * (size_t)mlp->dims[l + 1], o = (size_t)mlp->dims[l + 1];
        for (size_t i = 0; i < w; i++)
            *p++ = n ? mlp->gw[l][i] * (float)n : 0;
        for (size_t i = 0; i < o; i++)
            *p++ = n ? mlp->gb[l][i] * (float)n : 0;
    }
}

static void unpack(cpu_t *b, float scale)
{
    zp_mlp_t *mlp = &b->mlp;
    const float *p = b->gsum;
    for (int l = 0; l < mlp->nlayers; l++) {
        size_t w = (size_t)mlp->dims[l] * (size_t)mlp->dims[l + 1], o = (size_t)mlp->dims[l + 1];
        for (size_t i = 0; i < w; i++)
            mlp->gw[l][i] = *p++ * scale;
        for (size_t i = 0; i < o; i++)
            mlp->gb[l][i] = *p++ * scale;
    }
}

/* Ranks > 1: this rank's gradients (a mean over its n samples) weighted by
 * n, summed over the ranks and divided by their total — the mean over every
 * rank's batch, as one trainer given all of them computes it. A rank with no
 * samples adds zeros. The window gets every rank's totals. Returns 1 when
 * the ranks had samples (a step is due), 0 when none had, or an error. */
static int sum_grads(cpu_t *b, int n, double loss_sum, int correct, zp_batch_out_t *out)
{
    double tail[SUM_COUNT] = {n, loss_sum, correct};
    pack(b, n);
    int rc = zp_comm_sum(b->base.comm, b->gsum, b->gcount, tail, SUM_COUNT);
    out->compute_ns += zp_comm_last_ns(b->base.comm);
    if (rc || tail[SUM_N] <= 0)
        return rc;
    unpack(b, (float)(1.0 / tail[SUM_N]));
    out->win_loss += tail[SUM_LOSS];
    out->win_correct += (int64_t)tail[SUM_CORRECT];
    out->win_samples += (int64_t)tail[SUM_N];
    return 1;
}

/* With one rank the gradients are this rank's, and so is the window. */
static int step_due(cpu_t *b, int n, double loss_sum, int correct, zp_batch_out_t *out)
{
    if (b->gsum)
        return sum_grads(b, n, loss_sum, correct, out);
    out->win_loss += loss_sum;
    out->win_correct += correct;
    out->win_samples += n;
    return n > 0;
}

static void take_step(cpu_t *b, const zp_step_t *s, zp_batch_out_t *out)
{
    b->opt.lr = (float)s->lr;
    b->opt.t = s->step + 1;
    zp_mlp_step(&b->mlp, &b->opt);
    out->stepped = 1;
}

/* Forward; for a train batch backward, the rank sum and an optimizer step. */
static int cpu_batch(zp_backend_t *base, const zp_batch_view_t *v, const zp_step_t *s,
                     zp_batch_out_t *out)
{
    cpu_t *b = (cpu_t *)base;
    zp_stage_t *st = base->st;
    zp_timers_t *tm = &st->timers;
    int n = v->n, correct = 0, layer, rc;
    const char *tensor;
    double loss = 0;
    if (n > 0) {
        const float *x = b->x;
        ZP_TIME_BEGIN(tm, ZP_R_FORWARD);
        loss = zp_mlp_forward(&b->mlp, x, v->labels, n, &correct);
        out->compute_ns += ZP_TIME_END(tm, ZP_R_FORWARD);
        if (!isfinite(loss)) {
            if (!zp_mlp_check_forward(&b->mlp, n, &layer, &tensor))
                layer = b->mlp.nlayers - 1, tensor = "loss";
            return zp_nan_guard_stop(st->run_dir, s->step, v, layer, tensor, "the loss is not finite");
        }
        out->loss_sum += loss * n;
        out->correct += correct;
        if (v->split != ZP_SPLIT_TRAIN)
            return 0;
        out->trained = 1, out->loss = loss;
        ZP_TIME_BEGIN(tm, ZP_R_BACKWARD);
        zp_mlp_backward(&b->mlp, x, v->labels, n);
        out->compute_ns += ZP_TIME_END(tm, ZP_R_BACKWARD);
        if (zp_nan_guard_due(&st->cfg, s->step))
            b->mlp.gw[0][0] = NAN;
        if (zp_mlp_check_grads(&b->mlp, &layer, &tensor))
            return zp_nan_guard_stop(st->run_dir, s->step, v, layer, tensor, "a gradient is not finite");
    } else if (v->split != ZP_SPLIT_TRAIN) {
        return 0;
    }
    rc = step_due(b, n, loss * n, correct, out);
    if (rc > 0)
        take_step(b, s, out);
    return rc < 0 ? rc : 0;
}

static int cpu_input(zp_backend_t *base, const zp_batch_view_t *v, const void **x,
                     size_t *sample_bytes, int64_t *compute_ns)
{
    cpu_t *b = (cpu_t *)base;
    *x = b->x = zp_backend_input(&b->in, v, compute_ns);
    *sample_bytes = (size_t)base->st->meta.elems * sizeof(float);
    return 0;
}

static int cpu_attach(zp_backend_t *b, zp_ring_t *ring) { return 0; }
static int cpu_collect(zp_backend_t *b, int split, const zp_step_t *s, zp_batch_out_t *out)
{
    return 0;
}
static int cpu_epoch_end(zp_backend_t *b, int split) { return 0; }

static size_t cpu_state_bytes(const zp_backend_t *base)
{
    return zp_mlp_state_bytes(&((const cpu_t *)base)->mlp);
}

static int cpu_save(zp_backend_t *base, void *buf)
{
    zp_mlp_save(&((cpu_t *)base)->mlp, buf);
    return 0;
}

static int cpu_load(zp_backend_t *base, const void *buf, size_t bytes)
{
    return zp_mlp_load(&((cpu_t *)base)->mlp, buf, bytes);
}

static void cpu_destroy(zp_backend_t **bp)
{
    cpu_t *b = (cpu_t *)*bp;
    if (!b)
        return;
    zp_mlp_free(&b->mlp);
    zp_backend_input_free(&b->in);
    free(b->gsum);
    free(b);
    *bp = NULL;
}

static const zp_backend_ops_t cpu_ops = {
    .name = "cpu", .metrics = 1, .attach = cpu_attach, .input = cpu_input, .batch = cpu_batch,
    .collect = cpu_collect, .state_bytes = cpu_state_bytes, .save = cpu_save, .load = cpu_load,
    .epoch_end = cpu_epoch_end, .destroy = cpu_destroy,
};

int zp_backend_cpu_create(zp_backend_t **out, zp_stage_t *st, zp_comm_t *comm)
{
    const zp_config_t *c = &st->cfg;
    int dims[ZP_MLP_MAX_LAYERS + 1], L;
    *out = NULL;
    cpu_t *b = calloc(1, sizeof *b);
    if (!b)
        return ZP_ENOMEM;
    b->base = (zp_backend_t){&cpu_ops, st, comm};
    zp_backend_t *base = &b->base;
    int rc = zp_backend_dims(st, dims, &L);
    if (rc)
        goto fail;
    b->opt = zp_backend_opt(c);
    zp_info("cpu backend: MLP with %d weight layers; OpenBLAS core %s, %lld thread(s)", L,
            openblas_get_corename(), (long long)c->threads);
    if ((rc = zp_mlp_init(&b->mlp, dims, L, (int)c->batch_size, (uint64_t)c->seed)))
        goto fail;
    /* overfit: the one batch as it is */
    int augment = c->aug_where == ZP_AUG_IN_TRAINER && st->mode != ZP_MODE_OVERFIT;
    if ((rc = zp_backend_input_init(&b->in, st, 1, augment)))
        goto fail;
    if (zp_comm_world(comm) > 1) {
        for (int l = 0; l < L; l++)
            b->gcount += (size_t)dims[l] * (size_t)dims[l + 1] + (size_t)dims[l + 1];
        if (!(b->gsum = malloc(b->gcount * sizeof *b->gsum))) {
            rc = ZP_ENOMEM;
            goto fail;
        }
    }
    *out = base;
    return 0;
fail:
    cpu_destroy(&base);
    return rc;
}

/* backend_eval.c — `zeus-pipe eval`: every test batch through each of the
 * checkpoints under test at once (scores.c); the epoch record shows the first
 * checkpoint's figures, and each epoch's end writes every one's results
 * beside the evaluated run. Nothing is trained. */
#define _GNU_SOURCE
#include "pipeline/base/log.h"
#include "stages/trainer/backend.h"
#include "stages/trainer/scores.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    zp_backend_t base;
    zp_scores_t eval;
    zp_backend_input_t in;
    const float *x; /* the batch input() prepared */
} eval_t;

/* The directory that holds an eval run's directory: the evaluated run. */
static void parent_dir(const zp_stage_t *st, char *buf, size_t len)
{
    const char *slash = strrchr(st->run_dir, '/');
    int n = slash ? (int)(slash - st->run_dir) : 0;
    snprintf(buf, len, "%.*s", n ? n : 1, n ? st->run_dir : "/");
}

static int eval_attach(zp_backend_t *b, zp_ring_t *ring) { return 0; }

static int eval_input(zp_backend_t *base, const zp_batch_view_t *v, const void **x,
                      size_t *sample_bytes, int64_t *compute_ns)
{
    eval_t *b = (eval_t *)base;
    *x = b->x = zp_backend_input(&b->in, v, compute_ns);
    *sample_bytes = (size_t)base->st->meta.elems * sizeof(float);
    return 0;
}

static int eval_batch(zp_backend_t *base, const zp_batch_view_t *v, const zp_step_t *s,
                      zp_batch_out_t *out)
{
    eval_t *b = (eval_t *)base;
    if (v->split == ZP_SPLIT_TRAIN)
        out->win_samples += v->n;
    if (v->n == 0)
        return 0;
    zp_scores_model_t *first = &b->eval.m[0];
    double loss0 = first->loss_sum;
    int64_t correct0 = first->correct;
    ZP_TIME_BEGIN(&base->st->timers, ZP_R_FORWARD);
    zp_scores_batch(&b->eval, b->x, v->labels, v->n);
    out->compute_ns += ZP_TIME_END(&base->st->timers, ZP_R_FORWARD);
    out->loss_sum += first->loss_sum - loss0;
    out->correct += first->correct - correct0;
    return 0;
}

static int eval_collect(zp_backend_t *b, int split, const zp_step_t *s, zp_batch_out_t *out)
{
    return 0;
}
static size_t eval_state_bytes(const zp_backend_t *b) { return 0; }
static int eval_save(zp_backend_t *b, void *buf) { return 0; }
static int eval_load(zp_backend_t *b, const void *buf, size_t bytes) { return ZP_EINVAL; }

static int eval_epoch_end(zp_backend_t *base, int split)
{
    char dir[PATH_MAX];
    parent_dir(base->st, dir, sizeof dir);
    zp_scores_write(&((eval_t *)base)->eval, dir);
    return 0;
}

static void eval_destroy(zp_backend_t **bp)
{
    eval_t *b = (eval_t *)*bp;
    if (!b)
        return;
    zp_scores_close(&b->eval);
    zp_backend_input_free(&b->in);
    free(b);
    *bp = NULL;
}

static const zp_backend_ops_t eval_ops = {
    .name = "eval", .metrics = 1, .attach = eval_attach, .input = eval_input, .batch = eval_batch,
    .collect = eval_collect, .state_bytes = eval_state_bytes, .save = eval_save,
    .load = eval_load, .epoch_end = eval_epoch_end, .destroy = eval_destroy,
};

int zp_backend_eval_create(zp_backend_t **out, zp_stage_t *st, zp_comm_t *comm)
{
    int dims[ZP_MLP_MAX_LAYERS + 1], L;
    char dir[PATH_MAX], ckpts[PATH_MAX + 16];
    *out = NULL;
    eval_t *b = calloc(1, sizeof *b);
    if (!b)
        return ZP_ENOMEM;
    b->base = (zp_backend_t){&eval_ops, st, comm};
    zp_backend_t *base = &b->base;
    int rc = zp_backend_dims(st, dims, &L);
    parent_dir(st, dir, sizeof dir);
    snprintf(ckpts, sizeof ckpts, "%s/checkpoints", dir);
    if (!rc)
        rc = zp_scores_open(&b->eval, st->ckpts, ckpts, dims, L, (int)st->cfg.batch_size);
    if (!rc)
        rc = zp_backend_input_init(&b->in, st, 1, 0);
    if (rc) {
        eval_destroy(&base);
        return rc;
    }
    *out = base;
    return 0;
}

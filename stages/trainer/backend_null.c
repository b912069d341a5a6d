/* backend_null.c — trainer.backend: null: no model. The ring is consumed and
 * every epoch's coverage proved, nothing is computed (a pipeline's ceiling).
 * With trainer.debug.log_batches, uint8 samples are still normalised, so
 * that batches.log holds what a model would have been given. */
#define _GNU_SOURCE
#include "schemas/errors.h"
#include "stages/trainer/backend.h"

#include <stdlib.h>

typedef struct {
    zp_backend_t base;
    zp_backend_input_t in;
} null_t;

static int null_attach(zp_backend_t *b, zp_ring_t *ring) { return 0; }

static int null_input(zp_backend_t *base, const zp_batch_view_t *v, const void **x,
                      size_t *sample_bytes, int64_t *compute_ns)
{
    *x = zp_backend_input(&((null_t *)base)->in, v, compute_ns);
    *sample_bytes = (size_t)base->st->meta.elems * sizeof(float);
    return 0;
}

static int null_batch(zp_backend_t *b, const zp_batch_view_t *v, const zp_step_t *s,
                      zp_batch_out_t *out)
{
    if (v->split == ZP_SPLIT_TRAIN)
        out->win_samples += v->n;
    return 0;
}

static int null_collect(zp_backend_t *b, int split, const zp_step_t *s, zp_batch_out_t *out)
{
    return 0;
}
static size_t null_state_bytes(const zp_backend_t *b) { return 0; }
static int null_save(zp_backend_t *b, void *buf) { return 0; }
static int null_load(zp_backend_t *b, const void *buf, size_t bytes) { return ZP_EINVAL; }
static int null_epoch_end(zp_backend_t *b, int split) { return 0; }

static void null_destroy(zp_backend_t **bp)
{
    null_t *b = (null_t *)*bp;
    if (!b)
        return;
    zp_backend_input_free(&b->in);
    free(b);
    *bp = NULL;
}

static const zp_backend_ops_t null_ops = {
    .name = "null", .metrics = 0, .attach = null_attach, .input = null_input, .batch = null_batch,
    .collect = null_collect, .state_bytes = null_state_bytes, .save = null_save,
    .load = null_load, .epoch_end = null_epoch_end, .destroy = null_destroy,
};

int zp_backend_null_create(zp_backend_t **out, zp_stage_t *st, zp_comm_t *comm)
{
    *out = NULL;
    null_t *b = calloc(1, sizeof *b);
    if (!b)
        return ZP_ENOMEM;
    b->base = (zp_backend_t){&null_ops, st, comm};
    zp_backend_t *base = &b->base;
    int rc = zp_backend_input_init(&b->in, st, (int)st->cfg.log_batches, 0);
    if (rc) {
        null_destroy(&base);
        return rc;
    }
    *out = base;
    return 0;
}

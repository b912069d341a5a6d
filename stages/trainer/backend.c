/* backend.c — picks the backend, and what the implementations share: the
 * model's shape, the optimizer's settings, the host's view of a batch. */
#define _GNU_SOURCE
#include "stages/trainer/backend.h"
#include "pipeline/base/log.h"
#include "stages/trainer/gpu.h"

#include <stdlib.h>
#include <string.h>

void openblas_set_num_threads(int);

/* trainer.backend with auto resolved: cuda where a GPU is found (eval and
 * overfit run on the cpu backend). */
static int pick(const zp_stage_t *st, int *backend)
{
    *backend = st->cfg.backend;
    if (*backend != ZP_BACKEND_CUDA && *backend != ZP_BACKEND_AUTO)
        return 0;
    if (st->mode == ZP_MODE_EVAL || st->mode == ZP_MODE_OVERFIT) {
        *backend = ZP_BACKEND_CPU;
        return 0;
    }
    char why[256];
    int n = zp_gpu_count(why, sizeof why);
    if (n > 0) {
        *backend = ZP_BACKEND_CUDA;
    } else if (*backend == ZP_BACKEND_CUDA) {
        zp_error("trainer.backend: cuda: no GPU to use: %s", why);
        return ZP_EGPU;
    } else {
        zp_info("trainer.backend: auto: no GPU (%s), so the cpu backend", why);
        *backend = ZP_BACKEND_CPU;
    }
    return 0;
}

int zp_backend_create(zp_backend_t **out, zp_stage_t *st, zp_comm_t *comm)
{
    *out = NULL;
    int backend, rc = pick(st, &backend);
    if (rc)
        return rc;
    /* every model on the host (cpu, eval; cuda's host copy) sums in the same order */
    openblas_set_num_threads((int)st->cfg.threads);
    if (backend == ZP_BACKEND_NULL)
        return zp_backend_null_create(out, st, comm);
    if (backend == ZP_BACKEND_CUDA)
        return zp_backend_cuda_create(out, st, comm);
    if (st->mode == ZP_MODE_EVAL)
        return zp_backend_eval_create(out, st, comm);
    return zp_backend_cpu_create(out, st, comm);
}

void zp_backend_destroy(zp_backend_t **b)
{
    if (b && *b)
        (*b)->ops->destroy(b);
}

int zp_backend_dims(const zp_stage_t *st, int *dims, int *layers)
{
    const zp_config_t *c = &st->cfg;
    int L = c->hidden.n + 1;
    if (L > ZP_MLP_MAX_LAYERS) {
        zp_error("trainer.model.hidden: %d layers, at most %d", c->hidden.n, ZP_MLP_MAX_LAYERS - 1);
        return ZP_EINVAL;
    }
    dims[0] = (int)st->meta.elems;
    for (int i = 0; i < c->hidden.n; i++)
        dims[i + 1] = (int)c->hidden.v[i];
    dims[L] = (int)st->meta.classes;
    *layers = L;
    return 0;
}

zp_opt_t zp_backend_opt(const zp_config_t *c)
{
    return (zp_opt_t){.kind = c->optimizer == ZP_OPTIM_ADAMW ? ZP_OPT_ADAMW : ZP_OPT_SGD,
                      .lr = (float)c->lr, .momentum = (float)c->momentum,
                      .weight_decay = (float)c->weight_decay, .beta1 = (float)c->betas.v[0],
                      .beta2 = (float)c->betas.v[1], .eps = (float)c->eps};
}

int zp_backend_input_init(zp_backend_input_t *h, zp_stage_t *st, int normalise, int augment)
{
    memset(h, 0, sizeof *h);
    h->st = st;
    size_t floats = (size_t)st->cfg.batch_size * (size_t)st->meta.elems;
    if (normalise && st->meta.dtype == ZP_DTYPE_U8 &&
        (!(h->lut = zp_dataset_normalize_lut(&st->cfg, st->meta.shape[0])) ||
         !(h->norm = malloc(sizeof(float) * floats))))
        return ZP_ENOMEM;
    int rc = augment ? zp_augment_init(&h->aug, &st->cfg, (int)st->meta.shape[0],
                                       (int)st->meta.shape[1], (int)st->meta.shape[2])
                     : 0;
    if (!rc && h->aug.on && !(h->augmented = malloc(sizeof(float) * floats)))
        rc = ZP_ENOMEM;
    return rc;
}

const float *zp_backend_input(zp_backend_input_t *h, const zp_batch_view_t *v, int64_t *compute_ns)
{
    zp_timers_t *tm = &h->st->timers;
    size_t elems = (size_t)h->st->meta.elems;
    const float *x = v->data;
    if (h->norm) {
        const uint8_t *data = v->data;
        ZP_TIME_BEGIN(tm, ZP_R_TRANSFORM);
        for (int i = 0; i < v->n; i++)
            zp_dataset_normalize(h->lut, &h->st->meta, data + (size_t)i * elems, h->norm + (size_t)i * elems);
        *compute_ns += ZP_TIME_END(tm, ZP_R_TRANSFORM);
        x = h->norm;
    }
    if (h->aug.on && v->split == ZP_SPLIT_TRAIN && v->n > 0) {
        ZP_TIME_BEGIN(tm, ZP_R_AUGMENT);
        for (int i = 0; i < v->n; i++)
            zp_augment(&h->aug, v->epoch, v->idx[i], x + (size_t)i * elems,
                       h->augmented + (size_t)i * elems);
        *compute_ns += ZP_TIME_END(tm, ZP_R_AUGMENT);
        x = h->augmented;
    }
    return x;
}

void zp_backend_input_free(zp_backend_input_t *h)
{
    zp_augment_free(&h->aug);
    free(h->lut);
    free(h->norm);
    free(h->augmented);
    h->lut = h->norm = h->augmented = NULL;
}

/* nan_guard.c — see nan_guard.h. */
#define _GNU_SOURCE
#include "stages/trainer/nan_guard.h"
#include "pipeline/base/log.h"
#include "pipeline/dataset/dataset.h"

#include <limits.h>
#include <stdio.h>

int zp_nan_guard_stop(const char *run_dir, int64_t step, const zp_batch_view_t *v, int layer,
                const char *tensor, const char *what)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/nan-batch.txt", run_dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "# step %lld, epoch %llu, batch %llu, split %s: %llu sample indices\n",
                (long long)step + 1, (unsigned long long)v->epoch + 1,
                (unsigned long long)v->index + 1, zp_dataset_split_name(v->split),
                (unsigned long long)v->n);
        for (int i = 0; i < v->n; i++)
            fprintf(f, "%u\n", v->idx[i]);
        if (fclose(f))
            f = NULL;
    }
    zp_error("step %lld (epoch %llu, batch %llu): %s: layer %d %s holds NaN or infinity; "
             "the batch's sample indices are in %s",
             (long long)step + 1, (unsigned long long)v->epoch + 1, (unsigned long long)v->index + 1,
             what, layer + 1, tensor, f ? path : "(cannot be written)");
    return ZP_EINVAL;
}

int zp_nan_guard_due(const zp_config_t *c, int64_t step)
{
    return c->nan_at_step && step + 1 == c->nan_at_step;
}

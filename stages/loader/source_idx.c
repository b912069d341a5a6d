/* source_idx.c — the MNIST family: gzip IDX image files, read whole. The
 * labels come from the supervisor's probe (meta->probed) when the stage has
 * it, so that they are gunzipped once per run; else from the label files. */
#include "stages/loader/source.h"
#include "pipeline/base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    zp_source_t base;
    zp_idx_t images[ZP_SPLITS];
    const int32_t *label[ZP_SPLITS]; /* the probe's, or own[] */
    int32_t *own[ZP_SPLITS];         /* read here when there is no probe; owned */
    size_t sample_bytes;
} idx_source_t;

static int idx_get(zp_source_t *src, int split, uint32_t index, uint8_t *pixels, int32_t *label,
                   char *err, size_t errlen)
{
    idx_source_t *s = (idx_source_t *)src;
    memcpy(pixels, s->images[split].data + (size_t)index * s->sample_bytes, s->sample_bytes);
    *label = s->label[split][index];
    (void)err;
    (void)errlen;
    return 0;
}

static void idx_destroy(zp_source_t *src)
{
    idx_source_t *s = (idx_source_t *)src;
    for (int i = 0; i < ZP_SPLITS; i++) {
        zp_dataset_idx_free(&s->images[i]);
        free(s->own[i]);
    }
    free(s);
}

/* The labels of split sp from its file, checked (no probe to take them from). */
static int read_labels(idx_source_t *s, const zp_config_t *cfg, const zp_dataset_meta_t *meta,
                       int sp, char *err, size_t errlen)
{
    char path[600];
    zp_idx_t lab;
    zp_dataset_file(cfg, sp == ZP_SPLIT_TRAIN ? cfg->train_labels : cfg->test_labels, path, sizeof path);
    int rc = zp_dataset_idx_read(path, 1, &lab, err, errlen);
    if (!rc && lab.bytes != (size_t)meta->n[sp]) {
        snprintf(err, errlen, "%s: %zu labels for %lld images", path, lab.bytes, (long long)meta->n[sp]);
        rc = ZP_EDATA;
    }
    for (size_t i = 0; !rc && i < lab.bytes; i++)
        rc = zp_dataset_label_check(meta, path, (int64_t)i, lab.data[i], err, errlen);
    if (!rc && !(s->own[sp] = malloc(sizeof(int32_t) * (lab.bytes ? lab.bytes : 1))))
        rc = ZP_ENOMEM;
    for (size_t i = 0; !rc && i < lab.bytes; i++)
        s->own[sp][i] = lab.data[i];
    s->label[sp] = s->own[sp];
    zp_dataset_idx_free(&lab);
    return rc;
}

int zp_source_idx_create(zp_source_t **out, const zp_config_t *cfg, const zp_dataset_meta_t *meta,
                       char *err, size_t errlen)
{
    *out = NULL;
    idx_source_t *s = calloc(1, sizeof *s);
    if (!s)
        return ZP_ENOMEM;
    s->base.get = idx_get;
    s->base.destroy = idx_destroy;
    s->sample_bytes = (size_t)meta->elems;
    const char *files[ZP_SPLITS][2] = {{cfg->train_images, cfg->train_labels},
                                       {cfg->test_images, cfg->test_labels}};
    char path[600];
    for (int sp = 0; sp < ZP_SPLITS; sp++) {
        zp_dataset_file(cfg, files[sp][0], path, sizeof path);
        int rc = zp_dataset_idx_read(path, 1, &s->images[sp], err, errlen);
        if (!rc && (s->images[sp].dims[0] != meta->n[sp] ||
                    s->images[sp].bytes != (size_t)meta->n[sp] * s->sample_bytes)) {
            snprintf(err, errlen, "%s: changed while the run started", path);
            rc = ZP_EDATA;
        }
        if (!rc && meta->probed && meta->probed->split[sp].n == meta->n[sp])
            s->label[sp] = meta->probed->split[sp].label;
        else if (!rc)
            rc = read_labels(s, cfg, meta, sp, err, errlen);
        if (rc) {
            idx_destroy(&s->base);
            return rc;
        }
    }
    *out = &s->base;
    return 0;
}

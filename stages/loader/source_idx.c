/* source_idx.c — the MNIST family: gzip IDX image and label files, read whole. */
#include "stages/loader/source.h"
#include "pipeline/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    zp_source_t base;
    zp_idx_t images[ZP_SPLITS], labels[ZP_SPLITS];
    size_t sample_bytes;
} idx_source_t;

static int idx_get(zp_source_t *src, int split, uint32_t index, uint8_t *pixels, int32_t *label,
                   char *err, size_t errlen)
{
    idx_source_t *s = (idx_source_t *)src;
    memcpy(pixels, s->images[split].data + (size_t)index * s->sample_bytes, s->sample_bytes);
    *label = s->labels[split].data[index];
    (void)err;
    (void)errlen;
    return 0;
}

static void idx_destroy(zp_source_t *src)
{
    idx_source_t *s = (idx_source_t *)src;
    for (int i = 0; i < ZP_SPLITS; i++) {
        zp_idx_free(&s->images[i]);
        zp_idx_free(&s->labels[i]);
    }
    free(s);
}

int zp_source_idx_open(zp_source_t **out, const zp_config_t *cfg, const zp_dataset_meta_t *meta,
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
        int rc = zp_idx_read(path, 1, &s->images[sp], err, errlen);
        if (!rc && (s->images[sp].dims[0] != meta->n[sp] ||
                    s->images[sp].bytes != (size_t)meta->n[sp] * s->sample_bytes)) {
            snprintf(err, errlen, "%s: changed while the run started", path);
            rc = ZP_EDATA;
        }
        if (!rc) {
            zp_dataset_file(cfg, files[sp][1], path, sizeof path);
            rc = zp_idx_read(path, 1, &s->labels[sp], err, errlen);
        }
        if (!rc && s->labels[sp].bytes != (size_t)meta->n[sp]) {
            snprintf(err, errlen, "%s: %zu labels for %lld images", path, s->labels[sp].bytes,
                     (long long)meta->n[sp]);
            rc = ZP_EDATA;
        }
        for (size_t i = 0; !rc && i < s->labels[sp].bytes; i++)
            rc = zp_label_check(meta, path, (int64_t)i, s->labels[sp].data[i], err, errlen);
        if (rc) {
            idx_destroy(&s->base);
            return rc;
        }
    }
    *out = &s->base;
    return 0;
}

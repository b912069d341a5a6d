/* source_synthetic.c — dataset.source: synthetic, generated samples:
 * deterministic pixels and labels from (seed, split, index), of the shape
 * and count dataset.synthetic.* say, and a configurable CPU cost per sample. */
#include "pipeline/source/source.h"
#include "pipeline/base/hash.h"
#include "pipeline/base/log.h"

#include <stdio.h>
#include <string.h>
#include <stdlib.h>

typedef struct {
    zp_source_t base;
    uint64_t seed;
    int64_t elems, classes, cost_ns, corrupt_every;
} synth_source_t;

static int synth_get(zp_source_t *src, int split, uint32_t index, uint8_t *pixels, int32_t *label,
                     char *err, size_t errlen)
{
    synth_source_t *s = (synth_source_t *)src;
    int64_t until = s->cost_ns ? zp_now_ns() + s->cost_ns : 0;
    zp_rng_t r;
    zp_rng_seed(&r, s->seed ^ zp_mix64(((uint64_t)split << 32) | index));
    *label = (int32_t)zp_rng_below(&r, (uint64_t)s->classes);
    /* Pixels carry the label (a brighter band per class) so a model can learn them. */
    for (int64_t i = 0; i < s->elems; i += 8) {
        uint64_t v = zp_rng_next(&r);
        for (int64_t j = i; j < i + 8 && j < s->elems; j++, v >>= 8)
            pixels[j] = (uint8_t)((v & 0x7f) + ((j * s->classes / s->elems) == *label ? 128 : 0));
    }
    while (until && zp_now_ns() < until)
        ; /* the configured CPU cost: spin, as a decoder would */
    if (s->corrupt_every && (index + 1) % (uint64_t)s->corrupt_every == 0) {
        snprintf(err, errlen, "synthetic %s sample %u: corrupt (dataset.synthetic.corrupt_every)",
                 zp_dataset_split_name(split), index);
        return ZP_EDATA;
    }
    return 0;
}

static void synth_destroy(zp_source_t *src) { free(src); }

static int synth_open(zp_source_t **out, const zp_config_t *cfg, const zp_dataset_meta_t *meta,
                      char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    synth_source_t *s = calloc(1, sizeof *s);
    if (!s)
        return ZP_ENOMEM;
    s->base.get = synth_get;
    s->base.destroy = synth_destroy;
    s->seed = zp_mix64((uint64_t)cfg->seed + 0x5eed);
    s->elems = meta->elems;
    s->classes = meta->classes;
    s->cost_ns = cfg->synth_cost_us * 1000;
    s->corrupt_every = cfg->synth_corrupt;
    *out = &s->base;
    return 0;
}

/* A sample's values must fit in one message (ZP_MAX_ELEMS): beyond, every
 * SAMPLES would be refused as malformed and the run would wait forever. Each
 * dimension is at most 65536: no product overflows. */
static int synth_check(const zp_config_t *cfg, char *err, size_t len)
{
    const char *shape = "dataset.synthetic.shape";
    int64_t elems = 1;
    for (int i = 0; i < cfg->synth_shape.n && i < 3; i++)
        elems *= cfg->synth_shape.v[i];
    if (cfg->synth_shape.n < 1 || cfg->synth_shape.n > 3)
        return zp_config_fail(cfg, shape, err, len, "needs 1 to 3 dimensions (got %d)",
                              cfg->synth_shape.n);
    if (elems > ZP_MAX_ELEMS)
        return zp_config_fail(cfg, shape, err, len, "%lld values a sample, more than a message "
                              "carries (ZP_MAX_ELEMS = %u)", (long long)elems, ZP_MAX_ELEMS);
    return 0;
}

static void synth_name(const zp_config_t *cfg, char *buf, size_t len)
{
    (void)cfg;
    snprintf(buf, len, "synthetic");
}

static void synth_identify(const zp_config_t *cfg, FILE *out)
{
    fprintf(out, "synthetic %lld %lld %lld %lld %lld", (long long)cfg->synth_train,
            (long long)cfg->synth_test, (long long)cfg->synth_classes,
            (long long)cfg->synth_cost_us, (long long)cfg->synth_corrupt);
    for (int i = 0; i < cfg->synth_shape.n; i++)
        fprintf(out, " %lld", (long long)cfg->synth_shape.v[i]);
}

/* The shape right-aligned in (channels, height, width): [784] is 1 x 1 x 784. */
static int synth_probe(const zp_config_t *cfg, zp_dataset_t *ds, char *err, size_t len)
{
    (void)err;
    (void)len;
    zp_dataset_meta_t *m = &ds->meta;
    m->n[ZP_SPLIT_TRAIN] = cfg->synth_train;
    m->n[ZP_SPLIT_TEST] = cfg->synth_test;
    m->shape[0] = m->shape[1] = m->shape[2] = 1;
    for (int i = 0; i < cfg->synth_shape.n; i++)
        m->shape[3 - cfg->synth_shape.n + i] = cfg->synth_shape.v[i];
    m->classes = cfg->synth_classes;
    return 0;
}

static int synth_fingerprint(const zp_config_t *cfg, const zp_dataset_meta_t *m, int split,
                             char *buf, size_t len)
{
    (void)m;
    (void)split;
    snprintf(buf, len, "source: synthetic seed=%lld classes=%lld\n", (long long)cfg->seed,
             (long long)cfg->synth_classes);
    return 0;
}

const zp_source_ops_t zp_source_synthetic = {
    .name = "synthetic",
    .check = synth_check,
    .dataset_name = synth_name,
    .identify = synth_identify,
    .probe = synth_probe,
    .fingerprint = synth_fingerprint,
    .open = synth_open,
};

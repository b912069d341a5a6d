/* source_synthetic.c — generated samples: deterministic pixels and labels from
 * (seed, split, index), and a configurable CPU cost per sample. */
#include "stages/loader/source.h"
#include "pipeline/base/hash.h"
#include "pipeline/base/log.h"

#include <stdio.h>
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

int zp_source_synthetic_create(zp_source_t **out, const zp_config_t *cfg,
                             const zp_dataset_meta_t *meta, char *err, size_t errlen)
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

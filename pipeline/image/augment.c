/* augment.c — random augmentation of train samples (see augment.h). */
#include "pipeline/image/augment.h"
#include "pipeline/base/hash.h"
#include "pipeline/base/log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int zp_augment_init(zp_augment_t *a, const zp_config_t *cfg, int c, int h, int w)
{
    memset(a, 0, sizeof *a);
    if (cfg->dataset_source == ZP_SOURCE_PYTHON)
        return 0; /* a Python Dataset's field is augmented where its sample is made (augment_field.h) */
    int whole = zp_augment_whole(cfg); /* the crop and flip are made with the sample */
    a->padding = (int)cfg->aug_padding;
    a->resized_crop = cfg->aug_resized_crop && !whole;
    a->hflip = cfg->aug_hflip && !whole;
    a->on = a->padding || a->resized_crop || a->hflip;
    if (!a->on)
        return 0;
    a->c = c;
    a->h = h;
    a->w = w;
    a->seed = (uint64_t)cfg->seed;
    for (int i = 0; i < 2; i++) {
        a->scale[i] = cfg->aug_scale.v[i];
        a->log_ratio[i] = log(cfg->aug_ratio.v[i]);
    }
    a->fill = malloc(sizeof *a->fill * (size_t)a->c);
    a->y0 = malloc(sizeof(int32_t) * (size_t)a->h);
    a->y1 = malloc(sizeof(int32_t) * (size_t)a->h);
    a->fy = malloc(sizeof(float) * (size_t)a->h);
    a->x0 = malloc(sizeof(int32_t) * (size_t)a->w);
    a->x1 = malloc(sizeof(int32_t) * (size_t)a->w);
    a->fx = malloc(sizeof(float) * (size_t)a->w);
    if (!a->fill || !a->y0 || !a->y1 || !a->fy || !a->x0 || !a->x1 || !a->fx) {
        zp_augment_free(a);
        return ZP_ENOMEM;
    }
    for (int ch = 0; ch < a->c; ch++) {
        double mean = cfg->mean.v[cfg->mean.n > ch ? ch : 0];
        double std = cfg->std.v[cfg->std.n > ch ? ch : 0];
        a->fill[ch] = (float)(-mean / std);
    }
    return 0;
}

void zp_augment_free(zp_augment_t *a)
{
    free(a->fill);
    free(a->y0);
    free(a->y1);
    free(a->fy);
    free(a->x0);
    free(a->x1);
    free(a->fx);
    memset(a, 0, sizeof *a);
}

static double uniform(zp_rng_t *r, double lo, double hi)
{
    return lo + (hi - lo) * zp_rng_float(r);
}

/* torchvision's RandomResizedCrop.get_params on an ih x iw image: ten tries
 * at a box of a random area and side ratio that fits, then the largest
 * centred box of an allowed ratio. */
static void resized_crop_box(const double scale[2], const double log_ratio[2], int ih, int iw,
                             zp_rng_t *r, zp_aug_draw_t *d)
{
    double area = (double)ih * iw;
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * uniform(r, scale[0], scale[1]);
        double ratio = exp(uniform(r, log_ratio[0], log_ratio[1]));
        int w = (int)lround(sqrt(target * ratio)), h = (int)lround(sqrt(target / ratio));
        if (w > 0 && w <= iw && h > 0 && h <= ih) {
            d->box_y = (double)zp_rng_below(r, (uint64_t)(ih - h + 1));
            d->box_x = (double)zp_rng_below(r, (uint64_t)(iw - w + 1));
            d->box_h = h;
            d->box_w = w;
            return;
        }
    }
    double in_ratio = (double)iw / ih, lo = exp(log_ratio[0]), hi = exp(log_ratio[1]);
    int w = iw, h = ih;
    if (in_ratio < lo)
        h = (int)lround(w / lo);
    else if (in_ratio > hi)
        w = (int)lround(h * hi);
    d->box_h = h > ih ? ih : h;
    d->box_w = w > iw ? iw : w;
    d->box_y = (ih - (int)d->box_h) / 2;
    d->box_x = (iw - (int)d->box_w) / 2;
}

/* The generator of sample `index` in `epoch`: every draw of a sample starts here. */
static void sample_rng(zp_rng_t *r, uint64_t seed, uint64_t epoch, uint32_t index)
{
    zp_rng_seed(r, zp_mix64(zp_mix64(zp_mix64(seed ^ 0x61756733ull) ^ epoch) ^ index));
}

void zp_augment_draw(const zp_augment_t *a, uint64_t epoch, uint32_t index, zp_aug_draw_t *d)
{
    zp_rng_t r;
    sample_rng(&r, a->seed, epoch, index);
    *d = (zp_aug_draw_t){.box_h = a->h, .box_w = a->w};
    if (a->resized_crop)
        resized_crop_box(a->scale, a->log_ratio, a->h, a->w, &r, d);
    if (a->padding) {
        d->dy = (int)zp_rng_below(&r, (uint64_t)(2 * a->padding + 1));
        d->dx = (int)zp_rng_below(&r, (uint64_t)(2 * a->padding + 1));
    }
    if (a->hflip)
        d->flip = (int)(zp_rng_next(&r) >> 63);
}

void zp_augment(zp_augment_t *a, uint64_t epoch, uint32_t index, const float *in, float *out)
{
    zp_aug_draw_t d;
    zp_augment_draw(a, epoch, index, &d);
    int h = a->h, w = a->w, p = a->padding;
    for (int y = 0; y < h; y++)
        zp_augment_axis(h, y + d.dy - p, d.box_y, d.box_h, &a->y0[y], &a->y1[y], &a->fy[y]);
    for (int x = 0; x < w; x++)
        zp_augment_axis(w, (d.flip ? w - 1 - x : x) + d.dx - p, d.box_x, d.box_w, &a->x0[x], &a->x1[x],
                 &a->fx[x]);
    size_t plane = (size_t)h * w;
    for (int ch = 0; ch < a->c; ch++) {
        const float *src = in + ch * plane;
        float *dst = out + ch * plane, fill = a->fill[ch];
        for (int y = 0; y < h; y++, dst += w) {
            if (a->y0[y] < 0) {
                for (int x = 0; x < w; x++)
                    dst[x] = fill;
                continue;
            }
            const float *r0 = src + (size_t)a->y0[y] * w, *r1 = src + (size_t)a->y1[y] * w;
            float fy = a->fy[y];
            for (int x = 0; x < w; x++) {
                int x0 = a->x0[x], x1 = a->x1[x];
                if (x0 < 0) {
                    dst[x] = fill;
                    continue;
                }
                float fx = a->fx[x];
                float top = r0[x0] + (r0[x1] - r0[x0]) * fx;
                float bot = r1[x0] + (r1[x1] - r1[x0]) * fx;
                dst[x] = top + (bot - top) * fy;
            }
        }
    }
}

int zp_augment_whole(const zp_config_t *cfg)
{
    int image = cfg->dataset_source == ZP_SOURCE_IMAGE_FOLDER ||
                cfg->dataset_source == ZP_SOURCE_IMAGE_LIST;
    return image && cfg->aug_resized_crop;
}

void zp_augment_whole_size(int64_t side, int w, int h, int *cw, int *ch)
{
    int longer = w > h ? w : h;
    *cw = w, *ch = h;
    if (longer <= side)
        return;
    double f = (double)side / longer;
    *cw = w >= h ? (int)side : (int)lround(w * f);
    *ch = h >= w ? (int)side : (int)lround(h * f);
    *cw = *cw < 1 ? 1 : *cw;
    *ch = *ch < 1 ? 1 : *ch;
}

void zp_augment_rrc_init(zp_rrc_t *r, const zp_config_t *cfg)
{
    r->seed = (uint64_t)cfg->seed;
    for (int i = 0; i < 2; i++) {
        r->scale[i] = cfg->aug_scale.v[i];
        r->log_ratio[i] = log(cfg->aug_ratio.v[i]);
    }
    r->hflip = cfg->aug_hflip;
}

void zp_augment_rrc_draw(const zp_rrc_t *r, uint64_t epoch, uint32_t index, int h, int w, zp_aug_draw_t *d)
{
    zp_rng_t g;
    sample_rng(&g, r->seed, epoch, index);
    *d = (zp_aug_draw_t){0};
    resized_crop_box(r->scale, r->log_ratio, h, w, &g, d);
    if (r->hflip)
        d->flip = (int)(zp_rng_next(&g) >> 63);
}

zp_crop_t zp_augment_crop_of(const zp_aug_draw_t *d, int w, int h)
{
    /* the box's corners and sides are whole pixels (resized_crop_box) */
    return (zp_crop_t){.x = (int32_t)d->box_x, .y = (int32_t)d->box_y, .w = (int32_t)d->box_w,
                       .h = (int32_t)d->box_h, .flip = d->flip, .img_w = w, .img_h = h};
}

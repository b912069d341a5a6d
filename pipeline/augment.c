/* augment.c — random augmentation of train samples (see augment.h). */
#include "pipeline/augment.h"
#include "pipeline/hash.h"
#include "pipeline/log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int zp_augment_init(zp_augment_t *a, const zp_config_t *cfg, const zp_dataset_meta_t *meta)
{
    memset(a, 0, sizeof *a);
    a->padding = (int)cfg->aug_padding;
    a->resized_crop = cfg->aug_resized_crop;
    a->hflip = cfg->aug_hflip;
    a->on = a->padding || a->resized_crop || a->hflip;
    if (!a->on)
        return 0;
    a->c = (int)meta->shape[0];
    a->h = (int)meta->shape[1];
    a->w = (int)meta->shape[2];
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

/* torchvision's RandomResizedCrop.get_params: ten tries at a box of a random
 * area and side ratio that fits, then the largest centred box of an allowed ratio. */
static void resized_crop_box(const zp_augment_t *a, zp_rng_t *r, zp_aug_draw_t *d)
{
    double area = (double)a->h * a->w;
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * uniform(r, a->scale[0], a->scale[1]);
        double ratio = exp(uniform(r, a->log_ratio[0], a->log_ratio[1]));
        int w = (int)lround(sqrt(target * ratio)), h = (int)lround(sqrt(target / ratio));
        if (w > 0 && w <= a->w && h > 0 && h <= a->h) {
            d->box_y = (double)zp_rng_below(r, (uint64_t)(a->h - h + 1));
            d->box_x = (double)zp_rng_below(r, (uint64_t)(a->w - w + 1));
            d->box_h = h;
            d->box_w = w;
            return;
        }
    }
    double in_ratio = (double)a->w / a->h, lo = exp(a->log_ratio[0]), hi = exp(a->log_ratio[1]);
    int w = a->w, h = a->h;
    if (in_ratio < lo)
        h = (int)lround(w / lo);
    else if (in_ratio > hi)
        w = (int)lround(h * hi);
    d->box_h = h > a->h ? a->h : h;
    d->box_w = w > a->w ? a->w : w;
    d->box_y = (a->h - (int)d->box_h) / 2;
    d->box_x = (a->w - (int)d->box_w) / 2;
}

void zp_augment_draw(const zp_augment_t *a, uint64_t epoch, uint32_t index, zp_aug_draw_t *d)
{
    zp_rng_t r;
    zp_rng_seed(&r, zp_mix64(zp_mix64(zp_mix64(a->seed ^ 0x61756733ull) ^ epoch) ^ index));
    *d = (zp_aug_draw_t){.box_h = a->h, .box_w = a->w};
    if (a->resized_crop)
        resized_crop_box(a, &r, d);
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

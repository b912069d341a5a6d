/* augment_field.c — the built-in augmentation of a Python Dataset's image
 * field (augment_field.h). */
#include "pipeline/dataset/augment_field.h"
#include "pipeline/base/buf.h"
#include "pipeline/dataset/dataset.h"
#include "schemas/errors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int zp_augment_field_wanted(const zp_config_t *cfg)
{
    return cfg->dataset_source == ZP_SOURCE_PYTHON &&
           (cfg->aug_resized_crop || cfg->aug_hflip || cfg->aug_padding || cfg->aug_size);
}

/* The delivered fields: `in` with field k at oh x ow, in its layout. */
static int remake_fields(zp_augment_field_t *a, char *err, size_t len)
{
    memset(&a->out, 0, sizeof a->out);
    a->out.item = a->in.item;
    for (int i = 0; i < a->in.n; i++) {
        const zp_field_t *f = &a->in.f[i];
        int64_t shape[ZP_FIELD_DIMS];
        memcpy(shape, f->shape, sizeof shape);
        if (i == a->field) {
            shape[a->chw ? 1 : 0] = a->oh;
            shape[a->chw ? 2 : 1] = a->ow;
        }
        int rc = zp_fields_add(&a->out, f->name, f->dtype, f->ndim, shape,
                               f->offset == ZP_FIELD_IN_LABELS, ZP_MAX_ELEMS, err, len);
        if (rc)
            return ZP_ECONFIG;
    }
    return 0;
}

int zp_augment_field_init(zp_augment_field_t *a, const zp_config_t *cfg, const zp_fields_t *in, char *err,
                     size_t len)
{
    memset(a, 0, sizeof *a);
    if (!zp_augment_field_wanted(cfg))
        return 0;
    a->in = *in;
    const zp_field_t *f = zp_fields_find(in, cfg->aug_field);
    if (!f) {
        snprintf(err, len, "dataset.augment.field: the Dataset's items have no field '%s' (give "
                 "the name of their uint8 image field)", cfg->aug_field);
        return ZP_ECONFIG;
    }
    a->field = (int)(f - in->f);
    int chw = f->ndim == 3 && f->shape[0] == 3, hwc = f->ndim == 3 && f->shape[2] == 3;
    if (f->dtype != ZP_FT_U8 || (!chw && !hwc)) {
        snprintf(err, len, "dataset.augment.field: field '%s' is %s of %d dimensions; the built-in "
                 "augmentation takes a uint8 RGB image, 3 x H x W or H x W x 3 (else use "
                 "dataset.python.augment.train)", f->name, zp_fields_type_name(f->dtype), f->ndim);
        return ZP_ECONFIG;
    }
    a->chw = chw;
    a->h = (int)f->shape[chw ? 1 : 0];
    a->w = (int)f->shape[chw ? 2 : 1];
    a->oh = cfg->aug_size ? (int)cfg->aug_size : a->h;
    a->ow = cfg->aug_size ? (int)cfg->aug_size : a->w;
    if (cfg->aug_padding && (a->oh != a->h || a->ow != a->w) && !cfg->aug_resized_crop) {
        snprintf(err, len, "dataset.augment.size: a padded crop keeps the field's size (%d x %d): "
                 "set dataset.augment.resized_crop: true to resize, or size 0", a->h, a->w);
        return ZP_ECONFIG;
    }
    a->on[0] = 1;
    a->on[1] = a->oh != a->h || a->ow != a->w;
    zp_augment_t *d = &a->drawer;
    d->h = a->h, d->w = a->w;
    d->padding = (int)cfg->aug_padding;
    d->resized_crop = cfg->aug_resized_crop;
    d->hflip = cfg->aug_hflip;
    d->seed = (uint64_t)cfg->seed;
    for (int i = 0; i < 2; i++) {
        d->scale[i] = cfg->aug_scale.v[i];
        d->log_ratio[i] = log(cfg->aug_ratio.v[i]);
    }
    return remake_fields(a, err, len);
}

/* The field of `in` as RGB rows (HWC): itself, or its planes interleaved. */
static const uint8_t *as_rgb(const zp_augment_field_t *a, zp_augment_field_space_t *sp, const uint8_t *src)
{
    if (!a->chw)
        return src;
    size_t plane = (size_t)a->h * a->w;
    if (zp_buf_grow(&sp->rgb, &sp->rgb_cap, 3 * plane))
        return NULL;
    for (size_t p = 0; p < plane; p++)
        for (int c = 0; c < 3; c++)
            sp->rgb[3 * p + (size_t)c] = src[(size_t)c * plane + p];
    return sp->rgb;
}

/* The draw of a train sample; a test sample's: the centre at the output's ratio. */
static void draw(const zp_augment_field_t *a, int split, uint64_t epoch, uint32_t index,
                 zp_aug_draw_t *d)
{
    if (split == ZP_SPLIT_TRAIN) {
        zp_augment_draw(&a->drawer, epoch, index, d);
        return;
    }
    double want = (double)a->ow / a->oh, bw = a->w, bh = a->h;
    if (bw / bh > want)
        bw = round(bh * want);
    else
        bh = round(bw / want);
    int p = a->drawer.padding; /* dy = dx = p: no shift */
    *d = (zp_aug_draw_t){.box_x = floor((a->w - bw) / 2), .box_y = floor((a->h - bh) / 2),
                         .box_w = bw, .box_h = bh, .dy = p, .dx = p};
}

/* Output pixel (y, x) reads the resized box at (y + dy - p, x' + dx - p),
 * x' = x or its mirror: black outside. Into dst in the field's layout. */
static void shift_flip(const zp_augment_field_t *a, const zp_aug_draw_t *d, const uint8_t *box,
                       uint8_t *dst)
{
    int oh = a->oh, ow = a->ow, p = a->drawer.padding;
    size_t plane = (size_t)oh * ow;
    for (int y = 0; y < oh; y++) {
        int sy = y + d->dy - p;
        for (int x = 0; x < ow; x++) {
            int sx = (d->flip ? ow - 1 - x : x) + d->dx - p;
            const uint8_t *s = sy >= 0 && sy < oh && sx >= 0 && sx < ow
                                   ? box + 3 * ((size_t)sy * ow + (size_t)sx) : NULL;
            for (int c = 0; c < 3; c++) {
                uint8_t v = s ? s[c] : 0;
                if (a->chw)
                    dst[(size_t)c * plane + (size_t)y * ow + (size_t)x] = v;
                else
                    dst[3 * ((size_t)y * ow + (size_t)x) + (size_t)c] = v;
            }
        }
    }
}

int zp_augment_field_make(const zp_augment_field_t *a, zp_augment_field_space_t *sp, int split, uint64_t epoch,
                     uint32_t index, const uint8_t *in, uint8_t *out, zp_crop_t *crop)
{
    const zp_field_t *fi = &a->in.f[a->field], *fo = &a->out.f[a->field];
    zp_aug_draw_t d;
    draw(a, split, epoch, index, &d);
    const uint8_t *rgb = as_rgb(a, sp, in + fi->offset), *box = rgb;
    int resize = d.box_x != 0 || d.box_y != 0 || (int)d.box_w != a->w || (int)d.box_h != a->h ||
                 a->ow != a->w || a->oh != a->h;
    if (!rgb || zp_buf_grow(&sp->box, &sp->box_cap, 3 * (size_t)a->oh * a->ow))
        return ZP_ENOMEM;
    if (resize) {
        double b[4] = {d.box_x, d.box_y, d.box_w, d.box_h};
        if (zp_resample(&sp->rs, rgb, a->w, a->h, b, a->ow, a->oh, 0, ZP_RS_HWC_U8, NULL, sp->box))
            return ZP_ENOMEM;
        box = sp->box;
    }
    for (int i = 0; i < a->in.n; i++) /* the other fields as they are */
        if (i != a->field && a->in.f[i].offset != ZP_FIELD_IN_LABELS)
            memcpy(out + a->out.f[i].offset, in + a->in.f[i].offset, a->in.f[i].bytes);
    shift_flip(a, &d, box, out + fo->offset);
    int p = a->drawer.padding;
    *crop = (zp_crop_t){.x = (int32_t)d.box_x + (d.dx - p), .y = (int32_t)d.box_y + (d.dy - p),
                        .w = (int32_t)d.box_w, .h = (int32_t)d.box_h, .flip = d.flip,
                        .img_w = a->w, .img_h = a->h};
    return 0;
}

void zp_augment_field_space_free(zp_augment_field_space_t *sp)
{
    free(sp->rgb);
    free(sp->box);
    zp_resample_free(&sp->rs);
    memset(sp, 0, sizeof *sp);
}

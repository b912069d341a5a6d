/* source_image.c — dataset.source: image_folder (torchvision's ImageFolder
 * layout: CLASS/NAME.jpg) and image_list (a file of "PATH LABEL" lines), two
 * rows of one reader. The probe scans the folder or reads the list
 * (imagelist.h). The loader's reader: JPEG decoded by
 * libjpeg-turbo's TurboJPEG API (with DCT scaling when the target is at most
 * half the source), PNG by libpng; grayscale, CMYK and palette images become
 * RGB; then the deterministic transforms: resize of the shorter side to
 * dataset.image.resize (bilinear, half-pixel centres), center crop of
 * dataset.image.crop x crop, HWC -> CHW. A file that is not an image, is
 * truncated or does not decode is an error naming its path. The files and
 * labels come from the supervisor's probe (meta->probed) when the stage has
 * it: the folder is scanned once per run, not by every loader.
 *
 * With the crop at assembly (zp_augment_whole), a train sample is instead the
 * random-resized crop of the image drawn for (seed, epoch, index) on the
 * image as the cache keeps it (longer side at most dataset.image.cache_side),
 * resized to crop x crop (pipeline/image/resample.h) and flipped as drawn. With the
 * cache on, that whole image is made first and kept for the loader to send
 * (base.whole); with it off, the box is mapped onto the file's own pixels and
 * a JPEG is decoded at the smallest DCT scale that still covers the box at
 * the crop size, only the part of it that the resize reads (jpeg_region.h). */
#define _GNU_SOURCE
#include "pipeline/source/source.h"
#include "pipeline/base/buf.h"
#include "pipeline/dataset/imagelist.h"
#include "pipeline/image/augment.h"
#include "pipeline/image/resample.h"
#include "pipeline/image/jpeg_region.h"
#include "pipeline/base/log.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <turbojpeg.h>

/* The list file's row, not the folder's. */
static int is_list(const zp_config_t *cfg) { return cfg->dataset_source == ZP_SOURCE_IMAGE_LIST; }

typedef struct {
    zp_source_t base;
    const zp_imagelist_t *list[ZP_SPLITS]; /* the probe's (meta->probed), or own[] */
    zp_imagelist_t own[ZP_SPLITS];         /* scanned here when there is no probe */
    tjhandle tj;
    int resize, crop;
    uint8_t *file, *rgb, *scaled; /* reused buffers; owned */
    size_t file_cap, rgb_cap, scaled_cap;
    int whole;          /* train samples are cropped from the whole image (zp_augment_whole) */
    int keep;           /* ... and the whole image is made for the cache (cache.enabled) */
    int64_t side;       /* dataset.image.cache_side */
    int64_t max_pixels; /* dataset.image.max_pixels */
    zp_rrc_t rrc;
    zp_resample_t rs;
    zp_jpeg_region_t *region; /* cache off: the box of a JPEG decoded alone; NULL until needed */
    uint8_t *img;       /* the whole image as cached; owned */
    size_t img_cap;
} image_source_t;

static int read_file(image_source_t *s, const char *path, size_t *size, char *err, size_t len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, len, "%s: %s", path, strerror(errno));
        return ZP_EDATA;
    }
    int rc = 0;
    *size = 0;
    if (fseek(f, 0, SEEK_END) || (*size = (size_t)ftell(f)) == (size_t)-1 || fseek(f, 0, SEEK_SET))
        rc = ZP_EDATA;
    else if (*size == 0 || *size > (256u << 20))
        rc = ZP_EDATA;
    else if ((rc = zp_buf_grow(&s->file, &s->file_cap, *size)) == 0 && fread(s->file, 1, *size, f) != *size)
        rc = ZP_EDATA;
    fclose(f);
    if (rc)
        snprintf(err, len, "%s: %s", path, *size == 0 ? "empty file" : "cannot be read whole");
    return rc;
}

/* An image of w x h pixels is decoded only when its header's size is sane:
 * at least 1 x 1, at most dataset.image.max_pixels (checked before any
 * allocation: a decompression bomb is a bad sample, not an out-of-memory). */
static int sane_size(const image_source_t *s, const char *path, int64_t w, int64_t h, char *err,
                     size_t len)
{
    if (w < 1 || h < 1) {
        snprintf(err, len, "%s: no image in it (%lld x %lld pixels: a JPEG of tables only?)", path,
                 (long long)w, (long long)h);
        return ZP_EDATA;
    }
    if (w * h > s->max_pixels) {
        snprintf(err, len, "%s: %lld x %lld pixels, more than dataset.image.max_pixels (%lld): a "
                 "decompression bomb, or raise dataset.image.max_pixels", path, (long long)w,
                 (long long)h, (long long)s->max_pixels);
        return ZP_EDATA;
    }
    return 0;
}

static int jpeg_header(image_source_t *s, const char *path, size_t size, int *sw, int *sh, int *cs,
                       char *err, size_t len)
{
    int sub;
    *sw = *sh = 0; /* a stream of tables only sets neither */
    /* Each file decodes as it would alone: one without Huffman tables of its
     * own takes libjpeg's standard ones on a new decoder, not the last file's. */
    if (!zp_jpeg_region_has_tables(s->file, size)) {
        tjDestroy(s->tj);
        if (!(s->tj = tjInitDecompress()))
            return ZP_ENOMEM;
    }
    if (tjDecompressHeader3(s->tj, s->file, size, sw, sh, &sub, cs)) {
        snprintf(err, len, "%s: not a JPEG: %s", path, tjGetErrorStr2(s->tj));
        return ZP_EDATA;
    }
    return sane_size(s, path, *sw, *sh, err, len);
}

/* The smallest DCT scale at which an sw x sh JPEG is at least need_w x need_h. */
static tjscalingfactor scale_covering(int sw, int sh, double need_w, double need_h)
{
    int n;
    tjscalingfactor *f = tjGetScalingFactors(&n), best = {1, 1};
    for (int i = 0; i < n; i++)
        if (TJSCALED(sw, f[i]) >= need_w && TJSCALED(sh, f[i]) >= need_h &&
            f[i].num * best.denom < best.num * f[i].denom)
            best = f[i];
    return best;
}

/* JPEG into s->rgb (RGB) at DCT scale `best`. */
static int decode_jpeg_at(image_source_t *s, const char *path, size_t size, int sw, int sh, int cs,
                          tjscalingfactor best, int *w, int *h, char *err, size_t len)
{
    *w = TJSCALED(sw, best), *h = TJSCALED(sh, best);
    int cmyk = cs == TJCS_CMYK || cs == TJCS_YCCK;
    size_t px = (size_t)*w * (size_t)*h;
    if (zp_buf_grow(&s->rgb, &s->rgb_cap, px * 4))
        return ZP_ENOMEM;
    if (tjDecompress2(s->tj, s->file, size, s->rgb, *w, 0, *h, cmyk ? TJPF_CMYK : TJPF_RGB,
                      TJFLAG_ACCURATEDCT)) { /* an error, or a warning: corrupt data is a bad sample */
        const char *why = tjGetErrorStr2(s->tj);
        snprintf(err, len, "%s: %s: %s", path,
                 strstr(why, "Premature end") ? "truncated JPEG"
                 : tjGetErrorCode(s->tj) == TJERR_FATAL ? "JPEG does not decode"
                                                        : "corrupt JPEG data",
                 why);
        return ZP_EDATA;
    }
    if (cmyk) /* Adobe's inverted CMYK, as libjpeg returns it */
        for (size_t i = 0; i < px; i++) {
            const uint8_t *c = s->rgb + 4 * i;
            uint8_t *o = s->rgb + 3 * i;
            int k = c[3];
            uint8_t r = (uint8_t)(c[0] * k / 255), g = (uint8_t)(c[1] * k / 255), b = (uint8_t)(c[2] * k / 255);
            o[0] = r, o[1] = g, o[2] = b;
        }
    return 0;
}

/* JPEG into s->rgb (RGB), DCT-scaled to the smallest size whose shorter side is >= want. */
static int decode_jpeg(image_source_t *s, const char *path, size_t size, int want, int *w, int *h,
                       char *err, size_t len)
{
    int sw, sh, cs;
    int rc = jpeg_header(s, path, size, &sw, &sh, &cs, err, len);
    if (rc)
        return rc;
    int n;
    tjscalingfactor *f = tjGetScalingFactors(&n), best = {1, 1};
    int shorter = sw < sh ? sw : sh;
    for (int i = 0; want > 0 && 2 * want <= shorter && i < n; i++) /* the smallest scale >= want */
        if (TJSCALED(shorter, f[i]) >= want && f[i].num * best.denom < best.num * f[i].denom)
            best = f[i];
    return decode_jpeg_at(s, path, size, sw, sh, cs, best, w, h, err, len);
}

static int decode_png(image_source_t *s, const char *path, size_t size, int *w, int *h, char *err,
                      size_t len)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&img, s->file, size)) {
        snprintf(err, len, "%s: not a PNG: %s", path, img.message);
        return ZP_EDATA;
    }
    img.format = PNG_FORMAT_RGB;
    int rc = sane_size(s, path, img.width, img.height, err, len);
    if (rc) {
        png_image_free(&img);
        return rc;
    }
    *w = (int)img.width, *h = (int)img.height;
    if (zp_buf_grow(&s->rgb, &s->rgb_cap, PNG_IMAGE_SIZE(img))) {
        png_image_free(&img);
        return ZP_ENOMEM;
    }
    if (!png_image_finish_read(&img, NULL, s->rgb, 0, NULL)) {
        snprintf(err, len, "%s: PNG does not decode: %s", path, img.message);
        png_image_free(&img);
        return ZP_EDATA;
    }
    return 0;
}

/* Where output coordinate i of a resize from `from` to `to` pixels samples
 * its source, half-pixel centres, edges clamped: pixels *i0 and *i1, the
 * second weighted *w of ONE. */
#define ONE 2048 /* weights in 11 bits: a row value (255 x ONE) times a weight fits 32 bits */
static void tap(int i, int from, int to, int *i0, int *i1, uint32_t *w)
{
    float f = ((float)i + 0.5f) * ((float)from / (float)to) - 0.5f;
    f = f < 0 ? 0 : f;
    *i0 = (int)f;
    *i1 = *i0 + 1 < from ? *i0 + 1 : from - 1;
    *w = (uint32_t)((f - (float)*i0) * ONE + 0.5f);
}

/* Source row `r` (sw pixels of RGB) interpolated across at the window's columns. */
static void across(const uint8_t *r, int crop, const int32_t *x0, const int32_t *x1,
                   const uint32_t *xw, uint32_t *d)
{
    for (int j = 0; j < crop; j++, d += 3) {
        const uint8_t *a = r + x0[j], *b = r + x1[j];
        uint32_t w1 = xw[j], w0 = ONE - w1;
        d[0] = a[0] * w0 + b[0] * w1;
        d[1] = a[1] * w0 + b[1] * w1;
        d[2] = a[2] * w0 + b[2] * w1;
    }
}

/* The crop x crop window at (cx, cy) of the bilinear resize of RGB `src`
 * (sw x sh) to dw x dh, written CHW into `out`. Only the window is computed:
 * each source row it needs is interpolated across once (and kept while the
 * next output row needs it too), then pairs of rows are blended down. Fixed
 * point with 11-bit weights: within 0.5 + 1/16 of the exact value. `tmp`
 * holds crop x 9 words. */
static void resize_crop(const uint8_t *src, int sw, int sh, int dw, int dh, int cx, int cy,
                        int crop, uint8_t *out, uint32_t *tmp)
{
    uint32_t *row[2] = {tmp, tmp + 3 * (size_t)crop}, *xw = tmp + 6 * (size_t)crop;
    int32_t *x0 = (int32_t *)(xw + crop), *x1 = x0 + crop;
    int have[2] = {-1, -1}; /* the source row in row[k] */
    size_t plane = (size_t)crop * crop, stride = (size_t)sw * 3;
    for (int j = 0; j < crop; j++) {
        tap(cx + j, sw, dw, &x0[j], &x1[j], &xw[j]);
        x0[j] *= 3, x1[j] *= 3;
    }
    for (int i = 0; i < crop; i++) {
        int y0, y1;
        uint32_t w1;
        tap(cy + i, sh, dh, &y0, &y1, &w1);
        if (have[0] != y0 && have[1] == y0) { /* moving down: the lower row becomes the upper */
            uint32_t *t = row[0];
            row[0] = row[1], row[1] = t;
            have[0] = have[1], have[1] = -1;
        }
        if (have[0] != y0)
            across(src + (size_t)y0 * stride, crop, x0, x1, xw, row[0]), have[0] = y0;
        if (y1 != y0 && have[1] != y1)
            across(src + (size_t)y1 * stride, crop, x0, x1, xw, row[1]), have[1] = y1;
        const uint32_t *t = row[0], *u = y1 != y0 ? row[1] : row[0];
        uint32_t w0 = ONE - w1;
        uint8_t *o = out + (size_t)i * crop;
        for (int j = 0; j < crop; j++, t += 3, u += 3)
            for (int c = 0; c < 3; c++)
                o[c * plane + j] = (uint8_t)((t[c] * w0 + u[c] * w1 + ONE * ONE / 2) / (ONE * ONE));
    }
}

/* The resize of the shorter side to dataset.image.resize and the center crop
 * (the test split; every sample when the crop is not made at assembly). */
static int resize_center(image_source_t *s, const char *path, size_t size, int png,
                         uint8_t *pixels, char *err, size_t len)
{
    int w = 0, h = 0;
    int rc = png ? decode_png(s, path, size, &w, &h, err, len)
                 : decode_jpeg(s, path, size, s->resize, &w, &h, err, len);
    if (rc)
        return rc;
    int shorter = w < h ? w : h, dw = w, dh = h;
    if (s->resize > 0 && shorter != s->resize) {
        dw = w <= h ? s->resize : (int)((int64_t)w * s->resize / shorter);
        dh = h < w ? s->resize : (int)((int64_t)h * s->resize / shorter);
    }
    if (dw < s->crop || dh < s->crop) {
        snprintf(err, len, "%s: %dx%d after resizing, smaller than dataset.image.crop %d", path, dw,
                 dh, s->crop);
        return ZP_EDATA;
    }
    int x0 = (dw - s->crop) / 2, y0 = (dh - s->crop) / 2;
    size_t plane = (size_t)s->crop * s->crop;
    if (dw != w || dh != h) {
        if (zp_buf_grow(&s->scaled, &s->scaled_cap, (size_t)s->crop * 9 * sizeof(uint32_t)))
            return ZP_ENOMEM;
        resize_crop(s->rgb, w, h, dw, dh, x0, y0, s->crop, pixels, (uint32_t *)s->scaled);
    } else {
        for (int y = 0; y < s->crop; y++)
            for (int x = 0; x < s->crop; x++)
                for (int c = 0; c < 3; c++)
                    pixels[c * plane + (size_t)y * s->crop + x] =
                        s->rgb[((size_t)(y0 + y) * w + x0 + x) * 3 + c];
    }
    return 0;
}

/* The file decoded into s->rgb (w x h) at the smallest size that is at least
 * the whole image as cached. */
static int decode_for_cache(image_source_t *s, const char *path, size_t size, int png, int sw,
                            int sh, int cs, int cw, int ch, int *w, int *h, char *err, size_t len)
{
    if (png) {
        *w = sw, *h = sh;
        return 0; /* decoded whole already */
    }
    return decode_jpeg_at(s, path, size, sw, sh, cs, scale_covering(sw, sh, cw, ch), w, h, err, len);
}

/* Cache off: the box of `d` (drawn on the cw x ch cached size) mapped onto
 * the file's own pixels, at the smallest DCT scale that still covers it at
 * the crop size, resized to the crop. Of a JPEG that ends as one must, only
 * the part the resize reads is decoded (jpeg_region.h: the same pixels);
 * any other file, or one the region decode refuses, is decoded whole. */
static int crop_file(image_source_t *s, const char *path, size_t size, int png, int sw, int sh,
                     int cs, int cw, int ch, const zp_aug_draw_t *d, uint8_t *pixels, char *err,
                     size_t len)
{
    tjscalingfactor f = {1, 1};
    if (!png) {
        double need_w = (double)s->crop * cw / d->box_w, need_h = (double)s->crop * ch / d->box_h;
        f = scale_covering(sw, sh, need_w > sw ? sw : need_w, need_h > sh ? sh : need_h);
    }
    int w = TJSCALED(sw, f), h = TJSCALED(sh, f), rc = ZP_EDATA;
    double fx = (double)w / cw, fy = (double)h / ch;
    double box[4] = {d->box_x * fx, d->box_y * fy, d->box_w * fx, d->box_h * fy};
    int ends = size > 2 && s->file[size - 2] == 0xff && s->file[size - 1] == 0xd9; /* EOI */
    if (!png && ends && (s->region || (s->region = zp_jpeg_region_open()))) {
        int x0, y0, x1, y1, rx, ry;
        zp_resample_reach(box, s->crop, s->crop, w, h, &x0, &y0, &x1, &y1);
        rc = zp_jpeg_region(s->region, s->file, size, f.num, f.denom, x0, y0, x1, y1, &s->rgb,
                            &s->rgb_cap, &rx, &ry, &w, &h);
        if (rc == ZP_ENOMEM)
            return rc;
        if (!rc)
            box[0] -= rx, box[1] -= ry;
    }
    if (rc && !png && (rc = decode_jpeg_at(s, path, size, sw, sh, cs, f, &w, &h, err, len)))
        return rc;
    return zp_resample(&s->rs, s->rgb, w, h, box, s->crop, s->crop, d->flip, ZP_RS_CHW_U8, NULL,
                       pixels);
}

/* A train sample cropped at assembly (see the top of the file). */
static int crop_whole(image_source_t *s, const char *path, size_t size, int png, uint32_t index,
                      uint8_t *pixels, char *err, size_t len)
{
    int sw, sh, cs = 0, w, h, cw, ch;
    int rc = png ? decode_png(s, path, size, &sw, &sh, err, len)
                 : jpeg_header(s, path, size, &sw, &sh, &cs, err, len);
    if (rc)
        return rc;
    zp_augment_whole_size(s->side, sw, sh, &cw, &ch);
    zp_aug_draw_t d;
    zp_augment_rrc_draw(&s->rrc, s->base.epoch, index, ch, cw, &d);
    s->base.crop = zp_augment_crop_of(&d, cw, ch);
    if (!s->keep)
        return crop_file(s, path, size, png, sw, sh, cs, cw, ch, &d, pixels, err, len);
    if ((rc = decode_for_cache(s, path, size, png, sw, sh, cs, cw, ch, &w, &h, err, len)))
        return rc;
    double box[4] = {d.box_x, d.box_y, d.box_w, d.box_h};
    const uint8_t *img = s->rgb;
    if (w != cw || h != ch) {
        double all[4] = {0, 0, w, h};
        if (zp_buf_grow(&s->img, &s->img_cap, (size_t)cw * ch * 3) ||
            zp_resample(&s->rs, s->rgb, w, h, all, cw, ch, 0, ZP_RS_HWC_U8, NULL, s->img))
            return ZP_ENOMEM;
        img = s->img;
    }
    s->base.whole = img, s->base.whole_w = cw, s->base.whole_h = ch;
    return zp_resample(&s->rs, img, cw, ch, box, s->crop, s->crop, d.flip, ZP_RS_CHW_U8, NULL,
                       pixels);
}

static int image_get(zp_source_t *src, int split, uint32_t index, uint8_t *pixels, int32_t *label,
                     char *err, size_t len)
{
    image_source_t *s = (image_source_t *)src;
    const char *path = s->list[split]->path[index];
    size_t size;
    s->base.whole = NULL;
    s->base.crop = (zp_crop_t){.x = -1};
    int rc = read_file(s, path, &size, err, len);
    if (rc)
        return rc;
    int png = size >= 8 && !png_sig_cmp(s->file, 0, 8);
    const char *dot = strrchr(path, '.');
    if (!png && dot && !strcasecmp(dot, ".png")) {
        snprintf(err, len, "%s: not a PNG (no PNG signature)", path);
        return ZP_EDATA;
    }
    rc = s->whole && split == ZP_SPLIT_TRAIN ? crop_whole(s, path, size, png, index, pixels, err, len)
                                             : resize_center(s, path, size, png, pixels, err, len);
    if (rc && !png) { /* TurboJPEG keeps a failed decode's state: start afresh */
        tjDestroy(s->tj);
        if (!(s->tj = tjInitDecompress()))
            return ZP_ENOMEM;
    }
    if (rc)
        return rc;
    *label = s->list[split]->label[index];
    return 0;
}

static void image_destroy(zp_source_t *src)
{
    image_source_t *s = (image_source_t *)src;
    for (int i = 0; i < ZP_SPLITS; i++)
        zp_imagelist_free(&s->own[i]);
    if (s->tj)
        tjDestroy(s->tj);
    zp_jpeg_region_close(s->region);
    free(s->file), free(s->rgb), free(s->scaled), free(s->img);
    zp_resample_free(&s->rs);
    free(s);
}

/* Split sp's files from the folder or list itself, checked (no probe to take them from). */
static int scan(image_source_t *s, const zp_config_t *cfg, const zp_dataset_meta_t *meta, int sp,
                char *err, size_t errlen)
{
    char where[600];
    zp_dataset_file(cfg, sp == ZP_SPLIT_TRAIN ? cfg->image_train : cfg->image_test, where, sizeof where);
    int rc = zp_imagelist_read(where, is_list(cfg), &s->own[sp], err, errlen);
    if (!rc && s->own[sp].n != meta->n[sp]) {
        snprintf(err, errlen, "%s: changed while the run started", where);
        rc = ZP_EDATA;
    }
    for (int64_t i = 0; !rc && i < s->own[sp].n; i++)
        rc = zp_dataset_label_check(meta, where, i, s->own[sp].label[i], err, errlen);
    return rc;
}

static int image_open(zp_source_t **out, const zp_config_t *cfg, const zp_dataset_meta_t *meta,
                      char *err, size_t errlen)
{
    *out = NULL;
    image_source_t *s = calloc(1, sizeof *s);
    /* libjpeg's large arrays (a progressive JPEG's coefficients) bounded as the
     * region decoder's: TurboJPEG's decoders read the bound from JPEGMEM */
    char mem[32];
    snprintf(mem, sizeof mem, "%ldM", ZP_JPEG_MAX_MEMORY >> 20);
    setenv("JPEGMEM", mem, 0);
    if (!s || !(s->tj = tjInitDecompress())) {
        free(s);
        return ZP_ENOMEM;
    }
    s->base.get = image_get;
    s->base.destroy = image_destroy;
    s->resize = (int)cfg->image_resize;
    s->crop = (int)cfg->image_crop;
    s->whole = zp_augment_whole(cfg);
    s->keep = s->whole && cfg->cache_enabled;
    s->side = cfg->image_cache_side;
    s->max_pixels = cfg->image_max_pixels;
    zp_augment_rrc_init(&s->rrc, cfg);
    for (int sp = 0; sp < ZP_SPLITS; sp++) {
        const zp_imagelist_t *probed = meta->probed ? &meta->probed->split[sp] : NULL;
        int rc = probed && probed->path && probed->n == meta->n[sp] ? 0 : scan(s, cfg, meta, sp, err, errlen);
        if (rc) {
            image_destroy(&s->base);
            return rc;
        }
        s->list[sp] = probed && probed->path && probed->n == meta->n[sp] ? probed : &s->own[sp];
    }
    *out = &s->base;
    return 0;
}

/* ---- what the supervisor and the cache know of it ------------------------------------ */

static int image_probe(const zp_config_t *cfg, zp_dataset_t *ds, char *err, size_t len)
{
    zp_dataset_meta_t *m = &ds->meta;
    for (int s = 0; s < ZP_SPLITS; s++) {
        char where[600];
        zp_imagelist_t *l = &ds->split[s];
        zp_dataset_file(cfg, s == ZP_SPLIT_TRAIN ? cfg->image_train : cfg->image_test, where, sizeof where);
        int list = is_list(cfg);
        int rc = zp_imagelist_read(where, list, l, err, len);
        if (rc) { /* which keys made the path, and what was expected there */
            char why[600];
            snprintf(why, sizeof why, "%s", err);
            snprintf(err, len, "dataset.path (%s) + dataset.image.%s (%s): %s; expected %s", cfg->dataset_path,
                     s == ZP_SPLIT_TRAIN ? "train" : "test",
                     s == ZP_SPLIT_TRAIN ? cfg->image_train : cfg->image_test, why,
                     list ? "a list file of \"PATH LABEL\" lines (dataset.source: image_list)"
                          : "a folder of CLASS/*.jpg|jpeg|png (torchvision's ImageFolder layout)");
            return rc;
        }
        m->n[s] = l->n;
        if (s == ZP_SPLIT_TRAIN)
            m->classes = l->classes < 2 ? 2 : l->classes;
        for (int64_t i = 0; !rc && s == ZP_SPLIT_TEST && i < l->n; i++)
            rc = zp_dataset_label_check(m, where, i, l->label[i], err, len);
        m->files_bytes[s] = l->bytes;
        m->files_mtime[s] = l->mtime;
        if (rc)
            return rc;
    }
    if (cfg->image_resize && cfg->image_crop > cfg->image_resize) {
        snprintf(err, len, "dataset.image.crop %lld is larger than dataset.image.resize %lld",
                 (long long)cfg->image_crop, (long long)cfg->image_resize);
        return ZP_ECONFIG;
    }
    m->shape[0] = 3;
    m->shape[1] = m->shape[2] = cfg->image_crop;
    return 0;
}

/* A sample's values must fit in one message (ZP_MAX_ELEMS): beyond, every
 * SAMPLES would be refused as malformed and the run would wait forever. The
 * crop is at most 16384: no product overflows. */
static int image_check(const zp_config_t *cfg, char *err, size_t len)
{
    int64_t crop = cfg->image_crop, most = (int64_t)sqrt(ZP_MAX_ELEMS / 3.0);
    if (3 * crop * crop > ZP_MAX_ELEMS)
        return zp_config_fail(cfg, "dataset.image.crop", err, len, "3 x %lld x %lld = %lld values "
                              "a sample, more than a message carries (ZP_MAX_ELEMS = %u): at most "
                              "%lld", (long long)crop, (long long)crop, (long long)(3 * crop * crop),
                              ZP_MAX_ELEMS, (long long)most);
    return 0;
}

static int image_fingerprint(const zp_config_t *cfg, const zp_dataset_meta_t *m, int split,
                             char *buf, size_t len)
{
    char p[600];
    zp_dataset_file(cfg, split ? cfg->image_test : cfg->image_train, p, sizeof p);
    snprintf(buf, len, "source: %s %s (%lld bytes, newest %lld); resize %lld (bilinear, 11-bit "
             "fixed point), crop %lld\n", is_list(cfg) ? "image_list" : "image_folder", p,
             (long long)m->files_bytes[split], (long long)m->files_mtime[split],
             (long long)cfg->image_resize, (long long)cfg->image_crop);
    return 0;
}

/* The two rows: one reader, told apart by is_list(). */
#define IMAGE_SOURCE(choice)                                                                       \
    {.name = choice, .check = image_check, .dataset_name = zp_source_path_name,                    \
     .probe = image_probe, .fingerprint = image_fingerprint, .open = image_open}
const zp_source_ops_t zp_source_image_folder = IMAGE_SOURCE("image_folder");
const zp_source_ops_t zp_source_image_list = IMAGE_SOURCE("image_list");

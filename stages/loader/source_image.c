/* source_image.c — image_folder and image_list datasets: JPEG decoded by
 * libjpeg-turbo's TurboJPEG API (with DCT scaling when the target is at most
 * half the source), PNG by libpng; grayscale, CMYK and palette images become
 * RGB; then the deterministic transforms: resize of the shorter side to
 * dataset.image.resize (bilinear, half-pixel centres), center crop of
 * dataset.image.crop x crop, HWC -> CHW. A file that is not an image, is
 * truncated or does not decode is an error naming its path. */
#define _GNU_SOURCE
#include "stages/loader/source.h"
#include "pipeline/imagelist.h"
#include "pipeline/log.h"

#include <errno.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <turbojpeg.h>

typedef struct {
    zp_source_t base;
    zp_imagelist_t list[ZP_SPLITS];
    tjhandle tj;
    int resize, crop;
    uint8_t *file, *rgb, *scaled; /* reused buffers; owned */
    size_t file_cap, rgb_cap, scaled_cap;
} image_source_t;

static int grow(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    uint8_t *p = realloc(*buf, need);
    if (!p)
        return ZP_ENOMEM;
    *buf = p, *cap = need;
    return 0;
}

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
    else if ((rc = grow(&s->file, &s->file_cap, *size)) == 0 && fread(s->file, 1, *size, f) != *size)
        rc = ZP_EDATA;
    fclose(f);
    if (rc)
        snprintf(err, len, "%s: %s", path, *size == 0 ? "empty file" : "cannot be read whole");
    return rc;
}

/* JPEG into s->rgb (RGB), DCT-scaled to the smallest size whose shorter side is >= want. */
static int decode_jpeg(image_source_t *s, const char *path, size_t size, int want, int *w, int *h,
                       char *err, size_t len)
{
    int sw, sh, sub, cs;
    if (tjDecompressHeader3(s->tj, s->file, size, &sw, &sh, &sub, &cs)) {
        snprintf(err, len, "%s: not a JPEG: %s", path, tjGetErrorStr2(s->tj));
        return ZP_EDATA;
    }
    int n;
    tjscalingfactor *f = tjGetScalingFactors(&n), best = {1, 1};
    int shorter = sw < sh ? sw : sh;
    for (int i = 0; want > 0 && 2 * want <= shorter && i < n; i++) /* the smallest scale >= want */
        if (TJSCALED(shorter, f[i]) >= want && f[i].num * best.denom < best.num * f[i].denom)
            best = f[i];
    *w = TJSCALED(sw, best), *h = TJSCALED(sh, best);
    int cmyk = cs == TJCS_CMYK || cs == TJCS_YCCK;
    size_t px = (size_t)*w * (size_t)*h;
    if (grow(&s->rgb, &s->rgb_cap, px * 4))
        return ZP_ENOMEM;
    if (tjDecompress2(s->tj, s->file, size, s->rgb, *w, 0, *h, cmyk ? TJPF_CMYK : TJPF_RGB,
                      TJFLAG_ACCURATEDCT)) {
        const char *why = tjGetErrorStr2(s->tj);
        if (tjGetErrorCode(s->tj) == TJERR_FATAL || strstr(why, "Premature end")) {
            snprintf(err, len, "%s: %s: %s", path,
                     strstr(why, "Premature end") ? "truncated JPEG" : "JPEG does not decode", why);
            return ZP_EDATA;
        }
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
    *w = (int)img.width, *h = (int)img.height;
    if (grow(&s->rgb, &s->rgb_cap, PNG_IMAGE_SIZE(img))) {
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

/* Bilinear resize of RGB src (sw x sh) to dw x dh, half-pixel centres, edges clamped. */
static void resize_rgb(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh)
{
    float fx = (float)sw / (float)dw, fy = (float)sh / (float)dh;
    for (int y = 0; y < dh; y++) {
        float sy = ((float)y + 0.5f) * fy - 0.5f;
        sy = sy < 0 ? 0 : sy;
        int y0 = (int)sy, y1 = y0 + 1 < sh ? y0 + 1 : sh - 1;
        float wy = sy - (float)y0;
        for (int x = 0; x < dw; x++) {
            float sx = ((float)x + 0.5f) * fx - 0.5f;
            sx = sx < 0 ? 0 : sx;
            int x0 = (int)sx, x1 = x0 + 1 < sw ? x0 + 1 : sw - 1;
            float wx = sx - (float)x0;
            for (int c = 0; c < 3; c++) {
                float a = src[((size_t)y0 * sw + x0) * 3 + c], b = src[((size_t)y0 * sw + x1) * 3 + c];
                float d = src[((size_t)y1 * sw + x0) * 3 + c], e = src[((size_t)y1 * sw + x1) * 3 + c];
                float v = (a + (b - a) * wx) + ((d + (e - d) * wx) - (a + (b - a) * wx)) * wy;
                dst[((size_t)y * dw + x) * 3 + c] = (uint8_t)(v + 0.5f);
            }
        }
    }
}

static int image_get(zp_source_t *src, int split, uint32_t index, uint8_t *pixels, int32_t *label,
                     char *err, size_t len)
{
    image_source_t *s = (image_source_t *)src;
    const char *path = s->list[split].path[index];
    size_t size;
    int rc = read_file(s, path, &size, err, len), w = 0, h = 0;
    if (rc)
        return rc;
    int png = size >= 8 && !png_sig_cmp(s->file, 0, 8);
    const char *dot = strrchr(path, '.');
    if (!png && dot && !strcasecmp(dot, ".png")) {
        snprintf(err, len, "%s: not a PNG (no PNG signature)", path);
        return ZP_EDATA;
    }
    rc = png ? decode_png(s, path, size, &w, &h, err, len)
             : decode_jpeg(s, path, size, s->resize, &w, &h, err, len);
    if (rc && !png) { /* TurboJPEG keeps a failed decode's state: start afresh */
        tjDestroy(s->tj);
        if (!(s->tj = tjInitDecompress()))
            return ZP_ENOMEM;
    }
    if (rc)
        return rc;
    const uint8_t *img = s->rgb;
    int shorter = w < h ? w : h;
    if (s->resize > 0 && shorter != s->resize) {
        int dw = (int)((int64_t)w * s->resize / shorter), dh = (int)((int64_t)h * s->resize / shorter);
        dw = w <= h ? s->resize : dw, dh = h < w ? s->resize : dh;
        if (grow(&s->scaled, &s->scaled_cap, (size_t)dw * dh * 3))
            return ZP_ENOMEM;
        resize_rgb(s->rgb, w, h, s->scaled, dw, dh);
        img = s->scaled, w = dw, h = dh;
    }
    if (w < s->crop || h < s->crop) {
        snprintf(err, len, "%s: %dx%d after resizing, smaller than dataset.image.crop %d", path, w, h,
                 s->crop);
        return ZP_EDATA;
    }
    int x0 = (w - s->crop) / 2, y0 = (h - s->crop) / 2;
    size_t plane = (size_t)s->crop * s->crop;
    for (int y = 0; y < s->crop; y++)
        for (int x = 0; x < s->crop; x++)
            for (int c = 0; c < 3; c++)
                pixels[c * plane + (size_t)y * s->crop + x] = img[((size_t)(y0 + y) * w + x0 + x) * 3 + c];
    *label = s->list[split].label[index];
    return 0;
}

static void image_destroy(zp_source_t *src)
{
    image_source_t *s = (image_source_t *)src;
    for (int i = 0; i < ZP_SPLITS; i++)
        zp_imagelist_free(&s->list[i]);
    if (s->tj)
        tjDestroy(s->tj);
    free(s->file), free(s->rgb), free(s->scaled);
    free(s);
}

int zp_source_image_open(zp_source_t **out, const zp_config_t *cfg, const zp_dataset_meta_t *meta,
                         char *err, size_t errlen)
{
    *out = NULL;
    image_source_t *s = calloc(1, sizeof *s);
    if (!s || !(s->tj = tjInitDecompress())) {
        free(s);
        return ZP_ENOMEM;
    }
    s->base.get = image_get;
    s->base.destroy = image_destroy;
    s->resize = (int)cfg->image_resize;
    s->crop = (int)cfg->image_crop;
    for (int sp = 0; sp < ZP_SPLITS; sp++) {
        char where[600];
        zp_dataset_file(cfg, sp == ZP_SPLIT_TRAIN ? cfg->image_train : cfg->image_test, where, sizeof where);
        int rc = zp_imagelist_read(where, cfg->dataset_source == ZP_SOURCE_IMAGE_LIST, &s->list[sp], err, errlen);
        if (!rc && s->list[sp].n != meta->n[sp]) {
            snprintf(err, errlen, "%s: changed while the run started", where);
            rc = ZP_EDATA;
        }
        if (rc) {
            image_destroy(&s->base);
            return rc;
        }
    }
    *out = &s->base;
    return 0;
}

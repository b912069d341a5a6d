/* jpeg_region.c — a box of a JPEG decoded alone (see jpeg_region.h). */
#include "pipeline/image/jpeg_region.h"
#include "schemas/errors.h"

#include <setjmp.h>
#include <stdio.h> /* jpeglib.h needs FILE */
#include <stdlib.h>

#include <jpeglib.h>

#define MARGIN 2 /* pixels decoded around the box (see jpeg_region.h) */

struct zp_jpeg_region {
    struct jpeg_decompress_struct d;
    struct jpeg_error_mgr err;
    jmp_buf on_error;
    int truncated; /* libjpeg's warning that the data ended early, or any other */
};

static void error_exit(j_common_ptr c)
{
    longjmp(((zp_jpeg_region_t *)c->client_data)->on_error, 1);
}

/* Warnings (level -1) are not printed: any of them (corrupt data, a
 * premature end) makes the region a refusal, and the whole decode says it. */
static void emit_message(j_common_ptr c, int level)
{
    if (level < 0)
        ((zp_jpeg_region_t *)c->client_data)->truncated = 1;
}

zp_jpeg_region_t *zp_jpeg_region_open(void)
{
    zp_jpeg_region_t *volatile j = calloc(1, sizeof *j); /* read after a longjmp */
    if (!j)
        return NULL;
    j->d.err = jpeg_std_error(&j->err);
    j->err.error_exit = error_exit;
    j->err.emit_message = emit_message;
    j->d.client_data = j;
    if (setjmp(j->on_error)) { /* libjpeg could not allocate its state */
        free(j);
        return NULL;
    }
    jpeg_create_decompress(&j->d);
    j->d.mem->max_memory_to_use = ZP_JPEG_MAX_MEMORY; /* past it: an error, not gigabytes */
    return j;
}

void zp_jpeg_region_close(zp_jpeg_region_t *j)
{
    if (!j)
        return;
    jpeg_destroy_decompress(&j->d);
    free(j);
}

static int clamp(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

int zp_jpeg_region(zp_jpeg_region_t *j, const uint8_t *file, size_t size, int num, int denom, int x0,
                   int y0, int x1, int y1, uint8_t **buf, size_t *cap, int *rx, int *ry, int *rw,
                   int *rh)
{
    struct jpeg_decompress_struct *d = &j->d;
    j->truncated = 0;
    if (setjmp(j->on_error)) {
        jpeg_abort_decompress(d);
        return ZP_EDATA;
    }
    if (!zp_jpeg_region_has_tables(file, size))
        return ZP_EDATA; /* the whole decode, on a decoder of its own */
    jpeg_mem_src(d, file, (unsigned long)size);
    jpeg_read_header(d, TRUE);
    if ((d->jpeg_color_space != JCS_YCbCr && d->jpeg_color_space != JCS_GRAYSCALE &&
         d->jpeg_color_space != JCS_RGB) || d->progressive_mode || j->truncated ||
        d->image_width < 64 || d->image_height < 64) {
        jpeg_abort_decompress(d);
        return ZP_EDATA; /* CMYK, YCCK: the whole decode converts them; progressive and tiny
                            images (a few iMCUs: nothing to save) are decoded whole */
    }
    d->scale_num = (unsigned)num, d->scale_denom = (unsigned)denom;
    d->out_color_space = JCS_RGB;
    d->dct_method = JDCT_ISLOW; /* as the whole decode (TJFLAG_ACCURATEDCT) */
    jpeg_start_decompress(d);
    int w = (int)d->output_width, h = (int)d->output_height;
    int left = clamp(x0 - MARGIN, 0, w), right = clamp(x1 + MARGIN, left + 1, w);
    int top = clamp(y0 - MARGIN, 0, h - 1), bottom = clamp(y1 + MARGIN, top + 1, h);
    JDIMENSION cx = (JDIMENSION)left, cw = (JDIMENSION)(right - left);
    if (right <= left) {
        jpeg_abort_decompress(d);
        return ZP_EDATA;
    }
    jpeg_crop_scanline(d, &cx, &cw); /* widened to whole iMCUs */
    size_t row = (size_t)cw * 3, need = row * (size_t)(bottom - top);
    if (need > *cap) {
        uint8_t *p = realloc(*buf, need);
        if (!p) {
            jpeg_abort_decompress(d);
            return ZP_ENOMEM;
        }
        *buf = p, *cap = need;
    }
    if (top && jpeg_skip_scanlines(d, (JDIMENSION)top) != (JDIMENSION)top)
        j->truncated = 1;
    for (int y = top; y < bottom && !j->truncated; y++) {
        JSAMPROW out = *buf + row * (size_t)(y - top);
        if (jpeg_read_scanlines(d, &out, 1) != 1)
            j->truncated = 1;
    }
    jpeg_abort_decompress(d); /* the rows below the box are not decoded */
    if (j->truncated)
        return ZP_EDATA;
    *rx = (int)cx, *ry = top, *rw = (int)cw, *rh = bottom - top;
    return 0;
}

int zp_jpeg_region_has_tables(const uint8_t *p, size_t n)
{
    if (n < 4 || p[0] != 0xff || p[1] != 0xd8)
        return 1;
    for (size_t i = 2; i + 4 <= n;) {
        if (p[i] != 0xff)
            return 1; /* not a marker where one must be: the decoder's to say */
        uint8_t m = p[i + 1];
        if (m == 0xff) { /* fill */
            i++;
            continue;
        }
        if (m == 0xc4)
            return 1; /* DHT */
        if (m == 0xda)
            return 0; /* the first scan, and no table before it */
        if (m == 0x01 || (m >= 0xd0 && m <= 0xd8)) { /* TEM, RSTn, SOI: no length */
            i += 2;
            continue;
        }
        i += 2 + ((size_t)p[i + 2] << 8 | p[i + 3]);
    }
    return 1;
}

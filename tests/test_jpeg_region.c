/* Unit tests of jpeg_region.c: a box decoded alone has the pixels of the
 * whole decode (TurboJPEG's, as the loaders make it), at every DCT scale,
 * for 4:2:0, 4:4:4 and grayscale JPEGs; a truncated file and a CMYK one are
 * ZP_EDATA, for the whole decode to report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "pipeline/image/jpeg_region.h"
#include "schemas/errors.h"

/* A JPEG of w x h (smooth parts and sharp edges) with `samp` subsampling;
 * freed with tjFree. */
static uint8_t *make_jpeg(int w, int h, int samp, int pf, unsigned long *size)
{
    int ps = tjPixelSize[pf];
    uint8_t *px = malloc((size_t)w * h * ps), *jpg = NULL;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < ps; c++)
                px[((size_t)y * w + x) * ps + c] =
                    (uint8_t)(c == 0 ? x * 255 / w : c == 1 ? ((x / 7 + y / 5) % 2) * 200 : (x * y + c * 50) % 256);
    tjhandle tj = tjInitCompress();
    assert_int_equal(tjCompress2(tj, px, w, 0, h, pf, &jpg, size, samp, 90, 0), 0);
    tjDestroy(tj);
    free(px);
    return jpg;
}

static void boxes_are_the_whole_decodes_pixels(void **state)
{
    (void)state;
    int samps[] = {TJSAMP_420, TJSAMP_444, TJSAMP_GRAY, TJSAMP_422};
    tjscalingfactor scales[] = {{1, 1}, {1, 2}, {7, 8}, {3, 8}};
    zp_jpeg_region_t *j = zp_jpeg_region_open();
    assert_non_null(j);
    tjhandle tj = tjInitDecompress();
    uint8_t *buf = NULL;
    size_t cap = 0;
    srand(5);
    for (int si = 0; si < 4; si++) {
        unsigned long size;
        int W = 203, H = 157;
        uint8_t *jpg = make_jpeg(W, H, samps[si], TJPF_RGB, &size);
        for (int k = 0; k < 4; k++) {
            tjscalingfactor f = scales[k];
            int w = TJSCALED(W, f), h = TJSCALED(H, f);
            uint8_t *whole = malloc((size_t)w * h * 3);
            assert_int_equal(tjDecompress2(tj, jpg, size, whole, w, 0, h, TJPF_RGB, TJFLAG_ACCURATEDCT), 0);
            for (int it = 0; it < 40; it++) {
                int bw = 1 + rand() % w, bh = 1 + rand() % h;
                int x0 = rand() % (w - bw + 1), y0 = rand() % (h - bh + 1);
                if (it == 0) /* the whole image */
                    x0 = y0 = 0, bw = w, bh = h;
                int rx, ry, rw, rh;
                assert_int_equal(zp_jpeg_region(j, jpg, size, f.num, f.denom, x0, y0, x0 + bw, y0 + bh,
                                                &buf, &cap, &rx, &ry, &rw, &rh), 0);
                assert_true(rx <= x0 && ry <= y0 && rx + rw >= x0 + bw && ry + rh >= y0 + bh);
                assert_true(rx + rw <= w && ry + rh <= h);
                for (int y = y0; y < y0 + bh; y++)
                    if (memcmp(buf + ((size_t)(y - ry) * rw + (x0 - rx)) * 3, whole + ((size_t)y * w + x0) * 3,
                               (size_t)bw * 3))
                        fail_msg("subsampling %d, scale %d/%d, box %d,%d %dx%d: row %d differs from the "
                                 "whole decode", samps[si], f.num, f.denom, x0, y0, bw, bh, y);
            }
            free(whole);
        }
        /* cut short: not decoded here */
        int rx, ry, rw, rh;
        assert_int_equal(zp_jpeg_region(j, jpg, size * 2 / 3, 1, 1, 0, H - 20, W, H, &buf, &cap, &rx, &ry,
                                        &rw, &rh), ZP_EDATA);
        assert_int_equal(zp_jpeg_region(j, jpg, 100, 1, 1, 0, 0, 10, 10, &buf, &cap, &rx, &ry, &rw, &rh),
                         ZP_EDATA);
        /* and the decoder is good for the next file */
        assert_int_equal(zp_jpeg_region(j, jpg, size, 1, 1, 0, 0, 10, 10, &buf, &cap, &rx, &ry, &rw, &rh), 0);
        tjFree(jpg);
    }
    unsigned long size;
    uint8_t *cmyk = make_jpeg(64, 48, TJSAMP_444, TJPF_CMYK, &size);
    int rx, ry, rw, rh;
    assert_int_equal(zp_jpeg_region(j, cmyk, size, 1, 1, 0, 0, 10, 10, &buf, &cap, &rx, &ry, &rw, &rh), ZP_EDATA);
    tjFree(cmyk);
    uint8_t junk[64] = {0xff, 0xd8, 0xff, 0xe0};
    assert_int_equal(zp_jpeg_region(j, junk, sizeof junk, 1, 1, 0, 0, 4, 4, &buf, &cap, &rx, &ry, &rw, &rh),
                     ZP_EDATA);
    free(buf);
    tjDestroy(tj);
    zp_jpeg_region_close(j);
    zp_jpeg_region_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(boxes_are_the_whole_decodes_pixels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

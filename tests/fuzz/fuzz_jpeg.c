/* libFuzzer target: the region decoder (pipeline/image/jpeg_region.c) and
 * the resampler (pipeline/image/resample.c) on any bytes, held to the
 * whole decode. The input's first 8 bytes are the parameters: the DCT scale
 * (byte 0, among TurboJPEG's), a box as fractions of the scaled image (bytes
 * 1-4: x0, y0, x1, y1 over 200, so a box may reach past the image), the
 * resize's output side (byte 5) and its flip (byte 6); the rest is the file.
 * Where the whole decode (TurboJPEG, without a warning) succeeds and the
 * region decode says it has the box, the box's pixels must be the whole
 * decode's: jpeg_region.h's promise. The resampler then resizes a box
 * inside the image, flipped or not. Headers of more than 4 megapixels are
 * left alone (the loaders refuse bombs by their header before any decode).
 * `fuzz_jpeg --write-seeds=DIR` is not needed: tests/fuzz/seeds/jpeg holds
 * small JPEGs of each subsampling, gray and progressive, made by Pillow.
 * Build and run: scripts/fuzz.sh [SECONDS]. */
#include "pipeline/image/jpeg_region.h"
#include "pipeline/image/resample.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tjhandle tj;
static zp_jpeg_region_t *region;
static zp_resample_t rs;

/* The whole decode at `f` into a malloc'd RGB buffer, or NULL (an error or
 * a warning: nothing to hold the region to). */
static uint8_t *whole(const uint8_t *file, size_t size, tjscalingfactor f, int w, int h)
{
    uint8_t *rgb = malloc((size_t)w * (size_t)h * 3);
    if (rgb && tjDecompress2(tj, file, size, rgb, w, 0, h, TJPF_RGB, TJFLAG_ACCURATEDCT)) {
        free(rgb);
        tjDestroy(tj); /* a failed decode leaves its state behind */
        tj = tjInitDecompress();
        return NULL;
    }
    return rgb;
}

static int clamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8 + 4 || (!tj && !(tj = tjInitDecompress())) ||
        (!region && !(region = zp_jpeg_region_open())))
        return 0;
    const uint8_t *file = data + 8;
    size_t n = size - 8;
    int sw = 0, sh = 0, sub, cs, nf;
    if (tjDecompressHeader3(tj, file, n, &sw, &sh, &sub, &cs) || sw < 1 || sh < 1 ||
        (int64_t)sw * sh > (4 << 20))
        return 0;
    tjscalingfactor *fs = tjGetScalingFactors(&nf), f = fs[data[0] % nf];
    int w = TJSCALED(sw, f), h = TJSCALED(sh, f);
    int x0 = data[1] * w / 200, y0 = data[2] * h / 200, x1 = data[3] * w / 200, y1 = data[4] * h / 200;
    uint8_t *rgb = whole(file, n, f, w, h), *buf = NULL;
    size_t cap = 0;
    int rx, ry, rw, rh;
    int rc = zp_jpeg_region(region, file, n, f.num, f.denom, x0, y0, x1, y1, &buf, &cap, &rx, &ry, &rw,
                            &rh);
    if (!rc && rgb && cs != TJCS_CMYK && cs != TJCS_YCCK) { /* the promise: the whole's pixels */
        int bx0 = clamp(x0, 0, w), bx1 = clamp(x1, bx0, w), by0 = clamp(y0, 0, h), by1 = clamp(y1, by0, h);
        if (bx0 < rx || by0 < ry || bx1 > rx + rw || by1 > ry + rh)
            abort(); /* the box is not inside what it decoded */
        for (int y = by0; y < by1; y++)
            if (memcmp(buf + ((size_t)(y - ry) * rw + (size_t)(bx0 - rx)) * 3,
                       rgb + ((size_t)y * w + (size_t)bx0) * 3, (size_t)(bx1 - bx0) * 3))
                abort(); /* a pixel of the box differs from the whole decode */
    }
    if (rgb) { /* the resampler, on a box inside the image */
        double bx = clamp(x0, 0, w - 1), by = clamp(y0, 0, h - 1);
        double box[4] = {bx, by, clamp(x1, (int)bx + 1, w) - bx, clamp(y1, (int)by + 1, h) - by};
        int side = 1 + data[5] % 96;
        uint8_t *out = malloc((size_t)side * side * 3);
        if (out && zp_resample(&rs, rgb, w, h, box, side, side, data[6] & 1, ZP_RS_HWC_U8, NULL, out) == 0) {
            volatile uint8_t last = out[(size_t)side * side * 3 - 1];
            (void)last;
        }
        free(out);
    }
    free(rgb);
    free(buf);
    return 0;
}

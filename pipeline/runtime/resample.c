/* resample.c — Pillow's bilinear resize of a box of an RGB image (see resample.h). */
#include "pipeline/runtime/resample.h"
#include "schemas/errors.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One axis: for each output pixel its first source pixel lo[i], tap count
 * n[i] and the normalised weights k[i * ksize ...]. */
typedef struct {
    int32_t *lo, *n;
    float *k;
    int ksize;
} axis_t;

static int ksize_of(double len, int out)
{
    double scale = len / out, support = scale < 1 ? 1 : scale;
    return (int)ceil(support) * 2 + 1;
}

static void axis_fill(axis_t *a, double in0, double len, int insize, int out)
{
    double scale = len / out, fs = scale < 1 ? 1 : scale, support = fs;
    for (int i = 0; i < out; i++) {
        double center = in0 + (i + 0.5) * scale, sum = 0;
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
        lo = lo < 0 ? 0 : lo > insize - 1 ? insize - 1 : lo;
        hi = hi > insize ? insize : hi <= lo ? lo + 1 : hi;
        if (hi - lo > a->ksize)
            hi = lo + a->ksize;
        float *k = a->k + (size_t)i * a->ksize;
        for (int x = lo; x < hi; x++) {
            double t = fabs((x - center + 0.5) / fs), w = t < 1 ? 1 - t : 0;
            k[x - lo] = (float)w;
            sum += w;
        }
        for (int x = lo; x < hi; x++)
            k[x - lo] = sum > 0 ? (float)(k[x - lo] / sum) : 1.0f / (float)(hi - lo);
        int skip = 0; /* taps of weight 0 at either end cost time and add nothing */
        while (hi - lo - skip > 1 && k[skip] == 0)
            skip++;
        while (hi - lo - skip > 1 && k[hi - lo - 1] == 0)
            hi--;
        memmove(k, k + skip, sizeof *k * (size_t)(hi - lo - skip));
        a->lo[i] = lo + skip;
        a->n[i] = hi - lo - skip;
    }
}

/* Source rows filtered across, kept while output rows need them: row `row`
 * in slot row % n (the rows one output row needs never share a slot). */
typedef struct {
    float *px;    /* n x ow x 3 */
    int32_t *row; /* per slot: the source row it holds, -1 none */
    int n;
} rows_t;

/* Carves the work space into the two axes, the kept rows and the accumulator row. */
static int carve(zp_resample_t *r, axis_t *ax, axis_t *ay, rows_t *rows, float **acc,
                 const double box[4], int ow, int oh)
{
    ax->ksize = ksize_of(box[2], ow);
    ay->ksize = ksize_of(box[3], oh);
    rows->n = ay->ksize;
    size_t words = 2 * (size_t)ow + 2 * (size_t)oh + (size_t)ow * ax->ksize +
                   (size_t)oh * ay->ksize + 3 * (size_t)ow + (size_t)rows->n * (3 * (size_t)ow + 1);
    if (words * 4 > r->cap) {
        void *p = realloc(r->buf, words * 4);
        if (!p)
            return ZP_ENOMEM;
        r->buf = p, r->cap = words * 4;
    }
    int32_t *w = r->buf;
    ax->lo = w, ax->n = w + ow, w += 2 * (size_t)ow;
    ay->lo = w, ay->n = w + oh, w += 2 * (size_t)oh;
    ax->k = (float *)w, w += (size_t)ow * ax->ksize;
    ay->k = (float *)w, w += (size_t)oh * ay->ksize;
    rows->row = w, w += rows->n;
    rows->px = (float *)w, w += (size_t)rows->n * 3 * ow;
    *acc = (float *)w;
    for (int i = 0; i < rows->n; i++)
        rows->row[i] = -1;
    return 0;
}

static inline uint8_t to_u8(float v)
{
    v += 0.5f;
    return v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v;
}

/* Output row `oy` from the accumulated row `acc` (ow x 3) into dst. */
static void put_row(const float *acc, int ow, int oh, int oy, int flip, int layout, const float *lut,
                    void *dst)
{
    size_t plane = (size_t)ow * oh;
    int step = flip ? -1 : 1, first = flip ? ow - 1 : 0;
    if (layout == ZP_RS_HWC_U8) {
        uint8_t *o = (uint8_t *)dst + ((size_t)oy * ow + first) * 3;
        for (int ox = 0; ox < ow; ox++, o += 3 * step)
            o[0] = to_u8(acc[3 * ox]), o[1] = to_u8(acc[3 * ox + 1]), o[2] = to_u8(acc[3 * ox + 2]);
        return;
    }
    for (int c = 0; c < 3; c++) {
        size_t at = c * plane + (size_t)oy * ow + first;
        if (layout == ZP_RS_CHW_U8) {
            uint8_t *o = (uint8_t *)dst + at;
            for (int ox = 0; ox < ow; ox++, o += step)
                *o = to_u8(acc[3 * ox + c]);
        } else {
            float *o = (float *)dst + at;
            for (int ox = 0; ox < ow; ox++, o += step)
                *o = lut[c * 256 + to_u8(acc[3 * ox + c])];
        }
    }
}

/* Source row `y` filtered across to the output's columns, from the kept rows
 * or computed into them. */
static const float *across(rows_t *rows, const axis_t *ax, const uint8_t *src, size_t stride, int y,
                           int ow)
{
    int slot = y % rows->n;
    float *d = rows->px + (size_t)slot * 3 * ow;
    if (rows->row[slot] == y)
        return d;
    const uint8_t *row = src + (size_t)y * stride;
    for (int ox = 0; ox < ow; ox++) {
        const float *kx = ax->k + (size_t)ox * ax->ksize;
        const uint8_t *p = row + (size_t)ax->lo[ox] * 3;
        float s0 = 0, s1 = 0, s2 = 0;
        for (int u = 0; u < ax->n[ox]; u++, p += 3) {
            s0 += kx[u] * p[0];
            s1 += kx[u] * p[1];
            s2 += kx[u] * p[2];
        }
        d[3 * ox] = s0, d[3 * ox + 1] = s1, d[3 * ox + 2] = s2;
    }
    rows->row[slot] = y;
    return d;
}

int zp_resample(zp_resample_t *r, const uint8_t *src, int sw, int sh, const double box[4], int ow,
                int oh, int flip, int layout, const float *lut, void *dst)
{
    axis_t ax, ay;
    rows_t rows;
    float *acc;
    if (carve(r, &ax, &ay, &rows, &acc, box, ow, oh))
        return ZP_ENOMEM;
    axis_fill(&ax, box[0], box[2], sw, ow);
    axis_fill(&ay, box[1], box[3], sh, oh);
    size_t stride = (size_t)sw * 3, n = 3 * (size_t)ow;
    for (int oy = 0; oy < oh; oy++) {
        memset(acc, 0, sizeof *acc * n);
        const float *ky = ay.k + (size_t)oy * ay.ksize;
        for (int t = 0; t < ay.n[oy]; t++) {
            const float *h = across(&rows, &ax, src, stride, ay.lo[oy] + t, ow);
            float wy = ky[t];
            for (size_t i = 0; i < n; i++)
                acc[i] += wy * h[i];
        }
        put_row(acc, ow, oh, oy, flip, layout, lut, dst);
    }
    return 0;
}

void zp_resample_free(zp_resample_t *r)
{
    free(r->buf);
    r->buf = NULL;
    r->cap = 0;
}

/* resample.h — resizing a box of an RGB image, as Pillow's Image.resize(size,
 * BILINEAR, box=...) does: a separable triangle filter whose support widens
 * with the shrink factor (bilinear when enlarging, area-averaging when
 * shrinking), half-pixel centres, weights normalised per output pixel.
 *
 * Used for the whole images of the cache (dataset.image.cache_side) and for
 * the random-resized crop made of them (pipeline/image/augment.h): one pass over the
 * box's pixels, written straight into the destination in its layout, the
 * flip included. Float arithmetic: within 1 of Pillow's 8-bit fixed point on
 * every channel. */
#ifndef ZP_RESAMPLE_H
#define ZP_RESAMPLE_H

#include <stddef.h>
#include <stdint.h>

/* Layouts of the destination. */
enum {
    ZP_RS_HWC_U8, /* RGB interleaved, uint8 (a cached image) */
    ZP_RS_CHW_U8, /* channel planes, uint8 (a sample of dataset.dtype uint8) */
    ZP_RS_CHW_F32 /* channel planes, float32 through a lut (zp_dataset_normalize_lut) */
};

/* Work space: coefficient tables and one accumulator row, grown on demand and
 * kept (no allocation per image once the largest size has been seen). One a
 * thread. Zero-initialise, then free with zp_resample_free. */
typedef struct {
    void *buf; /* owned */
    size_t cap;
} zp_resample_t;

/* Resizes the box (x, y, w, h in source pixels, inside the image) of `src`
 * (sw x sh RGB, rows of sw x 3 bytes) to ow x oh pixels into `dst` in
 * `layout`, mirrored left to right when `flip`. `lut` (3 x 256 floats) is
 * read for ZP_RS_CHW_F32 only. 0, or ZP_ENOMEM with dst untouched. */
int zp_resample(zp_resample_t *r, const uint8_t *src, int sw, int sh, const double box[4], int ow,
                int oh, int flip, int layout, const float *lut, void *dst);

/* The source pixels that the resize of `box` to ow x oh reads, within an
 * sw x sh image: columns [*x0, *x1) and rows [*y0, *y1) (the box and the
 * filter's reach). A resize of the same box given only those pixels (the box
 * moved by -x0, -y0) gives the same output, but for float rounding (1 at
 * most, rarely). */
void zp_resample_reach(const double box[4], int ow, int oh, int sw, int sh, int *x0, int *y0, int *x1,
                       int *y1);

void zp_resample_free(zp_resample_t *r);

#endif

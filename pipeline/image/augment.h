/* augment.h — random augmentation of train samples: random-resized-crop, crop
 * with padding and horizontal flip, on normalised float samples (channels x
 * height x width), after the cache.
 *
 * Every draw comes from (seed, epoch, sample index) alone: a sample is
 * augmented the same way in every run with that seed, whichever loader, batch
 * or backend handles it, and differently in every epoch. The three transforms
 * compose into one coordinate map, so a sample is read once and written once:
 * output pixel (y, x) -> flip -> shift by the padded crop (outside the image:
 * the value of a black pixel after normalisation) -> bilinear sample of the
 * random-resized-crop box (align_corners = false, as torchvision). */
#ifndef ZP_AUGMENT_H
#define ZP_AUGMENT_H

#include "pipeline/config/config.h"
#include "schemas/msg.h"

#include <stdint.h>

/* One sample's draw. */
typedef struct {
    int flip;
    int dy, dx;                  /* crop offset inside the padded sample, 0..2 x padding */
    double box_y, box_x, box_h, box_w; /* random-resized-crop box (the whole sample when off) */
} zp_aug_draw_t;

typedef struct {
    int on;
    int c, h, w;
    int padding, resized_crop, hflip;
    double scale[2], log_ratio[2];
    uint64_t seed;
    float *fill; /* per channel: pixel value 0 after normalisation */
    /* per output row / column of the current draw: source indices and weight */
    int32_t *y0, *y1, *x0, *x1;
    float *fy, *fx;
} zp_augment_t;

#ifdef __CUDACC__
#define ZP_HOST_DEVICE __host__ __device__
#else
#define ZP_HOST_DEVICE
#endif

/* The map of one axis of n pixels, shared by zp_augment and the cuda
 * backend's kernel: output coordinate `at` (after flip and padded crop) ->
 * the two source indices *i0, *i1 and the weight *f of i1, bilinear inside the
 * box [b0, b0 + bn) with align_corners = false; *i0 = -1 when the padded crop
 * puts `at` outside the sample. */
static inline ZP_HOST_DEVICE void zp_augment_axis(int n, int at, double b0, double bn, int32_t *i0,
                                                  int32_t *i1, float *f)
{
    if (at < 0 || at >= n) {
        *i0 = *i1 = -1;
        *f = 0;
        return;
    }
    double s = (at + 0.5) * bn / n - 0.5;
    if (s < 0)
        s = 0;
    int k = (int)s, last = (int)bn - 1;
    if (k > last)
        k = last;
    *i0 = (int32_t)(b0 + k);
    *i1 = (int32_t)(b0 + (k < last ? k + 1 : k));
    *f = (float)(s - k);
}

/* Reads dataset.augment.* for samples of c x h x w (the dataset's shape);
 * a->on = 0 when nothing is asked for. ZP_ENOMEM. */
int zp_augment_init(zp_augment_t *a, const zp_config_t *cfg, int c, int h, int w);
void zp_augment_free(zp_augment_t *a);

/* The draw of sample `index` in `epoch`. */
void zp_augment_draw(const zp_augment_t *a, uint64_t epoch, uint32_t index, zp_aug_draw_t *d);

/* Writes the augmented sample to `out`, which must not overlap `in`. */
void zp_augment(zp_augment_t *a, uint64_t epoch, uint32_t index, const float *in, float *out);

/* Crop at assembly: with dataset.augment.resized_crop on an image source
 * (image_folder, image_list), the train split's random-resized crop and flip
 * are drawn on the whole image as the cache keeps it (its longer side at most
 * dataset.image.cache_side) and resized to the crop size where the sample is
 * made: by the prefetch readers from a cached image, by the loader on a miss.
 * zp_augment then does the rest (crop_padding) only. */
int zp_augment_whole(const zp_config_t *cfg);

/* The size of the cached image of a w x h source image: its longer side
 * brought down to `side` (never enlarged), the ratio kept, at least 1 px. */
void zp_augment_whole_size(int64_t side, int w, int h, int *cw, int *ch);

/* The whole-image draw's parameters (dataset.augment.scale, ratio, hflip, seed). */
typedef struct {
    uint64_t seed;
    double scale[2], log_ratio[2];
    int hflip;
} zp_rrc_t;

void zp_augment_rrc_init(zp_rrc_t *r, const zp_config_t *cfg);
/* The draw of sample `index` in `epoch` on its h x w cached image:
 * torchvision's RandomResizedCrop.get_params (ten tries, then the centred
 * fallback) and then the flip, from the same per-sample seed as
 * zp_augment_draw. d->dy = d->dx = 0. */
void zp_augment_rrc_draw(const zp_rrc_t *r, uint64_t epoch, uint32_t index, int h, int w, zp_aug_draw_t *d);
/* The record of that draw on its w x h image, as batches.log shows it. */
zp_crop_t zp_augment_crop_of(const zp_aug_draw_t *d, int w, int h);

#endif

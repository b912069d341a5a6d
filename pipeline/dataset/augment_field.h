/* augment_field.h — the built-in augmentation of a Python Dataset's image
 * field: dataset.augment.resized_crop, crop_padding and hflip on the uint8
 * field dataset.augment.field (3 x H x W or H x W x 3), made where a sample
 * is assembled from the record __getitem__ returned, the one the cache
 * keeps: by the prefetch readers from a cache hit (C, no Python), by the
 * loader on a miss or with the cache off. Every consumer then gets the same
 * augmented samples: the package on the CPU or the GPU, raw=True, the C
 * client.
 *
 * The train split draws from (seed, epoch, index) as the image sources do
 * (zp_augment_draw: the random-resized box, the padded crop's offset, the
 * flip), resizes the box to dataset.augment.size (the field's own size when
 * 0) with the filter of pipeline/image/resample.h, then shifts and flips
 * (padding: black). The test split is remade only when the size changes: the
 * centre of the image at the output's aspect ratio, resized, never flipped.
 * The other fields are copied as they are. */
#ifndef ZP_AUGMENT_FIELD_H
#define ZP_AUGMENT_FIELD_H

#include "pipeline/image/augment.h"
#include "pipeline/config/config.h"
#include "pipeline/dataset/dataset.h"
#include "pipeline/dataset/fields.h"
#include "pipeline/image/resample.h"
#include "schemas/errors.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int on[2];              /* per split (train, test): its samples are remade */
    int chw;                /* the field's layout: 1 channels first, 0 channels last */
    int h, w, oh, ow;       /* the field's size in the cached record, and delivered */
    zp_fields_t in, out;    /* the cached record's fields, and the delivered one's */
    int field;              /* the field's position in both */
    zp_augment_t drawer;    /* the draw's parameters (zp_augment_draw reads no buffer) */
} zp_augment_field_t;

/* Per-thread work space: the field as RGB rows, the resized box, the
 * resampler's tables. Zero-initialise; free with zp_augment_field_space_free. */
typedef struct {
    uint8_t *rgb, *box;
    size_t rgb_cap, box_cap;
    zp_resample_t rs;
} zp_augment_field_space_t;

/* 1 when cfg asks for a built-in augmentation of a Python Dataset's field. */
int zp_augment_field_wanted(const zp_config_t *cfg);

/* Reads cfg for the records of fields `in` (what __getitem__ returns):
 * fills a, a->out being the delivered fields (the image field at its new
 * size). 0 (a->on all 0 when nothing is asked), or ZP_ECONFIG with a
 * sentence naming the key: the field is missing, not uint8, not 3 x H x W or
 * H x W x 3, or the size is asked of a padded crop. */
int zp_augment_field_init(zp_augment_field_t *a, const zp_config_t *cfg, const zp_fields_t *in, char *err,
                     size_t len);

/* Writes the delivered record of sample `index` of `split` in `epoch` into
 * out (a->out.record_bytes) from the cached record `in` (a->in.record_bytes),
 * and the draw into *crop as batches.log shows it (x = -1 when not drawn).
 * 0, or ZP_ENOMEM with out untouched. */
int zp_augment_field_make(const zp_augment_field_t *a, zp_augment_field_space_t *sp, int split, uint64_t epoch,
                     uint32_t index, const uint8_t *in, uint8_t *out, zp_crop_t *crop);

void zp_augment_field_space_free(zp_augment_field_space_t *sp);

#endif

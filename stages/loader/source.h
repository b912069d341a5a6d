/* source.h — where a loader's samples come from. A source turns a sample index
 * of a split into uint8 pixels (channels x height x width) and a label; the
 * Python source (loader_api.c), into a record of the sample's fields
 * (pipeline/dataset/fields.h) and the label 0. */
#ifndef ZP_SOURCE_H
#define ZP_SOURCE_H

#include "pipeline/config/config.h"
#include "pipeline/dataset/dataset.h"

#include <stddef.h>
#include <stdint.h>

typedef struct zp_source zp_source_t;
struct zp_source {
    /* Writes meta->elems pixels and the label of sample `index` of `split`.
     * `index` is already checked against the split size. */
    int (*get)(zp_source_t *src, int split, uint32_t index, uint8_t *pixels, int32_t *label,
               char *err, size_t errlen);
    void (*destroy)(zp_source_t *src);
    uint64_t epoch; /* the task's epoch, set by the loader before its samples (0 when absent) */
    /* The whole image the last get() cropped its sample from, as the cache
     * keeps it (pipeline/image/augment.h zp_augment_whole, with the cache on): RGB
     * rows of whole_w x 3 bytes; owned by the source, valid until its next
     * get(). NULL when that get made none. */
    const uint8_t *whole;
    int whole_w, whole_h;
    /* The random-resized crop the last get() cut its sample with (a train
     * sample cropped at assembly, cache on or off); crop.x = -1 when none. */
    zp_crop_t crop;
    /* A split with a Python augment step (meta->augment): before get() the
     * loader sets `cached` to the record the cache holds for the sample
     * (owned by the loader, valid during the call) or NULL, and `keep` to a
     * buffer of the cached record's bytes; get() sets `kept` when it made the
     * record into `keep` (a miss: the loader sends it to the cache). Else
     * `cached` and `keep` are NULL. */
    const uint8_t *cached;
    uint8_t *keep;
    int kept;
};

/* Both open whole splits up front; errors name the file. */
int zp_source_idx_create(zp_source_t **out, const zp_config_t *cfg, const zp_dataset_meta_t *meta,
                       char *err, size_t errlen);
int zp_source_image_create(zp_source_t **out, const zp_config_t *cfg, const zp_dataset_meta_t *meta,
                         char *err, size_t errlen);
int zp_source_synthetic_create(zp_source_t **out, const zp_config_t *cfg,
                             const zp_dataset_meta_t *meta, char *err, size_t errlen);

#endif

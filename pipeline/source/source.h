/* source.h — where a dataset's samples come from: one file per value of
 * dataset.source, each filling one zp_source_ops_t that says everything about
 * that source — the rules on its keys, what names its dataset, its probe, its
 * lines of the cache's fingerprint, its reader in the loader stage, and which
 * program runs it. zp_source_ops() is the one registry.
 *
 * Adding a source: a row of ZP_SOURCES in schemas/config_keys.h (its name
 * and the enum value ZP_SOURCE_NAME), its keys in the same file, and a file
 * source_NAME.c here defining `const zp_source_ops_t zp_source_NAME`. The
 * registry is made from ZP_SOURCES, so a row without its ops does not link.
 *
 * The floors below this one cannot see the table, and name a source only
 * where the meaning is theirs: the image floor's crop at assembly is for the
 * image sources' photos (zp_augment_whole), and a Python Dataset's fields
 * are augmented where its sample is made (augment.c, augment_field.c).
 *
 * The reader (zp_source_t) turns a sample index of a split into uint8 pixels
 * (channels x height x width) and a label; the Python loaders' reader
 * (pipeline/api/loader_api.c), into a record of the sample's fields
 * (pipeline/dataset/fields.h) and the label 0. */
#ifndef ZP_SOURCE_H
#define ZP_SOURCE_H

#include "pipeline/config/config.h"
#include "pipeline/dataset/dataset.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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
    /* Optional (NULL: none): told a task's n sample indices of `split` (u32
     * little-endian, maybe unaligned) before their get()s, a source reads
     * them together (the hdf5 source: one selection of a file's rows, each
     * chunk read once). A get() it did not read ahead reads alone, so a
     * failure here only costs speed: get() then names the bad sample. */
    void (*task)(zp_source_t *src, int split, const uint8_t *idx, size_t n);
};

typedef struct {
    const char *name; /* dataset.source's value */
    /* 1: the Python loaders run it (`INTERPRETER -m zeus_pipe._loader_process`,
     * with dataset.python.interpreter); 0: `zeus-pipe stage loader`. */
    int python;
    /* 1: its probe says the sample's fields itself, and its samples are
     * records of them (python, hdf5, npy); 0: an image and a label. */
    int records;
    /* The rules on the source's keys beyond each key's own type and range:
     * 0, or ZP_ECONFIG with err pointed at the key to blame (zp_config_fail).
     * NULL: none. */
    int (*check)(const zp_config_t *cfg, char *err, size_t len);
    /* The dataset's name: the cache's databases are NAME/train and NAME/test,
     * and the default cache folder is named for its last part. */
    void (*dataset_name)(const zp_config_t *cfg, char *buf, size_t len);
    /* What identifies the dataset beyond its path and file keys, written to
     * `out` (the default cache folder's hash). NULL: nothing more. */
    void (*identify)(const zp_config_t *cfg, FILE *out);
    /* Fills ds->meta's splits, shape and classes (and what else the source
     * knows: labels, files, fields), checking the files; errors name the
     * file. The registry fills in the sample's size, dtype and fields where
     * the source leaves them. */
    int (*probe)(const zp_config_t *cfg, zp_dataset_t *ds, char *err, size_t len);
    /* The cache fingerprint's lines on where split's samples come from,
     * appended to buf (pipeline/cachedb/cachedb.h). Returns 1 when they say
     * all that the cache keeps (the Python source's records), 0 when the
     * lines on pixels follow (what is kept, the sample's shape, the
     * transform). */
    int (*fingerprint)(const zp_config_t *cfg, const zp_dataset_meta_t *m, int split, char *buf,
                       size_t len);
    /* The loader stage's reader of the whole dataset; errors name the file.
     * NULL where `python` (the Python loaders read it). */
    int (*open)(zp_source_t **out, const zp_config_t *cfg, const zp_dataset_meta_t *meta, char *err,
                size_t len);
} zp_source_ops_t;

/* The ops of dataset.source `source` (a ZP_SOURCE_*); NULL beyond them. */
const zp_source_ops_t *zp_source_ops(int source);

/* A dataset_name for the sources of files in dataset.path: its last folder's name. */
void zp_source_path_name(const zp_config_t *cfg, char *buf, size_t len);

/* Finishes a user's config after zp_config_load(): the rules of its source's
 * keys, and an unset cache.path made the dataset's default folder. 0, or
 * ZP_ECONFIG with err filled as a load error is. */
int zp_source_config(zp_config_t *cfg, char *err, size_t len);

/* Probes the dataset that cfg names (its source's probe, then what every
 * source shares: the sample's size and fields, dataset.mean's channels).
 * Returns 0 with *out set, or a ZP_E* code with *out NULL and err filled. */
int zp_source_probe(zp_dataset_t **out, const zp_config_t *cfg, char *err, size_t len);

/* zp_source_probe for its meta only (meta->probed NULL): 0 or a ZP_E* code
 * with err filled. */
int zp_source_probe_meta(const zp_config_t *cfg, zp_dataset_meta_t *meta, char *err, size_t len);

#endif

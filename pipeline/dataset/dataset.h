/* dataset.h — what every stage needs to know about the dataset without
 * loading it: split sizes, sample shape, classes, fields; probed by its
 * source (pipeline/source/source.h). */
#ifndef ZP_DATASET_H
#define ZP_DATASET_H

#include "pipeline/config/config.h"
#include "pipeline/dataset/fields.h"
#include "pipeline/dataset/imagelist.h"
#include "schemas/msg.h"

#include <stddef.h>
#include <stdint.h>

enum { ZP_SPLIT_TRAIN, ZP_SPLIT_TEST, ZP_SPLITS };

/* A split's step after the cache (zp_dataset_meta_t.augment). */
enum { ZP_AUG_STEP_NONE, ZP_AUG_STEP_PYTHON, ZP_AUG_STEP_FIELD };

typedef struct {
    int64_t n[ZP_SPLITS]; /* samples per split */
    int64_t shape[3];     /* channels, height, width */
    int64_t elems;        /* elements per sample */
    int dtype;            /* ZP_DTYPE_F32 or ZP_DTYPE_U8 (dataset.dtype) */
    size_t sample_bytes;  /* elems x the size of dtype */
    int64_t classes;
    int64_t files_bytes[ZP_SPLITS], files_mtime[ZP_SPLITS]; /* image sources: for the fingerprint */
    /* What a sample holds (pipeline/dataset/fields.h). Built-in sources: image and
     * label. dataset.source python: what __getitem__ returns, in records of
     * sample_bytes, carried as uint8 of shape 1 x 1 x sample_bytes (dtype
     * ZP_DTYPE_U8, elems = sample_bytes, classes 1: the label column holds
     * 0, or ZP_LABEL_SKIPPED). */
    zp_fields_t fields;
    char source_hash[72]; /* python: SHA-256 of the callable's source file (the probe's); else "" */
    /* dataset.source python with an augment step after the cache: augment[s]
     * says which split s runs, the user's (dataset.python.augment.*, in the
     * Python loaders) or the built-in ops on a field (augment_field.h, where
     * the sample is assembled). Then `fields` are what the step makes (the
     * ring's and the wire's records) and `cached` what __getitem__ returns
     * (the cache's records, zp_dataset_cached_meta); cached.n is 0 where no
     * split has a step. */
    int augment[ZP_SPLITS]; /* ZP_AUG_STEP_* */
    zp_fields_t cached;
    /* what __getitem__ returned each cached field as (the probe's words:
     * ndarray, tensor, int, float), for the step to get them back so */
    char item_types[160];
    /* The probe's labels and files when the stage has them (zp_dataset_read:
     * owned by the stage, valid for its life); NULL: a source reads them from
     * the dataset itself. In no fingerprint. */
    const struct zp_dataset *probed;
} zp_dataset_meta_t;

const char *zp_dataset_split_name(int split);

/* A dataset probed once: its meta and, for file sources, each split's
 * labels and (image sources) files, so that the stages neither gunzip the
 * labels again nor scan an image folder.
 *
 * The supervisor probes (zp_source_probe) and describes what it found into
 * the run directory (zp_dataset_write: RUN/dataset/meta with the sample's
 * fields, SPLIT.labels as int32 little-endian, SPLIT.paths as NUL-separated
 * paths, an image folder's class names as NUL-separated `classes`,
 * python.json); each stage reads that back (zp_dataset_read).
 * meta.probed points at the dataset itself. A Python source is probed by
 * running the interpreter (pipeline/dataset/python.h). */
typedef struct zp_dataset {
    zp_dataset_meta_t meta;
    /* dataset.source python: what the loaders need to build the Dataset
     * (RUN/dataset/python.json: class, absolute sys.path folders, kwargs,
     * field names, seed); owned; NULL otherwise. */
    char *python;
    /* dataset.source hdf5 and npy: the files the probe found (RUN/dataset/arrays:
     * a line "SPLIT SAMPLES BYTES MTIME PATH" per file, in order, its
     * samples the split's next ones); owned; NULL otherwise. */
    char *arrays;
    /* n labels per split (idx and image sources; synthetic: none); path:
     * image sources only, NULL otherwise. Owned. */
    zp_imagelist_t split[ZP_SPLITS];
} zp_dataset_t;

/* Writes the description into RUN/dataset/ (created). 0, or a negative
 * errno with err naming the file. */
int zp_dataset_write(const zp_dataset_t *ds, const char *run_dir, char *err, size_t errlen);
/* Reads RUN/dataset/ back. 0 with *out set; -ENOENT when the run has no
 * description (err says so); ZP_EDATA when it is malformed (err names the
 * file); *out NULL on failure. */
int zp_dataset_read(zp_dataset_t **out, const char *run_dir, char *err, size_t errlen);
/* Frees the dataset and NULLs *ds; safe on NULL and twice. */
void zp_dataset_destroy(zp_dataset_t **ds);

/* 0 when `label` is one of the train split's classes (0..classes-1); else
 * ZP_EDATA with "WHERE: label L of sample I is outside the train split's
 * classes 0..C-1" in err. Every reader of labels (probe, sources, the cache)
 * checks with it: a label beyond the model's outputs is refused where it is
 * read, naming its file and sample. */
int zp_dataset_label_check(const zp_dataset_meta_t *m, const char *where, int64_t index, int64_t label,
                   char *err, size_t errlen);

/* dataset.path joined with a file name. */
void zp_dataset_file(const zp_config_t *cfg, const char *name, char *buf, size_t len);

/* The meta of the records the cache keeps for `split`: m itself, or where
 * the split has a Python augment step a copy of m whose fields are
 * m->cached (records of cached.record_bytes, carried as uint8). */
zp_dataset_meta_t zp_dataset_cached_meta(const zp_dataset_meta_t *m, int split);

/* 0 when the samples are the built-in sources' (image, label), which the
 * built-in trainer takes; else ZP_ECONFIG with a sentence in err. */
int zp_dataset_builtin_fields(const zp_dataset_meta_t *m, char *err, size_t errlen);

/* Normalisation of uint8 pixels, a table of channels x 256 floats:
 * lut[c * 256 + p] = (p / 255 - mean[c]) / std[c] (one mean or std value:
 * every channel). Loaders apply it for float32 samples, the trainer for
 * uint8 ones. Returns a malloc'd table or NULL. */
float *zp_dataset_normalize_lut(const zp_config_t *cfg, int64_t channels);
/* One sample: uint8 CHW pixels -> normalised float32 CHW. */
void zp_dataset_normalize(const float *lut, const zp_dataset_meta_t *m, const uint8_t *px, float *out);

#endif

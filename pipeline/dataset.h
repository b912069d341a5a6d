/* dataset.h — what every stage needs to know about the dataset without
 * loading it: split sizes, sample shape, classes; and the IDX file reader. */
#ifndef ZP_DATASET_H
#define ZP_DATASET_H

#include "pipeline/config.h"
#include "schemas/msg.h"

#include <stddef.h>
#include <stdint.h>

enum { ZP_SPLIT_TRAIN, ZP_SPLIT_TEST, ZP_SPLITS };

typedef struct {
    int64_t n[ZP_SPLITS]; /* samples per split */
    int64_t shape[3];     /* channels, height, width */
    int64_t elems;        /* elements per sample */
    int dtype;            /* ZP_DTYPE_F32 or ZP_DTYPE_U8 (dataset.dtype) */
    size_t sample_bytes;  /* elems x the size of dtype */
    int64_t classes;
    int64_t files_bytes[ZP_SPLITS], files_mtime[ZP_SPLITS]; /* image sources: for the fingerprint */
} zp_dataset_meta_t;

const char *zp_split_name(int split);

/* Reads headers (and the labels: the train split's give the class count) and
 * checks them: a missing file, bad magic, inconsistent count or a test label
 * beyond the train split's classes is reported in `err`, naming the file. */
int zp_dataset_probe(const zp_config_t *cfg, zp_dataset_meta_t *meta, char *err, size_t errlen);

/* 0 when `label` is one of the train split's classes (0..classes-1); else
 * ZP_EDATA with "WHERE: label L of sample I is outside the train split's
 * classes 0..C-1" in err. Every reader of labels (probe, sources, the cache)
 * checks with it: a label beyond the model's outputs is refused where it is
 * read, naming its file and sample. */
int zp_label_check(const zp_dataset_meta_t *m, const char *where, int64_t index, int64_t label,
                   char *err, size_t errlen);

/* An IDX file (gzip or plain) read whole. dims[0] is the item count. */
typedef struct {
    int ndims;
    int64_t dims[4];
    uint8_t *data; /* owned; dims product bytes; NULL after a header-only read */
    size_t bytes;
} zp_idx_t;

/* Reads `path`: header only (data_too = 0) or all. Checks the magic number
 * (unsigned byte type, 1..4 dims) and, reading all, that the file holds exactly
 * the bytes its header promises. Errors name the file and the byte offset. */
int zp_idx_read(const char *path, int data_too, zp_idx_t *out, char *err, size_t errlen);
void zp_idx_free(zp_idx_t *idx);

/* dataset.path joined with a file name. */
void zp_dataset_file(const zp_config_t *cfg, const char *name, char *buf, size_t len);

/* Normalisation of uint8 pixels, a table of channels x 256 floats:
 * lut[c * 256 + p] = (p / 255 - mean[c]) / std[c] (one mean or std value:
 * every channel). Loaders apply it for float32 samples, the trainer for
 * uint8 ones. Returns a malloc'd table or NULL. */
float *zp_normalize_lut(const zp_config_t *cfg, int64_t channels);
/* One sample: uint8 CHW pixels -> normalised float32 CHW. */
void zp_normalize(const float *lut, const zp_dataset_meta_t *m, const uint8_t *px, float *out);

#endif

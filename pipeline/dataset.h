/* dataset.h — what every stage needs to know about the dataset without
 * loading it: split sizes, sample shape, classes; and the IDX file reader. */
#ifndef ZP_DATASET_H
#define ZP_DATASET_H

#include "pipeline/config.h"

#include <stddef.h>
#include <stdint.h>

enum { ZP_SPLIT_TRAIN, ZP_SPLIT_TEST, ZP_SPLITS };

typedef struct {
    int64_t n[ZP_SPLITS]; /* samples per split */
    int64_t shape[3];     /* channels, height, width */
    int64_t elems;        /* float32 elements per sample */
    int64_t classes;
    int64_t files_bytes[ZP_SPLITS], files_mtime[ZP_SPLITS]; /* image sources: for the fingerprint */
} zp_dataset_meta_t;

const char *zp_split_name(int split);

/* Reads headers (and the train labels, for the class count) and checks them:
 * a missing file, bad magic or inconsistent count is reported in `err`,
 * naming the file. */
int zp_dataset_probe(const zp_config_t *cfg, zp_dataset_meta_t *meta, char *err, size_t errlen);

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

#endif

/* source_arrays.h — what dataset.source hdf5 and npy share: a split is the
 * samples of its files one after another (dataset.files.SPLIT, globs in
 * order), a sample is a record of the fields dataset.fields names (axis 0 of
 * every field is the sample), and the probe's list of files goes to the run
 * (RUN/dataset/arrays) so that every loader reads the same files as the
 * supervisor found them. The format's own code (opening a file, a field's
 * type and shape, reading rows) is each source's: a zp_arrays_kind_t. */
#ifndef ZP_SOURCE_ARRAYS_H
#define ZP_SOURCE_ARRAYS_H

#include "pipeline/source/source.h"

#include <limits.h>

typedef struct {
    int split;
    int64_t first, samples; /* its samples are the split's first .. first + samples - 1 */
    int64_t bytes, mtime;   /* of the file (npy: of its folder's field files, summed / latest) */
    char path[PATH_MAX];
} zp_array_file_t;

typedef struct {
    int nfields;
    char name[ZP_FIELDS_MAX][ZP_CONFIG_PAIR_NAME];   /* field names, in dataset.fields' order */
    char where[ZP_FIELDS_MAX][ZP_CONFIG_PAIR_VALUE]; /* HDF5 dataset path, or .npy file name */
    int nfiles;
    zp_array_file_t *file; /* every split's, train first; owned */
    int from[ZP_SPLITS], count[ZP_SPLITS]; /* each split's files: file[from .. from + count) */
} zp_arrays_t;

/* One field of one file as its format describes it. */
typedef struct {
    int dtype; /* ZP_FT_* */
    int ndim;  /* of one sample: the array's dimensions after axis 0 */
    int64_t shape[ZP_FIELD_DIMS];
    int64_t rows; /* axis 0 */
} zp_array_field_t;

/* A format: hdf5 or npy. */
typedef struct {
    const char *name;
    int folders; /* 1: dataset.files names folders of one file per field (npy) */
    /* Describes field `where` of file `path`; 0, or ZP_EDATA with a
     * sentence naming the file and the field (an unsupported type included). */
    int (*describe)(const zp_config_t *cfg, const char *path, const char *where,
                    zp_array_field_t *out, char *err, size_t len);
} zp_arrays_kind_t;

/* The rules on dataset.files and dataset.fields (check of both sources). */
int zp_source_arrays_check(const zp_config_t *cfg, char *err, size_t len);

/* The probe: the files of each split (globs expanded), every field of each
 * described, the same type and sample shape everywhere and the same number
 * of rows in every field of a file; fills ds->meta (records of the fields,
 * as dataset.source python's: uint8 of 1 x 1 x record bytes, classes 1) and
 * ds->arrays. */
int zp_source_arrays_probe(const zp_arrays_kind_t *kind, const zp_config_t *cfg, zp_dataset_t *ds,
                    char *err, size_t len);

/* The fields and files of a run from its description (meta->probed->arrays),
 * checked against its samples and fields; 0, or ZP_EDATA with err.
 * zp_source_arrays_free() releases it. */
int zp_source_arrays_read(zp_arrays_t *a, const zp_config_t *cfg, const zp_dataset_meta_t *meta,
                   char *err, size_t len);
void zp_source_arrays_free(zp_arrays_t *a);

/* The file holding sample `index` of `split`, and its row there. */
const zp_array_file_t *zp_source_arrays_locate(const zp_arrays_t *a, int split, int64_t index,
                                        int64_t *row);

/* dataset_name, identify and fingerprint of both sources. */
void zp_source_arrays_name(const zp_config_t *cfg, char *buf, size_t len);
void zp_source_arrays_identify(const zp_config_t *cfg, FILE *out);
int zp_source_arrays_fingerprint(const zp_config_t *cfg, const zp_dataset_meta_t *m, int split,
                                 char *buf, size_t len);

#endif

/* readers.h — reading a batch's cache hits into its ring slot with a few
 * threads. The batch's keys, sorted, are split across as many threads as the
 * job is worth (the calling thread included; see threads_for in readers.c:
 * all of them for crops and decodes, one per 512 KiB of samples): each looks
 * up its share in a read transaction of its own (open until its share is
 * copied, so the pointers stay valid), then checks, copies and checksums each
 * value.
 *
 * With the crop at assembly (pipeline/image/augment.h zp_augment_whole) a train
 * value is a whole image: its copy is the augmentation. A reader checks it,
 * decodes it when it is a JPEG, draws the box and flip of (seed, epoch,
 * index) on it and resizes the box straight into the slot (pipeline/
 * resample.h), normalised on the way for float32 samples. A Python
 * Dataset's record with the built-in ops on a field (augment_field.h) is
 * checked, and the sample made of it into the slot. */
#ifndef ZP_READERS_H
#define ZP_READERS_H

#include "pipeline/image/augment.h"
#include "pipeline/dataset/augment_field.h"
#include "pipeline/cachedb/cachedb.h"
#include "pipeline/dataset/dataset.h"

#include <lmdb.h>
#include <stdint.h>

enum { ZP_HIT_OK, ZP_HIT_ABSENT, ZP_HIT_CORRUPT };

typedef struct {
    zp_cachedb_t *db;        /* the environment, and the split's database */
    MDB_dbi dbi;
    MDB_val *vals;           /* scratch, n: the values looked up, mv_data NULL when absent */
    const uint64_t *order;   /* (sample index << 32 | position in the batch), sorted */
    int64_t n;
    const zp_dataset_meta_t *meta;
    uint64_t fp;             /* the split's value fingerprint: a value of another is foreign */
    int32_t *labels;         /* the slot's labels, data and crops, by position */
    uint8_t *data;
    zp_crop_t *crops;
    uint8_t *status;         /* out, per value: ZP_HIT_* */
    const char **why;        /* out, per corrupt value: the reason */
    /* Whole images: the draw's parameters; NULL when the values are samples. */
    const zp_rrc_t *rrc;
    uint64_t epoch;
    int64_t side;            /* dataset.image.cache_side: the largest image kept */
    const float *lut;        /* float32 samples: zp_dataset_normalize_lut's table; NULL for uint8 */
    /* A Python Dataset's records with the built-in ops on a field: the ops
     * and what a value holds (zp_dataset_cached_meta); NULL: none. The
     * sample is made of the checked record (zp_augment_field_make). */
    const zp_augment_field_t *field;
    const zp_dataset_meta_t *kept;
    int split;
    /* out: an LMDB error of a lookup or a transaction's start (0: none; the
     * values it hid are ZP_HIT_ABSENT), and what failed */
    int lmdb_rc;
    const char *lmdb_what;
} zp_copy_job_t;

typedef struct zp_readers zp_readers_t;

/* nthreads - 1 helper threads are started (1: the caller does it all; fewer
 * when the system refuses more). 0, or ZP_ENOMEM with *out NULL. */
int zp_readers_create(zp_readers_t **out, int nthreads);
/* Runs the job to completion. The calling thread starts its transaction
 * first, adopting a map another process grew (zp_cachedb_read_begin) while
 * the helpers hold none. */
void zp_readers_run(zp_readers_t *r, zp_copy_job_t *job);
/* The threads (the caller included), and the time they have spent copying
 * since the start, in ns: the prefetch's stats show it as readers_busy. */
int zp_readers_count(const zp_readers_t *r);
int64_t zp_readers_busy_ns(const zp_readers_t *r);
/* Stops and joins the helpers and ends their transactions (before the
 * environment closes). Safe on NULL; nulls *r. */
void zp_readers_destroy(zp_readers_t **r);

#endif

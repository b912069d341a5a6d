/* readers.h — copying a batch's cache hits into its ring slot with a few
 * threads. The prefetch thread looks the values up (one read transaction,
 * which stays open until zp_readers_run returns, so the pointers stay valid);
 * the copy, the header check and the checksum of each value — the memory-bound
 * part — are split across the pool, the calling thread included.
 *
 * With the crop at assembly (pipeline/runtime/augment.h zp_augment_whole) a train
 * value is a whole image: its copy is the augmentation. A reader checks it,
 * decodes it when it is a JPEG, draws the box and flip of (seed, epoch,
 * index) on it and resizes the box straight into the slot (pipeline/
 * resample.h), normalised on the way for float32 samples. */
#ifndef ZP_READERS_H
#define ZP_READERS_H

#include "pipeline/runtime/augment.h"
#include "pipeline/runtime/dataset.h"

#include <lmdb.h>
#include <stdint.h>

enum { ZP_HIT_OK, ZP_HIT_ABSENT, ZP_HIT_CORRUPT };

typedef struct {
    const MDB_val *vals;     /* values, mv_data NULL when absent */
    const uint64_t *order;   /* (sample index << 32 | position in the batch) */
    int64_t n;
    const zp_dataset_meta_t *meta;
    int32_t *labels;         /* the slot's labels and data, by position */
    uint8_t *data;
    uint8_t *status;         /* out, per value: ZP_HIT_* */
    const char **why;        /* out, per corrupt value: the reason */
    /* Whole images: the draw's parameters; NULL when the values are samples. */
    const zp_rrc_t *rrc;
    uint64_t epoch;
    int64_t side;            /* dataset.image.cache_side: the largest image kept */
    const float *lut;        /* float32 samples: zp_dataset_normalize_lut's table; NULL for uint8 */
} zp_copy_job_t;

typedef struct zp_readers zp_readers_t;

/* nthreads - 1 helper threads are started (1: the caller does it all; fewer
 * when the system refuses more). 0, or ZP_ENOMEM with *out NULL. */
int zp_readers_create(zp_readers_t **out, int nthreads);
/* Runs the job to completion. */
void zp_readers_run(zp_readers_t *r, const zp_copy_job_t *job);
/* The threads (the caller included), and the time they have spent copying
 * since the start, in ns: the prefetch's stats show it as readers_busy. */
int zp_readers_count(const zp_readers_t *r);
int64_t zp_readers_busy_ns(const zp_readers_t *r);
/* Stops and joins the helpers. Safe on NULL; nulls *r. */
void zp_readers_destroy(zp_readers_t **r);

#endif

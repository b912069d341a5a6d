/* coverage.h — the trainer's proof that an epoch reached it exactly once:
 * per split and epoch, the samples and batches seen, the number of distinct
 * sample indices, an order-independent checksum of them (a sum of
 * zp_index_term) and an order-dependent digest of the sequence
 * (zp_order_step from ZP_ORDER_INIT); with the epoch's loss and hits beside.
 * With ranks, every rank's counts are summed (zp_coverage_pack/unpack). */
#ifndef ZP_COVERAGE_H
#define ZP_COVERAGE_H

#include "pipeline/ring/comm.h"
#include "pipeline/stage/stage.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int64_t samples, distinct, batches, correct;
    int64_t repeats;  /* of samples: trained again after a resume (zp_coverage_resume) */
    uint64_t checksum, order;
    double loss_sum;
    int64_t start_ns; /* zp_now_ns() at the epoch's first batch */
    int64_t n;        /* indices of the split: 0 .. n-1 */
    uint8_t *seen;    /* bitmap of n bits; owned */
} zp_coverage_t;

/* For a split of n samples. Returns 0, or ZP_ENOMEM (with nothing held). */
int zp_coverage_init(zp_coverage_t *a, int64_t n);
/* Safe on a zeroed or freed one. */
void zp_coverage_free(zp_coverage_t *a);

/* A batch's n indices, in order. The first batch after zp_coverage_end (or
 * init) starts a new epoch: every count, loss and hit is reset then. An
 * index >= the split's size counts in samples and the digest only (the
 * prefetch refuses those before). */
void zp_coverage_add(zp_coverage_t *a, const uint32_t *idx, int64_t n);
/* The epoch is recorded: the next batch starts another. */
void zp_coverage_end(zp_coverage_t *a);

/* An epoch that goes on from a position (a resumed run, a seek): its ranks'
 * shards start at entry `from` of its permutation, and this rank goes on
 * from batch `batches` of its shard. The epoch starts with what came before
 * as though it came here (samples, distinct, checksum and digest; loss and
 * hits are the part trained here): rank 0 takes the entries before `from`
 * (trained by a run of another number of ranks), every rank its shard's
 * batches before `batches`. So its record, summed over the ranks, proves the
 * whole epoch over every part. The shard is the sampler's for `rank` of
 * `world` in `epoch` of `split` (c's seed, shuffle and batch size).
 * `repeats`: samples past `from` that the run before had trained too (a rank
 * of it was ahead of another) and this part trains again; rank 0 counts them
 * in samples and in repeats, never in distinct, so the record says so. 0, or
 * ZP_ENOMEM (the epoch then starts empty and its check says so). */
int zp_coverage_resume(zp_coverage_t *a, const zp_config_t *c, int split, uint64_t epoch,
                       int rank, int world, int64_t from, int64_t batches, int64_t repeats);

/* Whether an epoch's counts (summed over ranks) are exactly once: its
 * samples, less the repeats a resume said, and the `skipped` ones make the
 * sampler's n, and every one of them is distinct. */
int zp_coverage_exact(const zp_coverage_t *a, uint64_t n, uint64_t skipped);

/* The counts a sum over ranks adds: samples, distinct, the checksum as two
 * 32-bit halves (a double adds those exactly), loss sum, correct, repeats. */
#define ZP_COVERAGE_SUMS 7
void zp_coverage_pack(const zp_coverage_t *a, double *s);
void zp_coverage_unpack(zp_coverage_t *a, const double *s);

/* The epoch's counts of every rank, and the sampler's counts (EPOCH_END's n
 * and skipped), summed over the ranks of `comm` into `a`, *n and *skipped:
 * after it every rank holds the whole epoch's. The built-in trainer and the
 * client library call it at each EPOCH_END, every rank in the same order.
 * With one rank nothing changes. Returns 0, or zp_comm_sum's error (then a,
 * *n and *skipped are as they were). */
int zp_coverage_sum_ranks(zp_coverage_t *a, zp_comm_t *comm, uint64_t *n, uint64_t *skipped);

/* What an epoch_end record says beside the counts. */
typedef struct {
    int split;
    uint64_t epoch;           /* from 0 */
    int64_t epochs, step;     /* the run's epochs; train steps taken */
    int64_t expected, skipped; /* the sampler's count (EPOCH_END's n) and samples left out */
    int with_model;           /* loss and accuracy, from loss_sum and correct */
} zp_epoch_info_t;

/* Sends the epoch_end metric record of `a` (dt: the epoch's seconds) to the
 * logger: the one record of an epoch's proof, of the built-in trainer and of
 * the client library alike. */
void zp_coverage_record(zp_stage_t *st, const zp_coverage_t *a, const zp_epoch_info_t *e,
                        double dt);

#endif

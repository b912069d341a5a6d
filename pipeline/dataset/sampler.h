/* sampler.h — which sample indices a rank sees in an epoch, and in what order.
 *
 * The order of an epoch is a function of (seed, split, epoch) only: the same
 * config gives the same batches whatever the number of loaders. With `world`
 * ranks, rank r takes every world-th index of the permutation starting at r,
 * so the shards are disjoint and together cover the split.
 */
#ifndef ZP_SAMPLER_H
#define ZP_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    int64_t n;       /* samples in the split */
    uint32_t *order; /* owned; this rank's indices of the current epoch */
    uint32_t *perm;  /* owned; scratch for the full permutation */
    int64_t count;   /* entries of `order` used */
} zp_sampler_t;

/* Allocates the buffers once for a split of n samples: 0, ZP_EINVAL when n
 * is not 0..UINT32_MAX, ZP_ENOMEM. zp_sampler_free() releases them. */
int zp_sampler_init(zp_sampler_t *s, int64_t n);
void zp_sampler_free(zp_sampler_t *s);

/* Fills s->order for `epoch` of `split` (0 train, 1 test): rank's shard of
 * the permutation's entries from `from` on (0: the whole epoch; an epoch
 * resumed at a position shards only what it has left, over any number of
 * ranks). Without shuffle the order is 0..n-1 before sharding. */
int zp_sampler_epoch(zp_sampler_t *s, uint64_t seed, int split, int64_t epoch, bool shuffle,
                     int rank, int world, int64_t from);

/* Where an epoch cut short goes on. `world` ranks sharded the permutation's
 * entries from `from` on (`rest` of them) and rank r trained batches[r]
 * batches of batch_size (batches NULL: `in_step` each; a rank past its last
 * batch has its shard done, the remainder drop_last leaves out included). Returns the position: `from`
 * plus the longest run of the rest every entry of which was trained, so the
 * epoch goes on there with any number of ranks and no sample is left out.
 * *repeats gets the entries past it that a rank (ahead of another) trained:
 * the resumed part trains them again. Ranks in step, k batches each, give
 * from + k * batch_size * world and no repeats while every shard lasts. */
int64_t zp_sampler_position(int64_t from, int64_t rest, int world, int64_t batch_size,
                            bool drop_last, const int64_t *batches, int64_t in_step,
                            int64_t *repeats);

/* Batches in the current epoch, and the n indices of batch b (pointer into s->order,
 * valid until the next zp_sampler_epoch()). */
int64_t zp_sampler_batches(const zp_sampler_t *s, int64_t batch_size, bool drop_last);
/* The same for rank `rank` of `world` in a split of n samples, without the
 * permutation: rank 0's shard is the largest, by one sample at most. */
int64_t zp_sampler_shard_batches(int64_t n, int rank, int world, int64_t batch_size, bool drop_last);
const uint32_t *zp_sampler_batch(const zp_sampler_t *s, int64_t batch_size, int64_t b, int64_t *n);

#endif

/* sampler.c — which indices a rank sees in an epoch and in what order: a
 * seeded permutation per epoch, sharded by rank. */
#include "pipeline/dataset/sampler.h"
#include "pipeline/base/hash.h"
#include "pipeline/base/log.h"

#include <stdlib.h>
#include <string.h>

int zp_sampler_init(zp_sampler_t *s, int64_t n)
{
    memset(s, 0, sizeof *s);
    if (n < 0 || n > (int64_t)UINT32_MAX)
        return ZP_EINVAL;
    s->n = n;
    s->order = malloc(sizeof(uint32_t) * (size_t)(n ? n : 1));
    s->perm = malloc(sizeof(uint32_t) * (size_t)(n ? n : 1));
    if (!s->order || !s->perm) {
        zp_sampler_free(s);
        return ZP_ENOMEM;
    }
    return 0;
}

void zp_sampler_free(zp_sampler_t *s)
{
    free(s->order);
    free(s->perm);
    s->order = s->perm = NULL;
}

int zp_sampler_epoch(zp_sampler_t *s, uint64_t seed, int split, int64_t epoch, bool shuffle,
                     int rank, int world, int64_t from)
{
    if (world < 1 || rank < 0 || rank >= world || from < 0 || from > s->n)
        return ZP_EINVAL;
    for (int64_t i = 0; i < s->n; i++)
        s->perm[i] = (uint32_t)i;
    if (shuffle) {
        zp_rng_t r;
        zp_rng_seed(&r, seed ^ zp_mix64(((uint64_t)split << 40) ^ (uint64_t)epoch));
        for (int64_t i = s->n - 1; i > 0; i--) {
            int64_t j = (int64_t)zp_rng_below(&r, (uint64_t)i + 1);
            uint32_t t = s->perm[i];
            s->perm[i] = s->perm[j];
            s->perm[j] = t;
        }
    }
    s->count = 0;
    for (int64_t i = from + rank; i < s->n; i += world)
        s->order[s->count++] = s->perm[i];
    return 0;
}

int64_t zp_sampler_position(int64_t from, int64_t rest, int world, int64_t batch_size,
                            bool drop_last, const int64_t *batches, int64_t in_step,
                            int64_t *repeats)
{
    int64_t done = rest, trained = 0; /* done: the first entry of the rest not trained */
    for (int r = 0; r < world && batch_size > 0; r++) {
        int64_t shard = rest / world + (r < rest % world);
        int64_t last = zp_sampler_shard_batches(rest, r, world, batch_size, drop_last);
        /* rank r's entries are the rest's r, r + world, ...: its first `took` of them */
        int64_t k = batches ? batches[r] : in_step;
        int64_t took = k >= last ? shard : k * batch_size;
        trained += took;
        if (took < shard && r + took * world < done)
            done = r + took * world;
    }
    *repeats = trained - done;
    return from + done;
}

int64_t zp_sampler_shard_batches(int64_t n, int rank, int world, int64_t batch_size, bool drop_last)
{
    if (batch_size <= 0 || world < 1 || rank < 0 || rank >= world)
        return 0;
    int64_t size = n / world + (rank < n % world);
    return drop_last ? size / batch_size : (size + batch_size - 1) / batch_size;
}

int64_t zp_sampler_batches(const zp_sampler_t *s, int64_t batch_size, bool drop_last)
{
    if (batch_size <= 0)
        return 0;
    return drop_last ? s->count / batch_size : (s->count + batch_size - 1) / batch_size;
}

const uint32_t *zp_sampler_batch(const zp_sampler_t *s, int64_t batch_size, int64_t b, int64_t *n)
{
    int64_t start = b * batch_size;
    if (b < 0 || start >= s->count) {
        *n = 0;
        return NULL;
    }
    *n = s->count - start < batch_size ? s->count - start : batch_size;
    return s->order + start;
}

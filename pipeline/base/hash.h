/* hash.h — the seeded generator and the index checksums every stage agrees on. */
#ifndef ZP_HASH_H
#define ZP_HASH_H

#include <stdint.h>

/* splitmix64: a bijective 64-bit mix; also the checksum term of one sample index. */
static inline uint64_t zp_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A small, fast generator (xoshiro256**), seeded through splitmix64. */
typedef struct {
    uint64_t s[4];
} zp_rng_t;

void zp_rng_seed(zp_rng_t *r, uint64_t seed);
uint64_t zp_rng_next(zp_rng_t *r);
/* Uniform in [0, bound), without modulo bias. bound > 0. */
uint64_t zp_rng_below(zp_rng_t *r, uint64_t bound);
/* Uniform float in [0, 1). */
float zp_rng_float(zp_rng_t *r);

/* Order-independent checksum of a set of sample indices: the sum of zp_mix64(i).
 * Order-dependent digest of a sequence: FNV-1a style over the same terms. */
static inline uint64_t zp_index_term(uint64_t index) { return zp_mix64(index); }
static inline uint64_t zp_order_step(uint64_t digest, uint64_t index)
{
    return (digest ^ zp_mix64(index)) * 0x100000001b3ull;
}
#define ZP_ORDER_INIT 0xcbf29ce484222325ull

#endif

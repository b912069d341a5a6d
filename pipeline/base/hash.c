/* hash.c — the seeded generator (splitmix64) and the index checksums every
 * stage agrees on. */
#include "pipeline/base/hash.h"

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void zp_rng_seed(zp_rng_t *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) {
        seed = zp_mix64(seed);
        r->s[i] = seed;
    }
}

uint64_t zp_rng_next(zp_rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

uint64_t zp_rng_below(zp_rng_t *r, uint64_t bound)
{
    uint64_t limit = -bound % bound; /* 2^64 mod bound */
    for (;;) {
        uint64_t x = zp_rng_next(r);
        if (x >= limit)
            return x % bound;
    }
}

float zp_rng_float(zp_rng_t *r) { return (float)(zp_rng_next(r) >> 40) * 0x1.0p-24f; }

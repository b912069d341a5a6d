/* lmdb_ceiling.c — the ceilings the cache hit path is measured against:
 * LMDB's random-order get rate (one thread, one read transaction, every value
 * copied out) and a single-thread memcpy of the same value size.
 * usage: zp-bench-lmdb ENV DB [passes]   prints one JSON object. */
#define _GNU_SOURCE
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s ENV DB [passes]\n", argv[0]);
        return 2;
    }
    int passes = argc > 3 ? atoi(argv[3]) : 3;
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_cursor *cur;
    MDB_val k, v;
    int rc = mdb_env_create(&env);
    mdb_env_set_maxdbs(env, 64);
    if (!rc)
        rc = mdb_env_open(env, argv[1], MDB_RDONLY | MDB_NORDAHEAD, 0644);
    if (!rc)
        rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
    if (!rc)
        rc = mdb_dbi_open(txn, argv[2], 0, &dbi);
    if (!rc)
        rc = mdb_cursor_open(txn, dbi, &cur);
    if (rc) {
        fprintf(stderr, "%s %s: %s\n", argv[1], argv[2], mdb_strerror(rc));
        return 1;
    }
    size_t n = 0, cap = 1024, vsize = 0;
    uint8_t(*keys)[4] = malloc(cap * 4);
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); !rc; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size != 4)
            continue;
        if (n == cap)
            keys = realloc(keys, (cap *= 2) * 4);
        memcpy(keys[n++], k.mv_data, 4);
        vsize = v.mv_size;
    }
    mdb_cursor_close(cur);
    for (size_t i = n - 1; i > 0; i--) { /* a random order */
        size_t j = next() % (i + 1);
        uint8_t t[4];
        memcpy(t, keys[i], 4), memcpy(keys[i], keys[j], 4), memcpy(keys[j], t, 4);
    }
    size_t ring = 64u << 20, slots = ring / vsize;
    uint8_t *dst = malloc(ring);
    memset(dst, 1, ring);
    double best = 0;
    for (int p = 0; p <= passes; p++) { /* pass 0 warms the page cache */
        double t0 = now();
        for (size_t i = 0; i < n; i++) {
            k.mv_size = 4, k.mv_data = keys[i];
            if (mdb_get(txn, dbi, &k, &v) == 0)
                memcpy(dst + (i % slots) * vsize, v.mv_data, v.mv_size);
        }
        double rate = n / (now() - t0);
        if (p && rate > best)
            best = rate;
    }
    mdb_txn_abort(txn);
    /* memcpy of the same value size, from a source as large as the data set */
    size_t src_bytes = n * vsize < (256u << 20) ? n * vsize : (256u << 20), nsrc = src_bytes / vsize;
    uint8_t *src = malloc(src_bytes);
    memset(src, 2, src_bytes);
    double mbest = 0;
    for (int p = 0; p <= passes; p++) {
        double t0 = now();
        for (size_t i = 0; i < n; i++)
            memcpy(dst + (i % slots) * vsize, src + (next() % nsrc) * vsize, vsize);
        double rate = n * (double)vsize / (now() - t0);
        if (p && rate > mbest)
            mbest = rate;
    }
    printf("{\"values\":%zu,\"value_bytes\":%zu,\"get_per_s\":%.0f,\"get_bytes_per_s\":%.0f,"
           "\"memcpy_bytes_per_s\":%.0f,\"check\":%d}\n",
           n, vsize, best, best * vsize, mbest, dst[12345 % ring]);
    mdb_env_close(env);
    free(keys), free(dst), free(src);
    return 0;
}

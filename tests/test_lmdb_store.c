/* Unit tests of the cache stage's LMDB writer (stages/cache/store.h) in
 * a temporary folder: what is put is got back, before and after the commit
 * and after a reopen; a missing, skipped or corrupt sample makes the whole
 * request a miss, and putting it again heals it; a full map turns caching off
 * with one warning event and never fails the caller. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pipeline/cachedb/cachedb.h"
#include "pipeline/base/log.h"
#include "pipeline/source/source.h"
#include "pipeline/stage/stage.h"
#include "schemas/msg.h"
#include "stages/cache/store.h"

static char dir[64], err[2048];
static zp_stage_t *st; /* the cache stage as the store sees it: config, dataset, timers, events */

/* A synthetic dataset of 1x2x3 float32 samples, 5 classes, cached in the
 * test's folder; `extra` overrides on top. No event socket: events are
 * dropped and counted in st->events_dropped. */
static void stage(const char *extra)
{
    memset(st, 0, sizeof *st);
    st->name = "cache";
    char path[128];
    snprintf(path, sizeof path, "cache.path=%s/cache", dir);
    char *ov[] = {"dataset.source=synthetic", "dataset.synthetic.shape=[1, 2, 3]",
                  "dataset.synthetic.classes=5", "cache.commit_every=1000", path, (char *)extra};
    if (zp_config_load(&st->cfg, NULL, ov, extra ? 6 : 5, err, sizeof err))
        fail_msg("config: %s", err);
    if (zp_source_probe_meta(&st->cfg, &st->meta, err, sizeof err))
        fail_msg("probe: %s", err);
    zp_timer_init(&st->timers, NULL, NULL);
}

/* The stage's fingerprints recorded, as the supervisor does before the cache
 * stage starts (nothing where the cache cannot be opened). */
static void record(void)
{
    zp_cachedb_t c;
    if (zp_cachedb_open(&c, &st->cfg, &st->meta, 0, err, sizeof err))
        return;
    if (zp_cachedb_check(&c, &st->cfg, &st->meta, NULL, err, sizeof err))
        fail_msg("check: %s", err);
    zp_cachedb_close(&c);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/zp-test-store-XXXXXX");
    st = calloc(1, sizeof *st);
    return mkdtemp(dir) && st ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    free(st);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

/* n samples as SAMPLES carries them: u32 indices, i32 labels, sample_bytes each. */
typedef struct {
    uint8_t idx[4 * 64], lab[4 * 64];
    float data[64 * 6];
} batch_t;

static void batch(batch_t *b, int n, const uint32_t *index, const int32_t *label)
{
    for (int i = 0; i < n; i++) {
        memcpy(b->idx + 4 * i, &index[i], 4);
        memcpy(b->lab + 4 * i, &label[i], 4);
        for (int j = 0; j < 6; j++)
            b->data[6 * i + j] = (float)index[i] + (float)j / 8;
    }
}

/* Gets n samples; 1 when every one was whole, and then checks them against b. */
static int get(zp_store_t *s, int split, int n, const batch_t *b)
{
    int32_t labels[64];
    float data[64 * 6];
    memset(data, 0xee, sizeof data);
    int hit = zp_store_get(s, split, (uint64_t)n, b->idx, labels, (uint8_t *)data);
    if (hit) {
        assert_memory_equal(labels, b->lab, 4 * (size_t)n);
        assert_memory_equal(data, b->data, 24 * (size_t)n);
    }
    return hit;
}

/* How many samples of `split` another process sees: a reader in a child (LMDB
 * allows one handle on an environment per process). */
static int stored_elsewhere(int split)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        zp_cachedb_t r;
        uint8_t bits[8];
        if (zp_cachedb_open(&r, &st->cfg, &st->meta, 1, err, sizeof err))
            _exit(255);
        int64_t n = zp_cachedb_present(&r, split, 64, bits);
        zp_cachedb_close(&r);
        _exit(r.error ? 254 : (int)n);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void what_is_put_is_got_back_before_and_after_commit_and_reopen(void **state)
{
    (void)state;
    stage(NULL);
    record();
    zp_store_t *s;
    assert_int_equal(zp_store_create(&s, st), 0);
    batch_t b;
    batch(&b, 3, (const uint32_t[]){5, 0, 17}, (const int32_t[]){4, 0, 2});
    assert_int_equal(get(s, ZP_SPLIT_TRAIN, 3, &b), 0); /* empty */
    zp_store_put(s, ZP_SPLIT_TRAIN, 3, b.idx, b.lab, (const uint8_t *)b.data);
    assert_int_equal(get(s, ZP_SPLIT_TRAIN, 3, &b), 1); /* inside the pending transaction */
    assert_int_equal(get(s, ZP_SPLIT_TEST, 3, &b), 0);  /* another split */
    zp_store_commit(s);
    assert_int_equal(get(s, ZP_SPLIT_TRAIN, 3, &b), 1); /* a read transaction of its own */
    zp_store_destroy(&s);
    assert_null(s);
    zp_store_destroy(&s); /* safe twice */

    assert_int_equal(zp_store_create(&s, st), 0);
    assert_int_equal(get(s, ZP_SPLIT_TRAIN, 3, &b), 1);
    assert_int_equal(st->events_dropped, 0); /* no warning was sent */
    zp_store_destroy(&s);
}

static void a_commit_every_n_samples_makes_them_durable(void **state)
{
    (void)state;
    stage("cache.commit_every=2");
    record();
    zp_store_t *s;
    assert_int_equal(zp_store_create(&s, st), 0);
    batch_t b;
    batch(&b, 2, (const uint32_t[]){1, 2}, (const int32_t[]){1, 2});
    zp_store_put(s, ZP_SPLIT_TRAIN, 2, b.idx, b.lab, (const uint8_t *)b.data);
    assert_int_equal(zp_store_tick(s), 100); /* committed already: nothing to wait for */
    assert_int_equal(stored_elsewhere(ZP_SPLIT_TRAIN), 2); /* without the writer's close */
    batch(&b, 1, (const uint32_t[]){3}, (const int32_t[]){3});
    zp_store_put(s, ZP_SPLIT_TRAIN, 1, b.idx, b.lab, (const uint8_t *)b.data);
    int wait = zp_store_tick(s); /* pending: the time left to the 100 ms commit */
    assert_true(wait >= 1 && wait <= 101);
    zp_store_destroy(&s);
}

static void a_missing_or_skipped_sample_makes_the_request_a_miss(void **state)
{
    (void)state;
    stage(NULL);
    record();
    zp_store_t *s;
    assert_int_equal(zp_store_create(&s, st), 0);
    batch_t b;
    batch(&b, 2, (const uint32_t[]){1, 2}, (const int32_t[]){1, ZP_LABEL_SKIPPED});
    zp_store_put(s, ZP_SPLIT_TRAIN, 2, b.idx, b.lab, (const uint8_t *)b.data);
    zp_store_commit(s);
    assert_int_equal(get(s, ZP_SPLIT_TRAIN, 2, &b), 0); /* the skipped one was not kept */
    assert_int_equal(get(s, ZP_SPLIT_TRAIN, 1, &b), 1); /* the other was */
    batch(&b, 2, (const uint32_t[]){1, 9}, (const int32_t[]){1, 0});
    assert_int_equal(get(s, ZP_SPLIT_TRAIN, 2, &b), 0); /* 9 was never put */
    zp_store_destroy(&s);
}

static void a_corrupt_value_is_a_miss_and_a_new_put_heals_it(void **state)
{
    (void)state;
    stage(NULL);
    record();
    zp_store_t *s;
    assert_int_equal(zp_store_create(&s, st), 0);
    batch_t b;
    batch(&b, 2, (const uint32_t[]){4, 6}, (const int32_t[]){3, 1});
    zp_store_put(s, ZP_SPLIT_TRAIN, 2, b.idx, b.lab, (const uint8_t *)b.data);
    zp_store_destroy(&s);

    /* flip one pixel of sample 6 behind the store's back */
    zp_cachedb_t c;
    assert_int_equal(zp_cachedb_open(&c, &st->cfg, &st->meta, 0, err, sizeof err), 0);
    MDB_txn *txn;
    assert_int_equal(zp_cachedb_write_begin(&c, &txn), 0);
    uint8_t kb[4], v[ZP_CACHE_HDR + 24];
    zp_cachedb_key(6, kb);
    MDB_val k = {4, kb}, val;
    assert_int_equal(mdb_get(txn, c.dbi[ZP_SPLIT_TRAIN], &k, &val), 0);
    assert_int_equal(val.mv_size, sizeof v);
    memcpy(v, val.mv_data, sizeof v);
    v[ZP_CACHE_HDR + 5] ^= 0x04;
    val.mv_data = v;
    assert_int_equal(mdb_put(txn, c.dbi[ZP_SPLIT_TRAIN], &k, &val, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    zp_cachedb_close(&c);

    assert_int_equal(zp_store_create(&s, st), 0);
    assert_int_equal(get(s, ZP_SPLIT_TRAIN, 2, &b), 0); /* never served */
    zp_store_put(s, ZP_SPLIT_TRAIN, 2, b.idx, b.lab, (const uint8_t *)b.data); /* the loaders' answer */
    assert_int_equal(get(s, ZP_SPLIT_TRAIN, 2, &b), 1);
    zp_store_destroy(&s);
}

static void a_full_map_turns_caching_off_with_one_warning(void **state)
{
    (void)state;
    /* 3x64x64 float32 samples, 48 KiB each, in a map of at most 1 MiB */
    stage(NULL);
    char path[128];
    snprintf(path, sizeof path, "cache.path=%s/small", dir);
    char *ov[] = {"dataset.source=synthetic", "dataset.synthetic.shape=[3, 64, 64]",
                  "cache.max_bytes=1MiB", "cache.commit_every=1000", path};
    assert_int_equal(zp_config_load(&st->cfg, NULL, ov, 5, err, sizeof err), 0);
    assert_int_equal(zp_source_probe_meta(&st->cfg, &st->meta, err, sizeof err), 0);
    record();
    zp_store_t *s;
    assert_int_equal(zp_store_create(&s, st), 0);
    size_t bytes = st->meta.sample_bytes;
    enum { N = 40 };
    uint8_t idx[4 * N], lab[4 * N];
    uint8_t *data = calloc(N, bytes);
    assert_non_null(data);
    for (uint32_t i = 0; i < N; i++) {
        int32_t label = (int32_t)(i % 10);
        memcpy(idx + 4 * i, &i, 4);
        memcpy(lab + 4 * i, &label, 4);
    }
    for (int i = 0; i < N; i += 4) /* the cache stage's rhythm: one task at a time */
        zp_store_put(s, ZP_SPLIT_TRAIN, 4, idx + 4 * i, lab + 4 * i, data + (size_t)i * bytes);
    assert_int_equal(st->events_dropped, 1); /* one warning event, however many puts followed */
    int32_t labels[4];
    uint8_t *out = malloc(4 * bytes);
    assert_int_equal(zp_store_get(s, ZP_SPLIT_TRAIN, 4, idx, labels, out), 0); /* off: misses */
    zp_store_put(s, ZP_SPLIT_TRAIN, 4, idx, lab, data); /* and puts do nothing */
    assert_int_equal(st->events_dropped, 1);
    zp_store_destroy(&s);
    /* what was committed before the map filled is whole */
    zp_cachedb_t r;
    assert_int_equal(zp_cachedb_open(&r, &st->cfg, &st->meta, 1, err, sizeof err), 0);
    uint8_t bits[N / 8];
    int64_t kept = zp_cachedb_present(&r, ZP_SPLIT_TRAIN, N, bits);
    assert_true(kept > 0 && kept < N);
    zp_cachedb_close(&r);
    free(out);
    free(data);
}

static void a_store_that_cannot_open_says_so_and_a_null_store_is_a_miss(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/a-file", dir); /* a file where a folder must go */
    FILE *in_the_way = fopen(path, "w");
    assert_non_null(in_the_way);
    fclose(in_the_way);
    snprintf(path, sizeof path, "cache.path=%s/a-file/cache", dir);
    stage(path);
    zp_store_t *s = (zp_store_t *)1;
    assert_int_equal(zp_store_create(&s, st), ZP_EDATA);
    assert_null(s);
    batch_t b;
    batch(&b, 1, (const uint32_t[]){0}, (const int32_t[]){0});
    zp_store_put(NULL, ZP_SPLIT_TRAIN, 1, b.idx, b.lab, (const uint8_t *)b.data);
    assert_int_equal(get(NULL, ZP_SPLIT_TRAIN, 1, &b), 0);
    zp_store_commit(NULL);
    zp_store_destroy(NULL);
}

int main(void)
{
    zp_log_set_level(ZP_LOG_ERROR);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(what_is_put_is_got_back_before_and_after_commit_and_reopen),
        T(a_commit_every_n_samples_makes_them_durable),
        T(a_missing_or_skipped_sample_makes_the_request_a_miss),
        T(a_corrupt_value_is_a_miss_and_a_new_put_heals_it),
        T(a_full_map_turns_caching_off_with_one_warning),
        T(a_store_that_cannot_open_says_so_and_a_null_store_is_a_miss),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

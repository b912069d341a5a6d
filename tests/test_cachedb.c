/* Unit tests of the LMDB cache as every process sees it (pipeline/cachedb/cachedb.h):
 * the fingerprint says what a cache was built from and changes with it; a
 * value's header is laid out as documented and any flipped field or pixel is
 * caught; an environment is created, reopened read-only and scanned in a
 * temporary folder; a cache built from another dataset is refused or rebuilt. */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipeline/cachedb/cachedb.h"
#include "pipeline/config/config.h"
#include "pipeline/dataset/dataset.h"
#include "pipeline/source/source.h"
#include "pipeline/base/log.h"

static char dir[64], err[2048];

/* A synthetic config (4 train and 3 test samples of 1x2x3, 5 classes) whose
 * cache lives in the test's folder, with `extra` overrides on top. */
static void config(zp_config_t *cfg, zp_dataset_meta_t *m, const char *extra)
{
    char path[128];
    snprintf(path, sizeof path, "cache.path=%s/cache", dir);
    char *ov[8] = {"dataset.source=synthetic", "dataset.synthetic.train_samples=4",
                   "dataset.synthetic.test_samples=3", "dataset.synthetic.shape=[1, 2, 3]",
                   "dataset.synthetic.classes=5", path, (char *)extra};
    if (zp_config_load(cfg, NULL, ov, extra ? 7 : 6, err, sizeof err))
        fail_msg("config: %s", err);
    if (zp_source_probe_meta(cfg, m, err, sizeof err))
        fail_msg("probe: %s", err);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/zp-test-cachedb-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

/* ---- fingerprints --------------------------------------------------------------------- */

static void the_fingerprint_says_what_the_cache_was_built_from(void **state)
{
    (void)state;
    zp_config_t cfg;
    zp_dataset_meta_t m;
    config(&cfg, &m, "seed=7");
    char fp[2048];
    zp_cachedb_fingerprint(&cfg, &m, ZP_SPLIT_TRAIN, fp, sizeof fp);
    assert_non_null(strstr(fp, "value schema: 4 (float32, XXH3-64 of header and payload)\n"));
    assert_non_null(strstr(fp, "source: synthetic seed=7 classes=5\n"));
    assert_non_null(strstr(fp, "samples: 4 of 1x2x3\n"));
    assert_non_null(strstr(fp, "transform: normalize(mean=["));
    zp_cachedb_fingerprint(&cfg, &m, ZP_SPLIT_TEST, fp, sizeof fp);
    assert_non_null(strstr(fp, "samples: 3 of 1x2x3\n"));

    config(&cfg, &m, "dataset.dtype=uint8"); /* the trainer normalises: no transform kept */
    zp_cachedb_fingerprint(&cfg, &m, ZP_SPLIT_TRAIN, fp, sizeof fp);
    assert_non_null(strstr(fp, "(uint8, "));
    assert_non_null(strstr(fp, "transform: none (uint8 pixels)\n"));
}

static void an_idx_fingerprint_names_each_file_with_size_and_time(void **state)
{
    (void)state;
    zp_config_t cfg;
    zp_dataset_meta_t m = {0};
    char *ov[] = {"dataset.source=idx", "dataset.path=/usr/share/datasets/fashion-mnist"};
    assert_int_equal(zp_config_load(&cfg, NULL, ov, 2, err, sizeof err), 0);
    m.dtype = ZP_DTYPE_F32; /* the fingerprint reads the files' metadata, not the files */
    char fp[2048];
    zp_cachedb_fingerprint(&cfg, &m, ZP_SPLIT_TEST, fp, sizeof fp);
    assert_non_null(strstr(fp, "source: idx\n"));
    assert_non_null(strstr(fp, "images: /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz size="));
    assert_non_null(strstr(fp, "labels: /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz size="));
    assert_non_null(strstr(fp, " mtime="));
    snprintf(cfg.dataset_path, sizeof cfg.dataset_path, "%s/none", dir);
    zp_cachedb_fingerprint(&cfg, &m, ZP_SPLIT_TRAIN, fp, sizeof fp);
    assert_non_null(strstr(fp, "/none/train-images-idx3-ubyte.gz missing\n"));
}

static void the_fingerprint_number_changes_with_what_loaders_send(void **state)
{
    (void)state;
    zp_config_t cfg;
    zp_dataset_meta_t m;
    config(&cfg, &m, NULL);
    uint64_t base = zp_cachedb_fingerprint_hash(&cfg, &m);
    assert_int_equal(zp_cachedb_fingerprint_hash(&cfg, &m), base);
    const char *changes[] = {"seed=2", "dataset.dtype=uint8", "dataset.synthetic.classes=6",
                             "dataset.mean=[0.5]", "dataset.augment.where=loader"};
    for (size_t i = 0; i < sizeof changes / sizeof *changes; i++) {
        config(&cfg, &m, changes[i]);
        if (zp_cachedb_fingerprint_hash(&cfg, &m) == base)
            fail_msg("%s did not change the fingerprint", changes[i]);
    }
    /* augmentation in the trainer is not what loaders send */
    config(&cfg, &m, "dataset.augment.hflip=true");
    assert_int_equal(zp_cachedb_fingerprint_hash(&cfg, &m), base);
}

/* ---- the value layout ----------------------------------------------------------------- */

#define FP 0x0123456789abcdefull /* the value fingerprint these values are written with */

typedef struct {
    uint8_t v[ZP_CACHE_HDR + 6 * 4];
    zp_dataset_meta_t m;
} value_t;

static void make_value(value_t *x, uint32_t index, int32_t label)
{
    zp_config_t cfg;
    config(&cfg, &x->m, NULL);
    float px[6] = {0.5f, -1, 2, 3.25f, 0, 1e-3f};
    zp_cachedb_header(x->v, &x->m, FP, index, label, px, sizeof px);
    memcpy(x->v + ZP_CACHE_HDR, px, sizeof px);
}

static int check(value_t *x, uint32_t index, int32_t *label, const char **why)
{
    MDB_val v = {sizeof x->v, x->v};
    const uint8_t *payload = NULL;
    return zp_cachedb_check_value(&v, &x->m, FP, index, label, &payload, why);
}

static void a_value_header_is_laid_out_as_documented(void **state)
{
    (void)state;
    value_t x;
    make_value(&x, 0x01020304, 4);
    assert_memory_equal(x.v, "ZPC1", 4);
    assert_int_equal(x.v[4], ZP_CACHE_VERSION);
    assert_int_equal(x.v[5], ZP_DTYPE_F32);
    assert_int_equal(x.v[6], 3);
    assert_int_equal(x.v[7], 0);
    const uint8_t shape[12] = {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0};
    assert_memory_equal(x.v + 8, shape, 12);
    const uint8_t rest[12] = {4, 0, 0, 0, 4, 3, 2, 1, 24, 0, 0, 0}; /* label, index, bytes */
    assert_memory_equal(x.v + 20, rest, 12);
    uint64_t fp, sum;
    memcpy(&fp, x.v + 32, 8);
    assert_true(fp == FP);
    memcpy(&sum, x.v + 40, 8);
    assert_true(sum == zp_cachedb_sum(x.v, x.v + ZP_CACHE_HDR, 24));
    uint8_t key[4];
    zp_cachedb_key(0x01020304, key);
    assert_memory_equal(key, "\x01\x02\x03\x04", 4); /* big-endian: a cursor walks in index order */

    int32_t label = -1;
    const uint8_t *payload = NULL;
    const char *why = NULL;
    MDB_val v = {sizeof x.v, x.v};
    assert_int_equal(zp_cachedb_check_value(&v, &x.m, FP, 0x01020304, &label, &payload, &why), 0);
    assert_int_equal(label, 4);
    assert_ptr_equal(payload, x.v + ZP_CACHE_HDR);
}

static void any_flipped_header_or_payload_byte_is_a_corrupt_value(void **state)
{
    (void)state;
    for (size_t off = 0; off < ZP_CACHE_HDR + 24; off++) {
        value_t x;
        make_value(&x, 9, 2);
        x.v[off] ^= 0x01;
        int32_t label;
        const char *why = NULL;
        if (check(&x, 9, &label, &why) != ZP_EDATA)
            fail_msg("a flip at byte %zu was served", off);
        assert_non_null(why);
    }
}

static void each_fault_has_its_reason(void **state)
{
    (void)state;
    value_t x;
    int32_t label;
    const char *why;
    make_value(&x, 9, 2);
    MDB_val shorter = {sizeof x.v - 1, x.v};
    const uint8_t *payload;
    assert_int_equal(zp_cachedb_check_value(&shorter, &x.m, FP, 9, &label, &payload, &why), ZP_EDATA);
    assert_string_equal(why, "value has the wrong size");
    assert_int_equal(check(&x, 10, &label, &why), ZP_EDATA);
    assert_string_equal(why, "value belongs to another key");
    x.v[4] = 1; /* a version 1 value */
    assert_int_equal(check(&x, 9, &label, &why), ZP_EDATA);
    assert_string_equal(why, "bad magic, version or dtype");
    make_value(&x, 9, 2);
    x.v[12] = 9;
    assert_int_equal(check(&x, 9, &label, &why), ZP_EDATA);
    assert_string_equal(why, "shape differs from the dataset's");
    make_value(&x, 9, 5); /* classes 0..4 */
    assert_int_equal(check(&x, 9, &label, &why), ZP_EDATA);
    assert_string_equal(why, "label outside the dataset's classes");
    make_value(&x, 9, 2);
    x.v[20] = 3; /* another class, inside the range: only the checksum sees it */
    assert_int_equal(check(&x, 9, &label, &why), ZP_EDATA);
    assert_string_equal(why, "checksum mismatch (header or payload)");
    make_value(&x, 9, 2);
    x.v[ZP_CACHE_HDR + 23] ^= 0x80;
    assert_int_equal(check(&x, 9, &label, &why), ZP_EDATA);
    assert_string_equal(why, "checksum mismatch (header or payload)");
    make_value(&x, 9, 2); /* a sound value of another fingerprint: foreign, never served */
    MDB_val v = {sizeof x.v, x.v};
    assert_int_equal(zp_cachedb_check_value(&v, &x.m, FP + 1, 9, &label, &payload, &why), ZP_EDATA);
    assert_string_equal(why, ZP_CACHE_FOREIGN);
}

static void the_header_check_leaves_the_sum_to_the_caller(void **state)
{
    (void)state;
    value_t x;
    make_value(&x, 1, 0);
    x.v[ZP_CACHE_HDR] ^= 0xff; /* a flipped pixel passes the header check ... */
    MDB_val v = {sizeof x.v, x.v};
    int32_t label;
    const uint8_t *payload;
    uint64_t sum;
    const char *why;
    assert_int_equal(zp_cachedb_check_header(&v, &x.m, FP, 1, &label, &payload, &sum, &why), 0);
    /* ... and the caller's sum over its copy catches it */
    uint8_t copy[24];
    memcpy(copy, payload, sizeof copy);
    assert_true(zp_cachedb_sum(x.v, copy, sizeof copy) != sum);
}

/* ---- an environment in a temporary folder --------------------------------------------- */

static void put(zp_cachedb_t *c, int split, uint32_t index, const void *val, size_t n)
{
    MDB_txn *txn;
    assert_int_equal(zp_cachedb_write_begin(c, &txn), 0);
    uint8_t kb[4];
    zp_cachedb_key(index, kb);
    MDB_val k = {4, kb}, v = {n, (void *)val};
    assert_int_equal(mdb_put(txn, c->dbi[split], &k, &v, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
}

static void a_writer_creates_and_a_reader_reopens_the_environment(void **state)
{
    (void)state;
    zp_config_t cfg;
    zp_dataset_meta_t m;
    config(&cfg, &m, NULL);
    zp_cachedb_t r;
    /* a reader before anything was written: nothing to open, and the error names the path */
    assert_int_not_equal(zp_cachedb_open(&r, &cfg, &m, 1, err, sizeof err), 0);
    assert_non_null(strstr(err, cfg.cache_path));
    assert_null(r.env);

    zp_cachedb_t w;
    assert_int_equal(zp_cachedb_open(&w, &cfg, &m, 0, err, sizeof err), 0);
    assert_string_equal(w.name[ZP_SPLIT_TRAIN], "synthetic/train");
    assert_string_equal(w.name[ZP_SPLIT_TEST], "synthetic/test");
    assert_true(w.map_bytes > 0 && w.map_bytes <= w.max_bytes);
    char data[300];
    snprintf(data, sizeof data, "%s/data.mdb", cfg.cache_path);
    assert_int_equal(access(data, F_OK), 0);
    value_t x;
    make_value(&x, 3, 1);
    put(&w, ZP_SPLIT_TRAIN, 3, x.v, sizeof x.v);
    zp_cachedb_close(&w); /* LMDB: one handle on an environment per process at a time */
    assert_null(w.env);

    assert_int_equal(zp_cachedb_open(&r, &cfg, &m, 1, err, sizeof err), 0);
    MDB_txn *txn;
    assert_int_equal(zp_cachedb_read_begin(&r, &txn), 0);
    uint8_t kb[4];
    zp_cachedb_key(3, kb);
    MDB_val k = {4, kb}, v;
    assert_int_equal(mdb_get(txn, r.dbi[ZP_SPLIT_TRAIN], &k, &v), 0);
    int32_t label;
    const uint8_t *payload;
    const char *why;
    assert_int_equal(zp_cachedb_check_value(&v, &m, FP, 3, &label, &payload, &why), 0);
    assert_int_equal(label, 1);
    zp_cachedb_key(2, kb);
    assert_int_equal(mdb_get(txn, r.dbi[ZP_SPLIT_TRAIN], &k, &v), MDB_NOTFOUND);
    mdb_txn_abort(txn);
    /* a reader cannot write */
    assert_int_not_equal(zp_cachedb_write_begin(&r, &txn), 0);
    assert_null(txn);
    zp_cachedb_close(&r);
    assert_null(r.env);
    zp_cachedb_close(&r); /* safe twice */
}

static void a_cache_path_that_cannot_be_made_is_an_error_naming_it(void **state)
{
    (void)state;
    zp_config_t cfg;
    zp_dataset_meta_t m;
    char path[128];
    snprintf(path, sizeof path, "%s/a-file", dir); /* a file where a folder must go */
    FILE *in_the_way = fopen(path, "w");
    assert_non_null(in_the_way);
    fclose(in_the_way);
    snprintf(path, sizeof path, "cache.path=%s/a-file/cache", dir);
    config(&cfg, &m, path);
    zp_cachedb_t c;
    assert_int_not_equal(zp_cachedb_open(&c, &cfg, &m, 0, err, sizeof err), 0);
    assert_non_null(strstr(err, "/a-file/cache: cannot create"));
}

static void present_lists_the_stored_keys_of_a_split(void **state)
{
    (void)state;
    zp_config_t cfg;
    zp_dataset_meta_t m;
    config(&cfg, &m, NULL);
    zp_cachedb_t c;
    assert_int_equal(zp_cachedb_open(&c, &cfg, &m, 0, err, sizeof err), 0);
    uint8_t bits[2];
    assert_int_equal(zp_cachedb_present(&c, ZP_SPLIT_TRAIN, 10, bits), 0);
    assert_int_equal(c.error, 0);
    for (uint32_t i = 0; i < 20; i += 3) /* 0, 3, ..., 18: those >= 10 are ignored */
        put(&c, ZP_SPLIT_TRAIN, i, "x", 1);
    put(&c, ZP_SPLIT_TEST, 1, "x", 1); /* another split */
    MDB_txn *txn; /* a key that is not 4 bytes is no sample */
    assert_int_equal(zp_cachedb_write_begin(&c, &txn), 0);
    MDB_val k = {2, "ab"}, v = {1, "x"};
    assert_int_equal(mdb_put(txn, c.dbi[ZP_SPLIT_TRAIN], &k, &v, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    memset(bits, 0xff, sizeof bits);
    assert_int_equal(zp_cachedb_present(&c, ZP_SPLIT_TRAIN, 10, bits), 4);
    assert_int_equal(c.error, 0);
    assert_int_equal(bits[0], 0x49); /* 0, 3, 6 */
    assert_int_equal(bits[1], 0x02); /* 9 */
    assert_int_equal(zp_cachedb_present(&c, ZP_SPLIT_TEST, 3, bits), 1);
    assert_int_equal(bits[0], 0x02);
    zp_cachedb_close(&c);
}

static void a_cache_of_another_dataset_is_refused_or_rebuilt(void **state)
{
    (void)state;
    zp_config_t cfg;
    zp_dataset_meta_t m;
    config(&cfg, &m, "seed=1");
    zp_cachedb_t c;
    assert_int_equal(zp_cachedb_open(&c, &cfg, &m, 0, err, sizeof err), 0);
    assert_int_equal(zp_cachedb_check(&c, &cfg, &m, NULL, err, sizeof err), 0); /* recorded */
    assert_int_equal(zp_cachedb_check(&c, &cfg, &m, NULL, err, sizeof err), 0); /* the same */
    put(&c, ZP_SPLIT_TRAIN, 0, "x", 1);
    zp_cachedb_close(&c);

    config(&cfg, &m, "seed=2");
    assert_int_equal(zp_cachedb_open(&c, &cfg, &m, 0, err, sizeof err), 0);
    err[0] = 0;
    assert_int_equal(zp_cachedb_check(&c, &cfg, &m, NULL, err, sizeof err), ZP_ECONFIG);
    assert_non_null(strstr(err, "cache synthetic/train was built from another dataset or transform"));
    assert_non_null(strstr(err, "was \"source: synthetic seed=1 classes=5\", now \"source: "
                                "synthetic seed=2 classes=5\""));
    assert_non_null(strstr(err, "cache.on_mismatch=rebuild"));
    uint8_t bits[1];
    assert_int_equal(zp_cachedb_present(&c, ZP_SPLIT_TRAIN, 4, bits), 1); /* refused: kept */
    zp_cachedb_close(&c);

    config(&cfg, &m, "seed=2");
    cfg.on_mismatch = ZP_MISMATCH_REBUILD;
    assert_int_equal(zp_cachedb_open(&c, &cfg, &m, 0, err, sizeof err), 0);
    assert_int_equal(zp_cachedb_check(&c, &cfg, &m, NULL, err, sizeof err), 0);
    assert_int_equal(zp_cachedb_present(&c, ZP_SPLIT_TRAIN, 4, bits), 0); /* emptied */
    cfg.on_mismatch = ZP_MISMATCH_ERROR; /* the new fingerprint was recorded */
    assert_int_equal(zp_cachedb_check(&c, &cfg, &m, NULL, err, sizeof err), 0);
    zp_cachedb_close(&c);
}

static void writers_of_one_fingerprint_share_the_lock_and_a_rebuild_needs_it_alone(void **state)
{
    (void)state;
    zp_config_t cfg;
    zp_dataset_meta_t m;
    config(&cfg, &m, "seed=1");
    /* two cache stages of the run that recorded the fingerprint (flock: each open is a holder) */
    int a = zp_cachedb_lock(cfg.cache_path, 0, "zeus-pipe pid 11, run runs/a", err, sizeof err);
    int b = zp_cachedb_lock(cfg.cache_path, 0, "zeus-pipe pid 12, run runs/b", err, sizeof err);
    assert_true(a >= 0 && b >= 0);
    err[0] = 0;
    assert_int_equal(zp_cachedb_lock(cfg.cache_path, 1, "zeus-pipe pid 13, c.yaml", err, sizeof err),
                     -EBUSY); /* after trying for 2 s */
    assert_non_null(strstr(err, "is in use by another run (zeus-pipe pid 12, run runs/b)"));
    /* the busy check: a split to record is refused naming the holder, one as it is is used */
    zp_cachedb_t c;
    assert_int_equal(zp_cachedb_open(&c, &cfg, &m, 0, err, sizeof err), 0);
    assert_int_equal(zp_cachedb_check(&c, &cfg, &m, "runs/b writes", err, sizeof err), ZP_ECONFIG);
    assert_non_null(strstr(err, "cache synthetic/train has no fingerprint yet, and runs/b writes: "));
    assert_non_null(strstr(err, "give this one another cache.path"));
    assert_int_equal(zp_cachedb_check(&c, &cfg, &m, NULL, err, sizeof err), 0); /* recorded */
    assert_int_equal(zp_cachedb_check(&c, &cfg, &m, "runs/b writes", err, sizeof err), 0);
    assert_true(zp_cachedb_holds(&c, &cfg, &m));
    zp_cachedb_close(&c);
    config(&cfg, &m, "seed=2"); /* another dataset, to rebuild for, while a and b write */
    cfg.on_mismatch = ZP_MISMATCH_REBUILD;
    assert_int_equal(zp_cachedb_open(&c, &cfg, &m, 0, err, sizeof err), 0);
    assert_false(zp_cachedb_holds(&c, &cfg, &m));
    assert_int_equal(zp_cachedb_check(&c, &cfg, &m, "runs/b writes", err, sizeof err), ZP_ECONFIG);
    assert_non_null(strstr(err, "was built from another dataset or transform (was \"source: "
                                "synthetic seed=1"));
    zp_cachedb_close(&c);
    close(a), close(b); /* both ended: the rebuild may go */
    int x = zp_cachedb_lock(cfg.cache_path, 1, "zeus-pipe pid 13, c.yaml", err, sizeof err);
    assert_true(x >= 0);
    assert_int_equal(zp_cachedb_lock(cfg.cache_path, 0, "zeus-pipe pid 14", err, sizeof err), -EBUSY);
    assert_non_null(strstr(err, "(zeus-pipe pid 13, c.yaml)"));
    close(x);
}

int main(void)
{
    zp_log_set_level(ZP_LOG_ERROR);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(the_fingerprint_says_what_the_cache_was_built_from),
        T(an_idx_fingerprint_names_each_file_with_size_and_time),
        T(the_fingerprint_number_changes_with_what_loaders_send),
        T(a_value_header_is_laid_out_as_documented),
        T(any_flipped_header_or_payload_byte_is_a_corrupt_value),
        T(each_fault_has_its_reason),
        T(the_header_check_leaves_the_sum_to_the_caller),
        T(a_writer_creates_and_a_reader_reopens_the_environment),
        T(a_cache_path_that_cannot_be_made_is_an_error_naming_it),
        T(present_lists_the_stored_keys_of_a_split),
        T(a_cache_of_another_dataset_is_refused_or_rebuilt),
        T(writers_of_one_fingerprint_share_the_lock_and_a_rebuild_needs_it_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

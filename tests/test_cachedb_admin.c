/* Unit tests of the cache seen from outside a run (pipeline/cachedb/cachedb_admin.h,
 * `zeus-pipe cache`), on an environment built in a temporary folder: stat
 * lists every database with its entries and fingerprint; verify finds each
 * bad value and names it; drop removes a database and its fingerprint and
 * refuses "meta" and a name that is not there; a folder without an
 * environment is -ENOENT; a value is judged on its own bytes. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipeline/cachedb/cachedb.h"
#include "pipeline/cachedb/cachedb_admin.h"
#include "pipeline/config/config.h"
#include "pipeline/dataset/dataset.h"
#include "pipeline/source/source.h"

static char dir[64], cache[96], err[4400];
static zp_config_t cfg;
static zp_dataset_meta_t meta;
static zp_cachedb_admin_stat_t st;

/* A value for sample `index` (1x2x3 float32) of the train split, as the
 * cache stage writes it, carrying fingerprint fp (0: the train split's). */
static void make_value_fp(uint8_t v[ZP_CACHE_HDR + 24], uint32_t index, uint64_t fp)
{
    float px[6] = {0.5f, -1, 2, 3.25f, 0, 1e-3f};
    zp_cachedb_header(v, &meta, fp ? fp : zp_cachedb_value_fp(&cfg, &meta, ZP_SPLIT_TRAIN), index,
                      1, px, sizeof px);
    memcpy(v + ZP_CACHE_HDR, px, sizeof px);
}

static void make_value(uint8_t v[ZP_CACHE_HDR + 24], uint32_t index) { make_value_fp(v, index, 0); }

static void put(zp_cachedb_t *c, int split, uint32_t index, const uint8_t *val, size_t n)
{
    MDB_txn *txn;
    assert_int_equal(zp_cachedb_write_begin(c, &txn), 0);
    uint8_t kb[4];
    zp_cachedb_key(index, kb);
    MDB_val k = {4, kb}, v = {n, (void *)val};
    assert_int_equal(mdb_put(txn, c->dbi[split], &k, &v, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
}

/* A synthetic dataset's cache: train holds samples 0, 1 and a corrupt 2;
 * test holds 0 and a foreign 1 (a sound value of another fingerprint). */
static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/zp-test-cacheadm-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(cache, sizeof cache, "%s/cache", dir);
    char path[128];
    snprintf(path, sizeof path, "cache.path=%s", cache);
    char *ov[] = {"dataset.source=synthetic", "dataset.synthetic.train_samples=4",
                  "dataset.synthetic.test_samples=3", "dataset.synthetic.shape=[1, 2, 3]", path};
    if (zp_config_load(&cfg, NULL, ov, 5, err, sizeof err) || zp_source_probe_meta(&cfg, &meta, err, sizeof err))
        return -1;
    zp_cachedb_t c;
    if (zp_cachedb_open(&c, &cfg, &meta, 0, err, sizeof err) ||
        zp_cachedb_check(&c, &cfg, &meta, NULL, err, sizeof err))
        return -1;
    uint8_t v[ZP_CACHE_HDR + 24];
    for (uint32_t i = 0; i < 3; i++) {
        make_value(v, i);
        if (i == 2)
            v[ZP_CACHE_HDR + 5] ^= 1; /* a flipped payload bit */
        put(&c, ZP_SPLIT_TRAIN, i, v, sizeof v);
    }
    make_value_fp(v, 0, zp_cachedb_value_fp(&cfg, &meta, ZP_SPLIT_TEST));
    put(&c, ZP_SPLIT_TEST, 0, v, sizeof v);
    make_value_fp(v, 1, 0x5eed); /* written while another dataset's run had the cache */
    put(&c, ZP_SPLIT_TEST, 1, v, sizeof v);
    zp_cachedb_close(&c);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

static const zp_cachedb_db_t *find(const char *name)
{
    for (int i = 0; i < st.n; i++)
        if (!strcmp(st.db[i].name, name))
            return &st.db[i];
    return NULL;
}

static void split_name(int split, char *buf, size_t len)
{
    zp_cachedb_t c;
    assert_int_equal(zp_cachedb_open(&c, &cfg, &meta, 1, err, sizeof err), 0);
    snprintf(buf, len, "%s", c.name[split]);
    zp_cachedb_close(&c);
}

static void stat_lists_each_database_with_entries_and_fingerprint(void **state)
{
    (void)state;
    char train[96], test[96], fp[2048];
    split_name(ZP_SPLIT_TRAIN, train, sizeof train);
    split_name(ZP_SPLIT_TEST, test, sizeof test);
    assert_int_equal(zp_cachedb_admin_stat(cache, &st, err, sizeof err), 0);
    assert_int_equal(st.n, 3); /* both splits and meta */
    assert_non_null(find("meta"));
    const zp_cachedb_db_t *d = find(train);
    assert_non_null(d);
    assert_int_equal(d->entries, 3);
    assert_true(d->bytes > 0);
    zp_cachedb_fingerprint(&cfg, &meta, ZP_SPLIT_TRAIN, fp, sizeof fp);
    assert_string_equal(d->fingerprint, fp);
    assert_non_null(find(test));
    assert_int_equal(find(test)->entries, 2);
    assert_string_equal(find("meta")->fingerprint, "");
    assert_true(st.used_bytes > 0 && st.used_bytes <= st.map_bytes);
}

typedef struct {
    int n;
    char db[96];
    uint32_t key;
    char why[128];
} bad_t;

static void record_bad(const char *db, uint32_t key, const char *why, void *arg)
{
    bad_t *b = arg;
    b->n++;
    snprintf(b->db, sizeof b->db, "%s", db);
    b->key = key;
    snprintf(b->why, sizeof b->why, "%s", why);
}

static void verify_counts_every_value_and_names_the_bad_one(void **state)
{
    (void)state;
    char train[96];
    split_name(ZP_SPLIT_TRAIN, train, sizeof train);
    bad_t b = {0};
    int64_t values = -1, bad = -1, foreign = -1;
    assert_int_equal(zp_cachedb_admin_verify(cache, record_bad, &b, &values, &bad, &foreign, err,
                                             sizeof err), 0);
    assert_int_equal(values, 5); /* meta's fingerprints are not values */
    assert_int_equal(bad, 2);
    assert_int_equal(foreign, 1); /* test's 1, sound but of another fingerprint */
    assert_int_equal(b.n, 2);
    assert_string_equal(b.db, train); /* the databases in name order: test, then train */
    assert_int_equal(b.key, 2);
    assert_non_null(strstr(b.why, "checksum mismatch"));
}

static void drop_removes_a_database_and_its_fingerprint(void **state)
{
    (void)state;
    char test[96];
    size_t entries = 0;
    split_name(ZP_SPLIT_TEST, test, sizeof test);
    assert_int_equal(zp_cachedb_admin_drop(cache, test, &entries, err, sizeof err), 0);
    assert_int_equal(entries, 2);
    assert_int_equal(zp_cachedb_admin_stat(cache, &st, err, sizeof err), 0);
    assert_null(find(test));
    assert_int_equal(st.n, 2);
    /* its fingerprint went with it: a run rebuilds the split from scratch */
    zp_cachedb_t c;
    assert_int_equal(zp_cachedb_open(&c, &cfg, &meta, 0, err, sizeof err), 0);
    MDB_txn *txn;
    char key[128];
    snprintf(key, sizeof key, "fingerprint/%s", test);
    MDB_val k = {strlen(key), key}, v;
    assert_int_equal(zp_cachedb_read_begin(&c, &txn), 0);
    assert_int_equal(mdb_get(txn, c.meta, &k, &v), MDB_NOTFOUND);
    mdb_txn_abort(txn);
    zp_cachedb_close(&c);
}

static void drop_refuses_meta_and_an_unknown_database(void **state)
{
    (void)state;
    size_t entries = 7;
    assert_int_equal(zp_cachedb_admin_drop(cache, "meta", &entries, err, sizeof err), MDB_INCOMPATIBLE);
    assert_non_null(strstr(err, "cannot drop meta"));
    assert_int_equal(zp_cachedb_admin_drop(cache, "no/such", &entries, err, sizeof err), MDB_NOTFOUND);
    assert_non_null(strstr(err, ": cannot drop no/such: no such database"));
    assert_int_equal(zp_cachedb_admin_stat(cache, &st, err, sizeof err), 0);
    assert_int_equal(st.n, 3); /* nothing removed */
}

static void a_folder_without_an_environment_is_enoent(void **state)
{
    (void)state;
    int64_t values, bad, foreign;
    size_t entries;
    assert_int_equal(zp_cachedb_admin_stat(dir, &st, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, ": no LMDB environment there"));
    assert_non_null(strstr(err, dir));
    assert_int_equal(zp_cachedb_admin_verify(dir, NULL, NULL, &values, &bad, &foreign, err, sizeof err),
                     -ENOENT);
    assert_int_equal(zp_cachedb_admin_drop(dir, "x", &entries, err, sizeof err), -ENOENT);
}

static const char *judge(const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen)
{
    MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};
    return zp_cachedb_admin_check(&k, &v, zp_cachedb_value_fp(&cfg, &meta, ZP_SPLIT_TRAIN));
}

static void a_value_is_judged_on_its_own_bytes(void **state)
{
    (void)state;
    uint8_t v[ZP_CACHE_HDR + 24], k[4];
    make_value(v, 5);
    zp_cachedb_key(5, k);
    assert_null(judge(k, 4, v, sizeof v));
    assert_string_equal(judge(k, 3, v, sizeof v), "key is not a 4-byte sample index");
    assert_string_equal(judge(k, 4, v, sizeof v - 1), "payload size disagrees with the shape");
    assert_string_equal(judge(k, 4, v, 10), "bad magic");
    zp_cachedb_key(6, k);
    assert_string_equal(judge(k, 4, v, sizeof v), "value belongs to another key");
    zp_cachedb_key(5, k);
    v[4] = 1; /* version 1 */
    assert_non_null(strstr(judge(k, 4, v, sizeof v), "another zeus-pipe version"));
    make_value(v, 5);
    v[20] ^= 1; /* the label: covered by the checksum */
    assert_string_equal(judge(k, 4, v, sizeof v), "checksum mismatch (header or payload)");
    make_value(v, 5);
    v[5] = 9;
    assert_string_equal(judge(k, 4, v, sizeof v), "unknown dtype");
    make_value_fp(v, 5, 0x5eed);
    assert_string_equal(judge(k, 4, v, sizeof v), ZP_CACHE_FOREIGN);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(stat_lists_each_database_with_entries_and_fingerprint),
        T(verify_counts_every_value_and_names_the_bad_one),
        T(drop_removes_a_database_and_its_fingerprint),
        T(drop_refuses_meta_and_an_unknown_database),
        T(a_folder_without_an_environment_is_enoent),
        T(a_value_is_judged_on_its_own_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

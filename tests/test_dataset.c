/* Unit tests of the dataset's description (pipeline/dataset/dataset.c): what the
 * supervisor probed, written into a run directory and read back by a stage,
 * is the same dataset — meta, labels, files — with the same cache
 * fingerprint; a missing or damaged description is told apart. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipeline/cachedb/cachedb.h"
#include "pipeline/config/config.h"
#include "pipeline/dataset/dataset.h"
#include "pipeline/base/log.h"

static int make_dir(void **state)
{
    static char dir[64];
    snprintf(dir, sizeof dir, "/tmp/zp-dataset-XXXXXX");
    *state = mkdtemp(dir);
    return *state ? 0 : -1;
}

static int remove_dir(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", (const char *)*state);
    return system(cmd) == 0 ? 0 : -1;
}

/* An image dataset as the probe would leave it: 3 train files, 2 test files. */
static zp_dataset_t *made_up(void)
{
    static const char *files[2][3] = {{"/d/a/x 1.jpg", "/d/b/y.png", "rel/z.jpg"}, {"/t/0.jpg", "/t/1.png"}};
    static const int32_t labels[2][3] = {{0, 1, 1}, {1, 0}};
    zp_dataset_t *ds = calloc(1, sizeof *ds);
    assert_non_null(ds);
    zp_dataset_meta_t *m = &ds->meta;
    m->n[0] = 3, m->n[1] = 2;
    m->shape[0] = 3, m->shape[1] = m->shape[2] = 32;
    m->elems = 3 * 32 * 32;
    m->dtype = ZP_DTYPE_U8;
    m->sample_bytes = (size_t)m->elems;
    m->classes = 2;
    m->files_bytes[0] = 12345, m->files_bytes[1] = 678;
    m->files_mtime[0] = 1700000000, m->files_mtime[1] = 1700000001;
    for (int s = 0; s < 2; s++) {
        ds->split[s].n = m->n[s];
        ds->split[s].label = malloc(sizeof(int32_t) * 3);
        ds->split[s].path = calloc(3, sizeof(char *));
        for (int i = 0; i < m->n[s]; i++) {
            ds->split[s].label[i] = labels[s][i];
            ds->split[s].path[i] = strdup(files[s][i]);
        }
    }
    m->probed = ds;
    return ds;
}

static void a_description_reads_back_as_the_same_dataset_and_fingerprint(void **state)
{
    zp_dataset_t *ds = made_up(), *back = NULL;
    char err[PATH_MAX + 200];
    assert_int_equal(zp_dataset_write(ds, *state, err, sizeof err), 0);
    assert_int_equal(zp_dataset_read(&back, *state, err, sizeof err), 0);
    const zp_dataset_meta_t *a = &ds->meta, *b = &back->meta;
    assert_ptr_equal(b->probed, back);
    for (int s = 0; s < ZP_SPLITS; s++) {
        assert_int_equal(a->n[s], b->n[s]);
        assert_int_equal(a->files_bytes[s], b->files_bytes[s]);
        assert_int_equal(a->files_mtime[s], b->files_mtime[s]);
        assert_int_equal(back->split[s].n, a->n[s]);
        for (int64_t i = 0; i < a->n[s]; i++) {
            assert_int_equal(back->split[s].label[i], ds->split[s].label[i]);
            assert_string_equal(back->split[s].path[i], ds->split[s].path[i]);
        }
    }
    assert_memory_equal(a->shape, b->shape, sizeof a->shape);
    assert_int_equal(a->elems, b->elems);
    assert_int_equal(a->sample_bytes, b->sample_bytes);
    assert_int_equal(a->dtype, b->dtype);
    assert_int_equal(a->classes, b->classes);
    /* the cache's fingerprint (what a run and its cache must agree on) is unchanged */
    static zp_config_t cfg;
    assert_int_equal(zp_config_load(&cfg, "configs/good/minimal.yaml", NULL, 0, err, sizeof err), 0);
    cfg.dataset_source = ZP_SOURCE_IMAGE_FOLDER;
    char fa[4096], fb[4096];
    for (int s = 0; s < ZP_SPLITS; s++) {
        zp_cachedb_fingerprint(&cfg, a, s, fa, sizeof fa);
        zp_cachedb_fingerprint(&cfg, b, s, fb, sizeof fb);
        assert_string_equal(fa, fb);
    }
    zp_dataset_destroy(&back);
    zp_dataset_destroy(&ds);
    assert_null(ds);
    zp_dataset_destroy(&ds); /* twice: nothing */
}

static void a_missing_description_is_enoent_and_a_damaged_one_is_edata(void **state)
{
    zp_dataset_t *ds = made_up(), *back = (zp_dataset_t *)1;
    char err[PATH_MAX + 200], path[PATH_MAX];
    assert_int_equal(zp_dataset_read(&back, *state, err, sizeof err), -ENOENT);
    assert_null(back);
    assert_int_equal(zp_dataset_write(ds, *state, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/dataset/test.labels", (const char *)*state);
    assert_int_equal(truncate(path, 5), 0); /* not 2 int32 labels */
    assert_int_equal(zp_dataset_read(&back, *state, err, sizeof err), ZP_EDATA);
    assert_non_null(strstr(err, "test.labels"));
    assert_null(back);
    assert_int_equal(zp_dataset_write(ds, *state, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/dataset/train.paths", (const char *)*state);
    assert_int_equal(truncate(path, 4), 0); /* fewer paths than samples */
    assert_int_equal(zp_dataset_read(&back, *state, err, sizeof err), ZP_EDATA);
    assert_non_null(strstr(err, "train.paths"));
    snprintf(path, sizeof path, "%s/dataset/meta", (const char *)*state);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("zeus-pipe dataset 1\nn 3\n", f);
    fclose(f);
    assert_int_equal(zp_dataset_read(&back, *state, err, sizeof err), ZP_EDATA);
    assert_non_null(strstr(err, "meta"));
    zp_dataset_destroy(&ds);
}

static void put(const char *dir, const char *name, const void *bytes, size_t n)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/dataset/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    fclose(f);
}

/* A description whose numbers overflow is refused: n of 2^62 + 3 made 4 * n
 * wrap to 12 and handed out labels past a 12-byte file; a shape of 2^32 x
 * 2^32 made a product of 0 that passed the element limit. */
static void a_description_whose_numbers_overflow_is_refused(void **state)
{
    zp_dataset_t *ds = made_up(), *back = (zp_dataset_t *)1;
    char err[PATH_MAX + 200], meta[512];
    assert_int_equal(zp_dataset_write(ds, *state, err, sizeof err), 0);
    zp_dataset_destroy(&ds);
    const int32_t labels[3] = {0, 1, 1};
    put(*state, "train.labels", labels, sizeof labels);
    put(*state, "test.labels", "", 0);
    const char *cases[][2] = {{"4611686018427387907 0", "1 1 1"}, /* 4 * n wraps to 12 */
                              {"3 0", "4294967296 4294967296 1"}, /* the product wraps to 0 */
                              {"3 0", "65536 65536 65536"},       /* 2^48: past 2^63 once more */
                              {"3 0", "1 1 16777217"},            /* one past the element limit */
                              {"4294967299 0", "1 1 1"}};         /* past uint32 indices */
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int n = snprintf(meta, sizeof meta, "zeus-pipe dataset 1\nn %s\nshape %s\nclasses 2\n"
                         "dtype %d\nfiles_bytes 0 0\nfiles_mtime 0 0\npaths 0 0\n", cases[i][0],
                         cases[i][1], ZP_DTYPE_U8);
        put(*state, "meta", meta, (size_t)n);
        int rc = zp_dataset_read(&back, *state, err, sizeof err);
        if (rc != ZP_EDATA)
            fail_msg("case %zu (n %s, shape %s): rc %d, not refused", i, cases[i][0], cases[i][1], rc);
        assert_null(back);
    }
    /* the same with numbers in range reads back: the cases fail for their numbers alone */
    int n = snprintf(meta, sizeof meta, "zeus-pipe dataset 1\nn 3 0\nshape 1 4096 4096\nclasses 2\n"
                     "dtype %d\nfiles_bytes 0 0\nfiles_mtime 0 0\npaths 0 0\n", ZP_DTYPE_U8);
    put(*state, "meta", meta, (size_t)n);
    assert_int_equal(zp_dataset_read(&back, *state, err, sizeof err), 0);
    assert_int_equal(back->split[0].n, 3);
    zp_dataset_destroy(&back);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_description_reads_back_as_the_same_dataset_and_fingerprint,
                                        make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(a_missing_description_is_enoent_and_a_damaged_one_is_edata,
                                        make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(a_description_whose_numbers_overflow_is_refused, make_dir,
                                        remove_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests of the loaders' sources (pipeline/source/source.h), without a
 * loader process: the IDX source reads the real Fashion-MNIST files and
 * refuses a truncated or corrupt copy, naming it; the synthetic source is a
 * function of (seed, split, index); the image source decodes a JPEG folder the
 * test writes with TurboJPEG, and refuses a corrupt JPEG by its path and goes
 * on with the next file. The registry holds one row per dataset.source
 * choice, and a source's rule points at the key where the config wrote it. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "pipeline/config/config.h"
#include "pipeline/dataset/dataset.h"
#include "pipeline/base/log.h"
#include "pipeline/source/source.h"

#define FMNIST "/usr/share/datasets/fashion-mnist"

static char dir[64], err[2048];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/zp-test-sources-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

static void load(zp_config_t *cfg, char **ov, int n)
{
    if (zp_config_load(cfg, NULL, ov, n, err, sizeof err))
        fail_msg("config: %s", err);
}

/* ---- the registry --------------------------------------------------------------------- */

static void every_dataset_source_choice_has_its_row(void **state)
{
    (void)state;
    char choices[256];
    snprintf(choices, sizeof choices, "%s", ZP_SOURCE_CHOICES);
    int i = 0;
    for (char *save, *name = strtok_r(choices, "|", &save); name; name = strtok_r(NULL, "|", &save), i++) {
        const zp_source_ops_t *ops = zp_source_ops(i);
        assert_non_null(ops);
        assert_string_equal(ops->name, name);
        assert_non_null(ops->dataset_name);
        assert_non_null(ops->probe);
        assert_non_null(ops->fingerprint);
        assert_int_equal(ops->open == NULL, ops->python); /* the C loader reads every other */
    }
    assert_int_equal(i, ZP_SOURCE_COUNT);
    assert_null(zp_source_ops(ZP_SOURCE_COUNT));
    assert_null(zp_source_ops(-1));
}

/* A source's rule runs after the keys are loaded, and still names the file,
 * line and column of the key it blames; another source's keys are not its. */
static void a_source_rule_points_at_the_key_in_the_file(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/four.yaml", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("dataset:\n  source: synthetic\n  synthetic:\n    shape: [1, 2, 3, 4]\n", f);
    fclose(f);
    zp_config_t cfg;
    assert_int_equal(zp_config_load(&cfg, path, NULL, 0, err, sizeof err), 0);
    assert_int_equal(zp_source_config(&cfg, err, sizeof err), ZP_ECONFIG);
    char want[256];
    snprintf(want, sizeof want, "%s:4:12: dataset.synthetic.shape: needs 1 to 3 dimensions (got 4)\n"
             "        shape: [1, 2, 3, 4]\n               ^", path);
    assert_string_equal(err, want);
    char *idx[] = {"dataset.source=idx"};
    assert_int_equal(zp_config_load(&cfg, path, idx, 1, err, sizeof err), 0);
    assert_int_equal(zp_source_config(&cfg, err, sizeof err), 0);
    char *big[] = {"dataset.synthetic.shape=[3, 4096, 4096]"};
    assert_int_equal(zp_config_load(&cfg, path, big, 1, err, sizeof err), 0);
    assert_int_equal(zp_source_config(&cfg, err, sizeof err), ZP_ECONFIG);
    assert_string_equal(err, "override 'dataset.synthetic.shape=[3, 4096, 4096]': "
                        "dataset.synthetic.shape: 50331648 values a sample, more than a message "
                        "carries (ZP_MAX_ELEMS = 16777216)");
}

/* ---- idx ------------------------------------------------------------------------------ */

static void idx_sample(zp_source_t *src, int split, uint32_t index, int32_t *label, uint64_t *sum,
                       uint64_t *weighted)
{
    uint8_t px[784];
    assert_int_equal(src->get(src, split, index, px, label, err, sizeof err), 0);
    *sum = *weighted = 0;
    for (int i = 0; i < 784; i++)
        *sum += px[i], *weighted += (uint64_t)(i + 1) * px[i];
}

static void idx_reads_the_real_fashion_mnist(void **state)
{
    (void)state;
    zp_config_t cfg;
    zp_dataset_meta_t m;
    load(&cfg, (char *[]){"dataset.source=idx", "dataset.path=" FMNIST}, 2);
    assert_int_equal(zp_source_probe_meta(&cfg, &m, err, sizeof err), 0);
    assert_int_equal(m.n[ZP_SPLIT_TRAIN], 60000);
    assert_int_equal(m.n[ZP_SPLIT_TEST], 10000);
    assert_int_equal(m.elems, 784);
    assert_int_equal(m.classes, 10);
    zp_source_t *src = NULL;
    assert_int_equal(zp_source_ops(ZP_SOURCE_IDX)->open(&src, &cfg, &m, err, sizeof err), 0);
    int32_t label;
    uint64_t sum, weighted;
    /* figures from Python's gzip module on the same files */
    idx_sample(src, ZP_SPLIT_TRAIN, 0, &label, &sum, &weighted);
    assert_int_equal(label, 9); /* an ankle boot */
    assert_int_equal(sum, 76247);
    assert_int_equal(weighted, 35954273); /* the order of the pixels too */
    idx_sample(src, ZP_SPLIT_TEST, 9999, &label, &sum, &weighted);
    assert_int_equal(label, 5);
    assert_int_equal(sum, 24390);
    assert_int_equal(weighted, 10911940);
    src->destroy(src);
}

/* Writes `path` as a copy of `from` cut to `keep` bytes, with `flip` bytes
 * from the middle XOR-ed. */
static void damaged_copy(const char *from, const char *path, long keep, int flip)
{
    FILE *in = fopen(from, "rb"), *out = fopen(path, "wb");
    assert_non_null(in);
    assert_non_null(out);
    static uint8_t buf[1 << 16];
    long done = 0, middle = keep / 2;
    size_t n;
    while (done < keep && (n = fread(buf, 1, sizeof buf, in)) > 0) {
        if ((long)n > keep - done)
            n = (size_t)(keep - done);
        for (long i = 0; i < (long)n; i++)
            if (done + i >= middle && done + i < middle + flip)
                buf[i] ^= 0x55;
        assert_int_equal(fwrite(buf, 1, n, out), n);
        done += (long)n;
    }
    fclose(in);
    fclose(out);
}

/* The source opened on the real files, with the test split's images replaced by `images`. */
static int idx_open_with(const char *images, const char *labels, zp_source_t **src)
{
    zp_config_t cfg;
    zp_dataset_meta_t m;
    load(&cfg, (char *[]){"dataset.source=idx", "dataset.path=" FMNIST}, 2);
    assert_int_equal(zp_source_probe_meta(&cfg, &m, err, sizeof err), 0); /* what the run started with */
    if (images)
        snprintf(cfg.test_images, sizeof cfg.test_images, "%s", images);
    if (labels)
        snprintf(cfg.test_labels, sizeof cfg.test_labels, "%s", labels);
    err[0] = 0;
    return zp_source_ops(ZP_SOURCE_IDX)->open(src, &cfg, &m, err, sizeof err);
}

static void a_truncated_idx_gzip_is_refused_naming_file_and_byte(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte.gz", dir);
    damaged_copy(FMNIST "/t10k-images-idx3-ubyte.gz", path, 2000000, 0);
    zp_source_t *src = (zp_source_t *)1;
    assert_int_equal(idx_open_with(path, NULL, &src), ZP_EDATA);
    assert_null(src);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, ": truncated data at byte "));
    assert_non_null(strstr(err, " of 7840016")); /* 16 header bytes + 10000 x 784 */
}

static void a_corrupt_idx_gzip_is_refused_naming_file(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte.gz", dir);
    damaged_copy(FMNIST "/t10k-images-idx3-ubyte.gz", path, 4422079, 4096);
    zp_source_t *src = (zp_source_t *)1;
    assert_int_equal(idx_open_with(path, NULL, &src), ZP_EDATA);
    assert_null(src);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, ": corrupt gzip stream near byte "));
}

static void idx_files_that_disagree_with_the_probe_are_refused(void **state)
{
    (void)state;
    zp_source_t *src = (zp_source_t *)1;
    /* the train split's images in place of the test split's: the count changed */
    assert_int_equal(idx_open_with(FMNIST "/train-images-idx3-ubyte.gz", NULL, &src), ZP_EDATA);
    assert_null(src);
    assert_non_null(strstr(err, "train-images-idx3-ubyte.gz: changed while the run started"));
    /* a plain (not gzipped) label file with a label beyond the 10 classes */
    char path[128];
    snprintf(path, sizeof path, "%s/labels", dir);
    FILE *f = fopen(path, "wb");
    const uint8_t hdr[8] = {0, 0, 8, 1, 0, 0, 0x27, 0x10}; /* 10000 labels */
    fwrite(hdr, 1, 8, f);
    for (int i = 0; i < 10000; i++)
        fputc(i == 1234 ? 10 : i % 10, f);
    fclose(f);
    assert_int_equal(idx_open_with(NULL, path, &src), ZP_EDATA);
    assert_non_null(strstr(err, "label 10 of sample 1234 is outside"));
    assert_non_null(strstr(err, path));
    assert_int_equal(idx_open_with(NULL, "/nonexistent/labels.gz", &src), ZP_EDATA);
    assert_non_null(strstr(err, "/nonexistent/labels.gz: cannot open"));
}

/* ---- synthetic ------------------------------------------------------------------------ */

static zp_source_t *synthetic(const char *seed, const char *corrupt, zp_dataset_meta_t *m)
{
    zp_config_t cfg;
    load(&cfg, (char *[]){"dataset.source=synthetic", "dataset.synthetic.shape=[1, 5, 7]",
                          "dataset.synthetic.classes=4", (char *)seed, (char *)corrupt}, 5);
    assert_int_equal(zp_source_probe_meta(&cfg, m, err, sizeof err), 0);
    zp_source_t *src = NULL;
    assert_int_equal(zp_source_ops(ZP_SOURCE_SYNTHETIC)->open(&src, &cfg, m, err, sizeof err), 0);
    return src;
}

static void synthetic_samples_are_a_function_of_seed_split_and_index(void **state)
{
    (void)state;
    zp_dataset_meta_t m;
    zp_source_t *a = synthetic("seed=3", "dataset.synthetic.corrupt_every=0", &m);
    zp_source_t *b = synthetic("seed=3", "dataset.synthetic.corrupt_every=0", &m);
    zp_source_t *c = synthetic("seed=4", "dataset.synthetic.corrupt_every=0", &m);
    uint8_t pa[35], pb[35], pc[35];
    int32_t la, lb, lc;
    int seen[4] = {0}, differ_seed = 0, differ_split = 0;
    for (uint32_t i = 0; i < 200; i++) {
        assert_int_equal(a->get(a, ZP_SPLIT_TRAIN, i, pa, &la, err, sizeof err), 0);
        assert_int_equal(b->get(b, ZP_SPLIT_TRAIN, i, pb, &lb, err, sizeof err), 0);
        assert_int_equal(la, lb);
        assert_memory_equal(pa, pb, sizeof pa);
        assert_true(la >= 0 && la < 4);
        seen[la]++;
        /* the class is in the pixels: its band of the sample is the bright one */
        for (int j = 0; j < 35; j++)
            assert_int_equal(pa[j] >= 128, j * 4 / 35 == la);
        assert_int_equal(c->get(c, ZP_SPLIT_TRAIN, i, pc, &lc, err, sizeof err), 0);
        differ_seed += memcmp(pa, pc, sizeof pa) != 0;
        assert_int_equal(a->get(a, ZP_SPLIT_TEST, i, pc, &lc, err, sizeof err), 0);
        differ_split += memcmp(pa, pc, sizeof pa) != 0;
    }
    for (int k = 0; k < 4; k++)
        assert_true(seen[k] > 20); /* every class, roughly evenly */
    assert_int_equal(differ_seed, 200);
    assert_int_equal(differ_split, 200);
    /* asking again, in another order, gives the same sample */
    assert_int_equal(a->get(a, ZP_SPLIT_TRAIN, 7, pa, &la, err, sizeof err), 0);
    assert_int_equal(b->get(b, ZP_SPLIT_TRAIN, 3, pb, &lb, err, sizeof err), 0);
    assert_int_equal(b->get(b, ZP_SPLIT_TRAIN, 7, pb, &lb, err, sizeof err), 0);
    assert_memory_equal(pa, pb, sizeof pa);
    a->destroy(a), b->destroy(b), c->destroy(c);
}

static void synthetic_corrupt_every_fails_exactly_those_samples(void **state)
{
    (void)state;
    zp_dataset_meta_t m;
    zp_source_t *s = synthetic("seed=1", "dataset.synthetic.corrupt_every=5", &m);
    uint8_t px[35];
    int32_t label;
    for (uint32_t i = 0; i < 20; i++) {
        err[0] = 0;
        int rc = s->get(s, ZP_SPLIT_TEST, i, px, &label, err, sizeof err);
        assert_int_equal(rc, (i + 1) % 5 == 0 ? ZP_EDATA : 0);
    }
    assert_string_equal(err, "synthetic test sample 19: corrupt (dataset.synthetic.corrupt_every)");
    s->destroy(s);
}

/* ---- image folder --------------------------------------------------------------------- */

static const uint8_t COLOUR[2][3] = {{200, 40, 40}, {30, 60, 220}};

/* A w x h JPEG of one colour at `path`. */
static void write_jpeg(const char *path, int w, int h, const uint8_t rgb[3])
{
    uint8_t *px = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h; i++)
        memcpy(px + 3 * i, rgb, 3);
    tjhandle tj = tjInitCompress();
    assert_non_null(tj);
    unsigned char *jpeg = NULL;
    unsigned long size = 0;
    assert_int_equal(tjCompress2(tj, px, w, 0, h, TJPF_RGB, &jpeg, &size, TJSAMP_444, 95, 0), 0);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(jpeg, 1, size, f), size);
    fclose(f);
    tjFree(jpeg);
    tjDestroy(tj);
    free(px);
}

/* DIR/train/{cat,dog}/{0,1}.jpg and DIR/val/{cat,dog}/0.jpg: cat red, dog blue;
 * sizes differ so that resizing and DCT scaling both run. */
static zp_source_t *image_folder(zp_dataset_meta_t *m)
{
    char path[160];
    const char *cls[2] = {"cat", "dog"};
    for (int s = 0; s < 2; s++)
        for (int c = 0; c < 2; c++) {
            snprintf(path, sizeof path, "%s/%s", dir, s ? "val" : "train");
            mkdir(path, 0755);
            snprintf(path, sizeof path, "%s/%s/%s", dir, s ? "val" : "train", cls[c]);
            assert_int_equal(mkdir(path, 0755), 0);
            for (int k = 0; k < 2 - s; k++) {
                snprintf(path, sizeof path, "%s/%s/%s/%d.jpg", dir, s ? "val" : "train", cls[c], k);
                write_jpeg(path, k ? 40 : 32, k ? 24 : 32, COLOUR[c]);
            }
        }
    zp_config_t cfg;
    char where[100];
    snprintf(where, sizeof where, "dataset.path=%s", dir);
    load(&cfg, (char *[]){"dataset.source=image_folder", where, "dataset.image.resize=12",
                          "dataset.image.crop=8"}, 4);
    assert_int_equal(zp_source_probe_meta(&cfg, m, err, sizeof err), 0);
    zp_source_t *src = NULL;
    assert_int_equal(zp_source_ops(cfg.dataset_source)->open(&src, &cfg, m, err, sizeof err), 0);
    return src;
}

static void image_folder_decodes_resizes_and_crops_to_chw(void **state)
{
    (void)state;
    zp_dataset_meta_t m;
    zp_source_t *src = image_folder(&m);
    assert_int_equal(m.n[ZP_SPLIT_TRAIN], 4);
    assert_int_equal(m.n[ZP_SPLIT_TEST], 2);
    assert_int_equal(m.classes, 2);
    assert_int_equal(m.elems, 3 * 8 * 8);
    uint8_t px[192];
    int32_t label;
    for (uint32_t i = 0; i < 4; i++) { /* cat/0, cat/1, dog/0, dog/1 */
        memset(px, 0, sizeof px);
        assert_int_equal(src->get(src, ZP_SPLIT_TRAIN, i, px, &label, err, sizeof err), 0);
        assert_int_equal(label, (int)i / 2);
        for (int c = 0; c < 3; c++) /* channel planes, each the class colour (JPEG: within a few levels) */
            for (int j = 0; j < 64; j++)
                if (abs(px[c * 64 + j] - COLOUR[label][c]) > 4)
                    fail_msg("train %u channel %d pixel %d: %d, want %d", i, c, j, px[c * 64 + j],
                             COLOUR[label][c]);
    }
    assert_int_equal(src->get(src, ZP_SPLIT_TEST, 1, px, &label, err, sizeof err), 0);
    assert_int_equal(label, 1);
    src->destroy(src);
}

static void a_corrupt_jpeg_is_refused_by_path_and_the_next_one_decodes(void **state)
{
    (void)state;
    zp_dataset_meta_t m;
    zp_source_t *src = image_folder(&m);
    uint8_t px[192];
    int32_t label;
    char path[160];
    snprintf(path, sizeof path, "%s/train/cat/1.jpg", dir); /* sample 1 */
    FILE *f = fopen(path, "wb");
    fputs("this is not a JPEG at all", f);
    fclose(f);
    assert_int_equal(src->get(src, ZP_SPLIT_TRAIN, 1, px, &label, err, sizeof err), ZP_EDATA);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "not a JPEG"));
    assert_int_equal(src->get(src, ZP_SPLIT_TRAIN, 2, px, &label, err, sizeof err), 0);
    assert_int_equal(label, 1);

    snprintf(path, sizeof path, "%s/train/dog/1.jpg", dir); /* cut inside its scan */
    write_jpeg(path, 40, 24, COLOUR[1]);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(truncate(path, st.st_size - 8), 0);
    assert_int_equal(src->get(src, ZP_SPLIT_TRAIN, 3, px, &label, err, sizeof err), ZP_EDATA);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "truncated JPEG"));
    assert_int_equal(truncate(path, 0), 0);
    assert_int_equal(src->get(src, ZP_SPLIT_TRAIN, 3, px, &label, err, sizeof err), ZP_EDATA);
    assert_non_null(strstr(err, "empty file"));
    assert_int_equal(unlink(path), 0);
    assert_int_equal(src->get(src, ZP_SPLIT_TRAIN, 3, px, &label, err, sizeof err), ZP_EDATA);
    assert_non_null(strstr(err, path));
    assert_int_equal(src->get(src, ZP_SPLIT_TRAIN, 0, px, &label, err, sizeof err), 0);
    assert_int_equal(abs(px[0] - COLOUR[0][0]) <= 4, 1);
    src->destroy(src);
}

int main(void)
{
    zp_log_set_level(ZP_LOG_ERROR);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(every_dataset_source_choice_has_its_row),
        T(a_source_rule_points_at_the_key_in_the_file),
        T(idx_reads_the_real_fashion_mnist),
        T(a_truncated_idx_gzip_is_refused_naming_file_and_byte),
        T(a_corrupt_idx_gzip_is_refused_naming_file),
        T(idx_files_that_disagree_with_the_probe_are_refused),
        T(synthetic_samples_are_a_function_of_seed_split_and_index),
        T(synthetic_corrupt_every_fails_exactly_those_samples),
        T(image_folder_decodes_resizes_and_crops_to_chw),
        T(a_corrupt_jpeg_is_refused_by_path_and_the_next_one_decodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

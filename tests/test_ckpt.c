/* Unit tests of checkpoint files: what is written is read back exactly, and a
 * file that is not whole — a flipped byte anywhere, a cut or an added tail,
 * another format — is refused with a sentence naming the file and the fault. */
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
#include <sys/stat.h>
#include <unistd.h>

#include "pipeline/stage/ckpt.h"
#include "pipeline/base/log.h"

static char dir[64], path[128], err[512];
static uint8_t payload[1000];
static const zp_ckpt_pos_t POS = {.step = 1234, .epoch = 3, .batch = 17, .seed = 99};

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/zp-test-ckpt-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(path, sizeof path, "%s/last.ckpt", dir);
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (uint8_t)(i * 7 + 3);
    return zp_ckpt_write(path, &POS, payload, sizeof payload);
}

static int teardown(void **state)
{
    (void)state;
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    unlink(tmp);
    unlink(path);
    return rmdir(dir);
}

static long file_size(void)
{
    struct stat st;
    return stat(path, &st) ? -1 : (long)st.st_size;
}

/* Flips one bit of the byte at `off`. */
static void flip(long off)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, off, SEEK_SET), 0);
    int c = fgetc(f);
    assert_int_not_equal(c, EOF);
    assert_int_equal(fseek(f, off, SEEK_SET), 0);
    fputc(c ^ 0x10, f);
    fclose(f);
}

static int read_back(zp_ckpt_pos_t *pos, void **data, size_t *bytes)
{
    err[0] = 0;
    return zp_ckpt_read(path, pos, data, bytes, err, sizeof err);
}

static void a_checkpoint_reads_back_its_position_and_payload(void **state)
{
    (void)state;
    assert_int_equal(file_size(), ZP_CKPT_HDR + (long)sizeof payload);
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_equal(access(tmp, F_OK), -1); /* renamed into place, no temporary left */
    zp_ckpt_pos_t pos = {0};
    void *data = NULL;
    size_t bytes = 0;
    assert_int_equal(read_back(&pos, &data, &bytes), 0);
    assert_int_equal(pos.step, 1234);
    assert_int_equal(pos.epoch, 3);
    assert_int_equal(pos.batch, 17);
    assert_int_equal(pos.seed, 99);
    assert_int_equal(bytes, sizeof payload);
    assert_non_null(data);
    assert_memory_equal(data, payload, sizeof payload);
    free(data);
}

static void the_header_alone_reads_without_the_payload(void **state)
{
    (void)state;
    zp_ckpt_pos_t pos = {0};
    size_t bytes = 0;
    assert_int_equal(read_back(&pos, NULL, &bytes), 0);
    assert_int_equal(pos.epoch, 3);
    assert_int_equal(bytes, sizeof payload);
    /* a flipped payload byte is not seen by a header-only read, and is by a whole one */
    flip(ZP_CKPT_HDR + 500);
    assert_int_equal(read_back(&pos, NULL, &bytes), 0);
    void *data = (void *)1;
    assert_int_equal(read_back(&pos, &data, &bytes), ZP_EDATA);
    assert_null(data);
    assert_non_null(strstr(err, "payload checksum mismatch"));
}

static void a_rewrite_replaces_the_old_checkpoint_whole(void **state)
{
    (void)state;
    zp_ckpt_pos_t later = POS;
    later.step = 2000, later.epoch = 4, later.batch = 0;
    uint8_t small[3] = {1, 2, 3};
    assert_int_equal(zp_ckpt_write(path, &later, small, sizeof small), 0);
    assert_int_equal(file_size(), ZP_CKPT_HDR + 3);
    zp_ckpt_pos_t pos;
    void *data;
    size_t bytes;
    assert_int_equal(read_back(&pos, &data, &bytes), 0);
    assert_int_equal(pos.step, 2000);
    assert_int_equal(pos.batch, 0);
    assert_int_equal(bytes, 3);
    assert_memory_equal(data, small, 3);
    free(data);
}

static void an_empty_payload_is_a_valid_checkpoint(void **state)
{
    (void)state;
    assert_int_equal(zp_ckpt_write(path, &POS, "", 0), 0);
    zp_ckpt_pos_t pos;
    void *data;
    size_t bytes = 7;
    assert_int_equal(read_back(&pos, &data, &bytes), 0);
    assert_int_equal(bytes, 0);
    free(data);
}

/* Every byte of the header is covered: magic, size, version, a checksum or the position. */
static void a_flipped_byte_anywhere_in_the_header_is_refused(void **state)
{
    (void)state;
    for (long off = 0; off < ZP_CKPT_HDR; off++) {
        assert_int_equal(zp_ckpt_write(path, &POS, payload, sizeof payload), 0);
        flip(off);
        zp_ckpt_pos_t pos;
        void *data = NULL;
        size_t bytes;
        int rc = read_back(&pos, &data, &bytes);
        if (rc != ZP_EDATA)
            fail_msg("a flip at header byte %ld: rc %d (%s)", off, rc, err);
        assert_null(data);
        assert_non_null(strstr(err, path));
    }
}

static void the_reasons_name_the_fault(void **state)
{
    (void)state;
    zp_ckpt_pos_t pos;
    size_t bytes;
    flip(0);
    assert_int_equal(read_back(&pos, NULL, &bytes), ZP_EDATA);
    assert_non_null(strstr(err, "not a zeus-pipe checkpoint"));
    assert_int_equal(zp_ckpt_write(path, &POS, payload, sizeof payload), 0);
    flip(12); /* version */
    assert_int_equal(read_back(&pos, NULL, &bytes), ZP_EDATA);
    assert_non_null(strstr(err, "this build reads 2"));
    assert_int_equal(zp_ckpt_write(path, &POS, payload, sizeof payload), 0);
    flip(40); /* epoch */
    assert_int_equal(read_back(&pos, NULL, &bytes), ZP_EDATA);
    assert_non_null(strstr(err, "header checksum mismatch"));
}

static void a_truncated_or_extended_file_is_refused(void **state)
{
    (void)state;
    zp_ckpt_pos_t pos;
    size_t bytes;
    void *data = NULL;
    assert_int_equal(truncate(path, ZP_CKPT_HDR + 999), 0);
    assert_int_equal(read_back(&pos, &data, &bytes), ZP_EDATA);
    assert_non_null(strstr(err, "truncated or extended: 1071 bytes, the header says 1072"));
    assert_int_equal(read_back(&pos, NULL, &bytes), ZP_EDATA); /* the header read sees it too */
    assert_int_equal(truncate(path, 40), 0);
    assert_int_equal(read_back(&pos, NULL, &bytes), ZP_EDATA);
    assert_non_null(strstr(err, "shorter than its 72-byte header"));
    assert_int_equal(truncate(path, 5), 0);
    assert_int_equal(read_back(&pos, NULL, &bytes), ZP_EDATA);
    assert_int_equal(truncate(path, 0), 0);
    assert_int_equal(read_back(&pos, NULL, &bytes), ZP_EDATA);
    assert_int_equal(zp_ckpt_write(path, &POS, payload, sizeof payload), 0);
    FILE *f = fopen(path, "ab");
    fputc(0, f);
    fclose(f);
    assert_int_equal(read_back(&pos, &data, &bytes), ZP_EDATA);
    assert_null(data);
}

static void a_missing_file_or_folder_is_an_error(void **state)
{
    (void)state;
    zp_ckpt_pos_t pos;
    size_t bytes;
    assert_int_equal(unlink(path), 0);
    assert_int_equal(read_back(&pos, NULL, &bytes), -ENOENT);
    assert_non_null(strstr(err, path));
    char nowhere[160];
    snprintf(nowhere, sizeof nowhere, "%s/no-such-folder/last.ckpt", dir);
    assert_int_equal(zp_ckpt_write(nowhere, &POS, payload, sizeof payload), -ENOENT);
}

static void the_path_is_under_the_runs_checkpoints(void **state)
{
    (void)state;
    char buf[64];
    zp_ckpt_path(buf, sizeof buf, "/runs/a", "best");
    assert_string_equal(buf, "/runs/a/checkpoints/best.ckpt");
}

/* A position past the run is refused by its field, whatever the checksum says
 * (anyone who writes the file can fix the checksum up): the batch of
 * 2^63 indexed the prefetch's batches with a negative number. */
static void a_position_outside_the_run_is_refused_naming_the_field(void **state)
{
    (void)state;
    zp_ckpt_pos_t ok[] = {{.step = 0, .epoch = 0, .batch = 0},
                          {.step = 3 * 50 + 17, .epoch = 3, .batch = 17},
                          {.step = 3 * 50 + 50, .epoch = 3, .batch = 50}, /* after the epoch's last */
                          {.step = 10 * 50, .epoch = 10, .batch = 0}};    /* the run is over */
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        assert_int_equal(zp_ckpt_check(&ok[i], path, 10, 50, err, sizeof err), 0);
    struct {
        zp_ckpt_pos_t pos;
        const char *says;
    } bad[] = {
        {{.epoch = 11}, "epoch 11: the run has epochs 0..9"},
        {{.epoch = 1ull << 63}, "epoch 9223372036854775808:"},
        {{.epoch = 3, .batch = 51}, "batch 51 of epoch 3: an epoch has train batches 0..49"},
        {{.epoch = 0, .batch = 1ull << 63}, "batch 9223372036854775808 of epoch 0"},
        {{.epoch = 10, .batch = 1}, "batch 1 of epoch 10"},
        {{.step = 3 * 50 + 18, .epoch = 3, .batch = 17}, "step 168 at epoch 3, batch 17: at most 167"},
        {{.step = UINT64_MAX, .epoch = 3, .batch = 17}, "step 18446744073709551615"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        assert_int_equal(zp_ckpt_check(&bad[i].pos, path, 10, 50, err, sizeof err), ZP_EDATA);
        if (!strstr(err, bad[i].says) || !strstr(err, path))
            fail_msg("case %zu: \"%s\" does not say \"%s\"", i, err, bad[i].says);
    }
}

/* What a run resumes from counts rank 0's batches, limit applied. */
static void an_epochs_batches_are_rank_0s_and_limited(void **state)
{
    (void)state;
    zp_config_t c = {.batch_size = 10, .drop_last = false};
    assert_int_equal(zp_ckpt_epoch_batches(&c, 95, 1), 10);
    assert_int_equal(zp_ckpt_epoch_batches(&c, 95, 2), 5); /* 48 samples on rank 0 */
    c.drop_last = true;
    assert_int_equal(zp_ckpt_epoch_batches(&c, 95, 1), 9);
    c.limit_train_batches = 4;
    assert_int_equal(zp_ckpt_epoch_batches(&c, 95, 1), 4);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(a_checkpoint_reads_back_its_position_and_payload),
        T(the_header_alone_reads_without_the_payload),
        T(a_rewrite_replaces_the_old_checkpoint_whole),
        T(an_empty_payload_is_a_valid_checkpoint),
        T(a_flipped_byte_anywhere_in_the_header_is_refused),
        T(the_reasons_name_the_fault),
        T(a_truncated_or_extended_file_is_refused),
        T(a_missing_file_or_folder_is_an_error),
        T(the_path_is_under_the_runs_checkpoints),
        T(a_position_outside_the_run_is_refused_naming_the_field),
        T(an_epochs_batches_are_rank_0s_and_limited),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

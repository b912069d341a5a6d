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
#include <xxhash.h>
#include "pipeline/base/log.h"

static char dir[64], path[128], err[512];
static uint8_t payload[1000];
static const zp_ckpt_pos_t POS = {.step = 1234, .epoch = 3, .batch = 17, .seed = 99, .from = 40,
                                   .world = 2, .flags = ZP_CKPT_TRAIN_RECORDED};

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
    assert_int_equal(pos.from, 40);
    assert_int_equal(pos.world, 2);
    assert_int_equal(pos.flags, ZP_CKPT_TRAIN_RECORDED);
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
    assert_non_null(strstr(err, "this build reads 2 and 3"));
    assert_int_equal(zp_ckpt_write(path, &POS, payload, sizeof payload), 0);
    FILE *f = fopen(path, "r+b"); /* the header's size 72 is version 2's, not 3's */
    assert_non_null(f);
    assert_int_equal(fseek(f, 8, SEEK_SET), 0);
    fputc(72, f);
    fclose(f);
    assert_int_equal(read_back(&pos, NULL, &bytes), ZP_EDATA);
    assert_non_null(strstr(err, "header 72 bytes"));
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
    assert_non_null(strstr(err, "truncated or extended: 1095 bytes, the header says 1096"));
    assert_int_equal(read_back(&pos, NULL, &bytes), ZP_EDATA); /* the header read sees it too */
    assert_int_equal(truncate(path, 40), 0);
    assert_int_equal(read_back(&pos, NULL, &bytes), ZP_EDATA);
    assert_non_null(strstr(err, "shorter than its 96-byte header"));
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
    /* 500 samples of batch 10: 50 batches an epoch on one rank, 25 on each of 2 */
    const zp_config_t c = {.epochs = 10, .batch_size = 10};
    zp_ckpt_pos_t ok[] = {{.step = 0, .epoch = 0, .batch = 0},
                          {.step = 3 * 50 + 17, .epoch = 3, .batch = 17},
                          {.step = 3 * 50 + 50, .epoch = 3, .batch = 50}, /* after the epoch's last */
                          {.step = 10 * 50, .epoch = 10, .batch = 0},     /* the run is over */
                          {.step = 75, .epoch = 1, .batch = 25, .world = 2},
                          {.step = 50, .epoch = 1, .from = 500, .world = 3}, /* the epoch's rest: none */
                          {.step = 60, .epoch = 1, .batch = 10, .from = 300, .world = 2}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        if (zp_ckpt_check(&ok[i], path, &c, 500, 1, err, sizeof err))
            fail_msg("case %zu: %s", i, err);
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
        {{.epoch = 3, .batch = 26, .world = 2}, "batch 26 of epoch 3: an epoch has train batches 0..24"},
        {{.epoch = 3, .batch = 11, .from = 300, .world = 2}, "batch 11 of epoch 3: an epoch has train batches 0..9"},
        {{.epoch = 3, .from = 501}, "from 501 of epoch 3: an epoch's permutation has entries 0..500"},
        {{.epoch = 10, .from = 1}, "from 1 of epoch 10"},
        {{.epoch = 3, .world = ZP_CKPT_WORLD_MAX + 1}, "world 65537: a run has 1..65536 ranks"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        assert_int_equal(zp_ckpt_check(&bad[i].pos, path, &c, 500, 1, err, sizeof err), ZP_EDATA);
        if (!strstr(err, bad[i].says) || !strstr(err, path))
            fail_msg("case %zu: \"%s\" does not say \"%s\"", i, err, bad[i].says);
    }
}

/* A version 2 file (a 72-byte header, no from and world) still reads: from 0,
 * world 0, which the run's own world stands for. */
static void a_version_2_checkpoint_reads_as_the_runs_own_world(void **state)
{
    (void)state;
    uint8_t h[72] = {0};
    uint32_t hb = 72, ver = 2;
    uint64_t n = sizeof payload, sum = XXH3_64bits(payload, sizeof payload), v[4] = {77, 2, 5, 99};
    memcpy(h, "ZPCKPT01", 8);
    memcpy(h + 8, &hb, 4);
    memcpy(h + 12, &ver, 4);
    memcpy(h + 16, &n, 8);
    memcpy(h + 24, &sum, 8);
    memcpy(h + 32, v, sizeof v); /* step, epoch, batch, seed */
    uint64_t hsum = XXH3_64bits(h, 64);
    memcpy(h + 64, &hsum, 8);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(h, 1, sizeof h, f), sizeof h);
    assert_int_equal(fwrite(payload, 1, sizeof payload, f), sizeof payload);
    fclose(f);
    zp_ckpt_pos_t pos;
    void *data;
    size_t bytes;
    assert_int_equal(read_back(&pos, &data, &bytes), 0);
    assert_true(pos.step == 77 && pos.epoch == 2 && pos.batch == 5 && pos.seed == 99);
    assert_true(pos.from == 0 && pos.world == 0 && pos.flags == 0);
    assert_memory_equal(data, payload, sizeof payload);
    free(data);
    /* its position: batch 5 of the run's 2 ranks, 10 a batch: entry 100 */
    const zp_config_t c = {.epochs = 10, .batch_size = 10};
    int64_t repeats;
    assert_int_equal(zp_ckpt_offset(&pos, &c, 500, 2, &repeats), 100);
    assert_int_equal(repeats, 0);
    assert_int_equal(zp_ckpt_regroup(&pos, &c, 500, 2), 0); /* the same world: as it is */
    assert_true(pos.world == 2 && pos.from == 0 && pos.batch == 5 && pos.step == 77);
}

/* Another number of ranks goes on where every rank's shard had got to: the
 * epoch's rest from that entry, batch 0, and the step of a run of that many
 * ranks there. */
static void another_world_shards_the_rest_of_the_epoch(void **state)
{
    (void)state;
    const zp_config_t c = {.epochs = 10, .batch_size = 10};
    /* 2 ranks, batch 3 of epoch 4 in 95 samples: entries 0..59 trained */
    zp_ckpt_pos_t pos = {.step = 4 * 5 + 3, .epoch = 4, .batch = 3, .seed = 1, .world = 2};
    assert_int_equal(zp_ckpt_check(&pos, path, &c, 95, 3, err, sizeof err), 0);
    assert_int_equal(zp_ckpt_regroup(&pos, &c, 95, 3), 1);
    /* 3 ranks: 4 batches an epoch (32 samples on rank 0); entry 60 is 2 of their batches */
    assert_true(pos.from == 60 && pos.batch == 0 && pos.world == 3 && pos.step == 4 * 4 + 2);
    assert_int_equal(zp_ckpt_check(&pos, path, &c, 95, 3, err, sizeof err), 0);
    /* past every shard's end: the epoch's rest is empty */
    zp_ckpt_pos_t end = {.step = 5 * 10, .epoch = 4, .batch = 10, .world = 1};
    assert_int_equal(zp_ckpt_regroup(&end, &c, 95, 2), 1);
    assert_true(end.from == 95 && end.batch == 0 && end.world == 2);
    /* drop_last: the remainder a shard leaves out counts as done */
    const zp_config_t dropping = {.epochs = 10, .batch_size = 10, .drop_last = true};
    zp_ckpt_pos_t last = {.step = 9, .epoch = 0, .batch = 9, .world = 1};
    int64_t repeats;
    assert_int_equal(zp_ckpt_offset(&last, &dropping, 95, 1, &repeats), 95);
    /* a train epoch is over where its record was made, whatever the position */
    zp_ckpt_pos_t eight = {.step = 8, .epoch = 0, .batch = 8, .world = 1};
    assert_int_equal(zp_ckpt_regroup(&eight, &dropping, 95, 2), 1);
    assert_true(eight.from == 80 && !zp_ckpt_train_done(&eight)); /* its record is to come */
    zp_ckpt_pos_t over = {.step = 10, .epoch = 0, .batch = 10, .world = 1,
                          .flags = ZP_CKPT_TRAIN_RECORDED};
    assert_int_equal(zp_ckpt_regroup(&over, &c, 95, 2), 1);
    assert_true(over.from == 95 && zp_ckpt_train_done(&over)); /* kept across a regroup */
    assert_false(zp_ckpt_train_done(&end)); /* past the last batch, its record not yet made */
    zp_ckpt_pos_t odd = {.epoch = 1, .flags = 2};
    assert_int_equal(zp_ckpt_check(&odd, path, &c, 95, 1, err, sizeof err), ZP_EDATA);
    assert_non_null(strstr(err, "flags 0x2: this build knows bit 0 only"));
    /* a checkpoint the regrouped run writes later passes the check: 2 ranks cut at
     * batch 10 of epoch 0 (entry 200 of 1000), 1 rank at step 20 goes on 5 batches */
    const zp_config_t big = {.epochs = 10, .batch_size = 10};
    zp_ckpt_pos_t cut = {.step = 10, .epoch = 0, .batch = 10, .world = 2};
    assert_int_equal(zp_ckpt_regroup(&cut, &big, 1000, 1), 1);
    assert_true(cut.from == 200 && cut.step == 20);
    cut.step += 5, cut.batch = 5;
    if (zp_ckpt_check(&cut, path, &big, 1000, 1, err, sizeof err))
        fail_msg("%s", err);
}

/* A batch size that keeps batch_size x world: the position counts batches of
 * the size it was saved with, and goes on in the new one. */
static void a_batch_size_that_keeps_the_global_batch_regroups(void **state)
{
    (void)state;
    const zp_config_t was = {.epochs = 10, .batch_size = 10}, now = {.epochs = 10, .batch_size = 20};
    /* 2 ranks of 10, batch 3 of epoch 1 in 95 samples: entries 0..59 trained */
    zp_ckpt_pos_t pos = {.step = 5 + 3, .epoch = 1, .batch = 3, .world = 2};
    assert_int_equal(zp_ckpt_rebatch(&pos, &was, &now, 95, 1), 1);
    /* 1 rank of 20: 5 batches an epoch; entry 60 is 3 of them */
    assert_true(pos.from == 60 && pos.batch == 0 && pos.world == 1 && pos.step == 5 + 3);
    assert_int_equal(zp_ckpt_check(&pos, path, &now, 95, 1, err, sizeof err), 0);
    /* counted in the new size, the same position would be entry 120: past the epoch */
    zp_ckpt_pos_t wrong = {.step = 8, .epoch = 1, .batch = 3, .world = 2};
    assert_int_equal(zp_ckpt_regroup(&wrong, &now, 95, 1), 1);
    assert_true(wrong.from == 95);
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
        T(a_version_2_checkpoint_reads_as_the_runs_own_world),
        T(another_world_shards_the_rest_of_the_epoch),
        T(a_batch_size_that_keeps_the_global_batch_regroups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

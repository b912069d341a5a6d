/* Unit tests of the trainer's small modules: coverage accounting (known
 * indices give the distinct count, index checksum and order digest the
 * trainer has always logged, duplicates count once, a new epoch starts
 * clean, a sum over ranks keeps the checksum exact), the learning-rate
 * schedule (constant, step, cosine, warm-up, steps per epoch) and the NaN
 * guard (nan-batch.txt names the batch and lists its indices). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipeline/base/hash.h"
#include "schemas/errors.h"
#include "pipeline/dataset/sampler.h"
#include "pipeline/ring/coverage.h"
#include "stages/trainer/nan_guard.h"
#include "stages/trainer/schedule.h"

/* The default run's test split, in order: its epoch_end record's figures. */
static void a_whole_split_gives_the_logged_checksum_and_digest(void **state)
{
    (void)state;
    zp_coverage_t a;
    assert_int_equal(zp_coverage_init(&a, 10000), 0);
    uint32_t idx[100];
    for (uint32_t b = 0; b < 100; b++) {
        for (uint32_t i = 0; i < 100; i++)
            idx[i] = b * 100 + i;
        zp_coverage_add(&a, idx, 100);
    }
    assert_int_equal(a.samples, 10000);
    assert_int_equal(a.distinct, 10000);
    assert_int_equal(a.batches, 100);
    assert_true(a.checksum == 0x3a71134f612f45f9ull);
    assert_true(a.order == 0xb984c6c688a58ae0ull);
    zp_coverage_free(&a);
}

static void duplicates_count_once_and_order_matters_to_the_digest_only(void **state)
{
    (void)state;
    zp_coverage_t a, b;
    assert_int_equal(zp_coverage_init(&a, 16), 0);
    assert_int_equal(zp_coverage_init(&b, 16), 0);
    uint32_t x[] = {3, 5, 3, 15, 99}, y[] = {15, 3, 5};
    zp_coverage_add(&a, x, 5);
    zp_coverage_add(&b, y, 3);
    assert_int_equal(a.samples, 5);  /* 99 is out of the split: a sample, never distinct */
    assert_int_equal(a.distinct, 3);
    assert_true(a.checksum == zp_index_term(3) + zp_index_term(5) + zp_index_term(15));
    assert_true(a.checksum == b.checksum);
    uint64_t d = ZP_ORDER_INIT;
    for (int i = 0; i < 5; i++)
        d = zp_order_step(d, x[i]);
    assert_true(a.order == d);
    assert_true(a.order != b.order);
    zp_coverage_free(&a), zp_coverage_free(&b);
}

static void an_epoch_starts_clean_after_its_record(void **state)
{
    (void)state;
    zp_coverage_t a;
    assert_int_equal(zp_coverage_init(&a, 8), 0);
    uint32_t x[] = {1, 2}, y[] = {2};
    zp_coverage_add(&a, x, 2);
    a.loss_sum = 4, a.correct = 2;
    zp_coverage_end(&a);
    zp_coverage_add(&a, y, 1);
    assert_int_equal(a.samples, 1);
    assert_int_equal(a.distinct, 1); /* 2 again: distinct in this epoch */
    assert_true(a.checksum == zp_index_term(2));
    assert_true(a.loss_sum == 0 && a.correct == 0);
    zp_coverage_free(&a);
}

static void a_sum_over_ranks_keeps_the_checksum_exact(void **state)
{
    (void)state;
    zp_coverage_t r0, r1, all;
    assert_int_equal(zp_coverage_init(&r0, 1000), 0);
    assert_int_equal(zp_coverage_init(&r1, 1000), 0);
    assert_int_equal(zp_coverage_init(&all, 1000), 0);
    uint32_t idx[1000];
    for (uint32_t i = 0; i < 1000; i++)
        idx[i] = i;
    zp_coverage_add(&r0, idx, 500);
    zp_coverage_add(&r1, idx + 500, 500);
    zp_coverage_add(&all, idx, 1000);
    double s0[ZP_COVERAGE_SUMS], s1[ZP_COVERAGE_SUMS];
    zp_coverage_pack(&r0, s0);
    zp_coverage_pack(&r1, s1);
    for (int i = 0; i < ZP_COVERAGE_SUMS; i++)
        s0[i] += s1[i];
    zp_coverage_unpack(&r0, s0);
    assert_int_equal(r0.samples, 1000);
    assert_int_equal(r0.distinct, 1000);
    assert_true(r0.checksum == all.checksum);
    zp_coverage_free(&r0), zp_coverage_free(&r1), zp_coverage_free(&all);
}

/* 3 ranks cut in an epoch of 50 with rank 2 a batch ahead, resumed by 2:
 * the samples rank 2 trained past the position are trained again, counted
 * as repeats in samples (not in distinct), and the sum over the resumed ranks
 * is still every sample exactly once. */
static void repeats_after_a_resume_are_counted_and_not_distinct(void **state)
{
    (void)state;
    zp_config_t c;
    memset(&c, 0, sizeof c);
    c.seed = 7, c.shuffle = true, c.batch_size = 4;
    int64_t n = 50, ahead[3] = {2, 2, 3}, repeats;
    int64_t at = zp_sampler_position(0, n, 3, 4, false, ahead, 0, &repeats);
    assert_int_equal(at, 2 * 4 * 3); /* rank 2's third batch is past it */
    assert_int_equal(repeats, 4);
    zp_coverage_t r[2], whole;
    zp_sampler_t sm;
    assert_int_equal(zp_sampler_init(&sm, n), 0);
    assert_int_equal(zp_coverage_init(&whole, n), 0);
    double sum[ZP_COVERAGE_SUMS] = {0}, one[ZP_COVERAGE_SUMS];
    for (int k = 0; k < 2; k++) {
        assert_int_equal(zp_coverage_init(&r[k], n), 0);
        assert_int_equal(zp_coverage_resume(&r[k], &c, 0, 3, k, 2, at, 0, repeats), 0);
        assert_int_equal(zp_sampler_epoch(&sm, 7, 0, 3, true, k, 2, at), 0);
        zp_coverage_add(&r[k], sm.order, sm.count);
        zp_coverage_pack(&r[k], one);
        for (int i = 0; i < ZP_COVERAGE_SUMS; i++)
            sum[i] += one[i];
    }
    zp_coverage_unpack(&r[0], sum);
    assert_int_equal(r[0].samples, n + 4);
    assert_int_equal(r[0].distinct, n);
    assert_int_equal(r[0].repeats, 4);
    assert_true(zp_coverage_exact(&r[0], (uint64_t)n, 0));
    assert_false(zp_coverage_exact(&r[0], (uint64_t)n + 4, 0)); /* would hide a duplicate */
    assert_int_equal(zp_sampler_epoch(&sm, 7, 0, 3, true, 0, 1, 0), 0);
    zp_coverage_add(&whole, sm.order, sm.count);
    assert_true(r[0].checksum == whole.checksum);
    r[0].repeats = 0; /* the same counts without the resume's word: not exact */
    assert_false(zp_coverage_exact(&r[0], (uint64_t)n, 0));
    zp_coverage_free(&r[0]), zp_coverage_free(&r[1]), zp_coverage_free(&whole);
    zp_sampler_free(&sm);
}

static void the_schedule_follows_its_curve(void **state)
{
    (void)state;
    zp_config_t c;
    memset(&c, 0, sizeof c);
    c.lr = 0.1, c.epochs = 4, c.schedule = ZP_SCHED_NONE;
    assert_true(zp_schedule_lr(&c, 123, 2, 10) == 0.1);
    c.schedule = ZP_SCHED_STEP, c.gamma = 0.5, c.step_epochs = 2;
    assert_true(zp_schedule_lr(&c, 0, 1, 10) == 0.1);
    assert_true(zp_schedule_lr(&c, 0, 2, 10) == 0.05);
    assert_true(zp_schedule_lr(&c, 0, 3, 10) == 0.05);
    c.schedule = ZP_SCHED_COSINE, c.min_lr = 0.01;
    assert_true(zp_schedule_lr(&c, 0, 0, 10) == 0.1);            /* 4 x 10 steps: from lr */
    assert_true(fabs(zp_schedule_lr(&c, 39, 3, 10) - 0.01) < 1e-15); /* to min_lr */
    double mid = zp_schedule_lr(&c, 19, 1, 10), later = zp_schedule_lr(&c, 20, 2, 10);
    assert_true(mid < 0.1 && later < mid && later > 0.01 && fabs(mid - 0.055) < 0.003);
    c.schedule = ZP_SCHED_NONE, c.warmup_steps = 4;
    assert_true(zp_schedule_lr(&c, 0, 0, 10) == 0.1 / 4);
    assert_true(zp_schedule_lr(&c, 3, 0, 10) == 0.1);
    assert_true(zp_schedule_lr(&c, 4, 0, 10) == 0.1);
}

static void ranks_take_rank_zeros_steps(void **state)
{
    (void)state;
    zp_config_t c;
    memset(&c, 0, sizeof c);
    c.batch_size = 32;
    /* one rank: the BATCH's count; 2 ranks over 100 samples: 50 each, 2 batches */
    assert_int_equal(zp_schedule_epoch_steps(&c, 100, 1, 7), 7);
    assert_int_equal(zp_schedule_epoch_steps(&c, 100, 2, 7), 2);
    c.limit_train_batches = 1;
    assert_int_equal(zp_schedule_shard_steps(&c, 100, 1, 2), 1);
}

static void the_nan_guard_writes_the_batch_and_stops(void **state)
{
    (void)state;
    char dir[] = "/tmp/zp-test-nan-XXXXXX", path[64], line[128];
    assert_non_null(mkdtemp(dir));
    uint32_t idx[] = {7, 42, 9};
    zp_batch_view_t v = {.split = 0, .n = 3, .epoch = 1, .index = 4, .idx = idx};
    assert_int_equal(zp_nan_guard_stop(dir, 10, &v, 0, "weight gradient", "a gradient is not finite"),
                     ZP_EINVAL);
    snprintf(path, sizeof path, "%s/nan-batch.txt", dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof line, f));
    assert_string_equal(line, "# step 11, epoch 2, batch 5, split train: 3 sample indices\n");
    for (int i = 0; i < 3; i++) {
        assert_non_null(fgets(line, sizeof line, f));
        assert_int_equal(atoi(line), (int)idx[i]);
    }
    assert_null(fgets(line, sizeof line, f));
    fclose(f);
    unlink(path);
    rmdir(dir);
    zp_config_t c;
    memset(&c, 0, sizeof c);
    assert_false(zp_nan_guard_due(&c, 0));
    c.nan_at_step = 3;
    assert_false(zp_nan_guard_due(&c, 1));
    assert_true(zp_nan_guard_due(&c, 2));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_whole_split_gives_the_logged_checksum_and_digest),
        cmocka_unit_test(duplicates_count_once_and_order_matters_to_the_digest_only),
        cmocka_unit_test(an_epoch_starts_clean_after_its_record),
        cmocka_unit_test(a_sum_over_ranks_keeps_the_checksum_exact),
        cmocka_unit_test(repeats_after_a_resume_are_counted_and_not_distinct),
        cmocka_unit_test(the_schedule_follows_its_curve),
        cmocka_unit_test(ranks_take_rank_zeros_steps),
        cmocka_unit_test(the_nan_guard_writes_the_batch_and_stops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

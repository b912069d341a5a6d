/* Unit tests of the sampler: deterministic, epoch-dependent, sharded into
 * disjoint pieces that cover the split, and an epoch cut short resumed at
 * its position by any number of ranks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/dataset/sampler.h"

static void same_seed_same_order(void **state)
{
    (void)state;
    zp_sampler_t a, b;
    assert_int_equal(zp_sampler_init(&a, 1000), 0);
    assert_int_equal(zp_sampler_init(&b, 1000), 0);
    zp_sampler_epoch(&a, 42, 0, 3, true, 0, 1, 0);
    zp_sampler_epoch(&b, 42, 0, 3, true, 0, 1, 0);
    assert_int_equal(a.count, 1000);
    assert_memory_equal(a.order, b.order, 1000 * sizeof(uint32_t));
    zp_sampler_free(&a);
    zp_sampler_free(&b);
}

static void different_epochs_and_seeds_differ(void **state)
{
    (void)state;
    zp_sampler_t a, b, c;
    zp_sampler_init(&a, 1000);
    zp_sampler_init(&b, 1000);
    zp_sampler_init(&c, 1000);
    zp_sampler_epoch(&a, 42, 0, 0, true, 0, 1, 0);
    zp_sampler_epoch(&b, 42, 0, 1, true, 0, 1, 0);
    zp_sampler_epoch(&c, 43, 0, 0, true, 0, 1, 0);
    assert_memory_not_equal(a.order, b.order, 1000 * sizeof(uint32_t));
    assert_memory_not_equal(a.order, c.order, 1000 * sizeof(uint32_t));
    zp_sampler_free(&a);
    zp_sampler_free(&b);
    zp_sampler_free(&c);
}

static void every_epoch_is_a_permutation(void **state)
{
    (void)state;
    zp_sampler_t a;
    zp_sampler_init(&a, 5000);
    for (int e = 0; e < 5; e++) {
        zp_sampler_epoch(&a, 7, 0, e, true, 0, 1, 0);
        uint8_t *seen = calloc(5000, 1);
        for (int64_t i = 0; i < a.count; i++) {
            assert_true(a.order[i] < 5000);
            assert_int_equal(seen[a.order[i]], 0);
            seen[a.order[i]] = 1;
        }
        free(seen);
    }
    zp_sampler_free(&a);
}

static void no_shuffle_is_the_identity(void **state)
{
    (void)state;
    zp_sampler_t a;
    zp_sampler_init(&a, 100);
    zp_sampler_epoch(&a, 7, 1, 4, false, 0, 1, 0);
    for (uint32_t i = 0; i < 100; i++)
        assert_int_equal(a.order[i], i);
    zp_sampler_free(&a);
}

static void sampler_shards_are_disjoint_and_cover_the_epoch(void **state)
{
    (void)state;
    const int64_t n = 1003; /* not divisible by the world size */
    const int world = 4;
    uint8_t *seen = calloc((size_t)n, 1);
    int64_t total = 0;
    for (int r = 0; r < world; r++) {
        zp_sampler_t s;
        zp_sampler_init(&s, n);
        zp_sampler_epoch(&s, 9, 0, 2, true, r, world, 0);
        assert_true(s.count == n / world || s.count == n / world + 1);
        for (int64_t i = 0; i < s.count; i++) {
            assert_int_equal(seen[s.order[i]], 0);
            seen[s.order[i]] = 1;
        }
        total += s.count;
        zp_sampler_free(&s);
    }
    assert_int_equal(total, n);
    free(seen);
}

static void batches_follow_drop_last(void **state)
{
    (void)state;
    zp_sampler_t s;
    zp_sampler_init(&s, 1000);
    zp_sampler_epoch(&s, 1, 0, 0, true, 0, 1, 0);
    assert_int_equal(zp_sampler_batches(&s, 256, false), 4);
    assert_int_equal(zp_sampler_batches(&s, 256, true), 3);
    int64_t n;
    const uint32_t *b = zp_sampler_batch(&s, 256, 3, &n);
    assert_int_equal(n, 1000 - 768);
    assert_ptr_equal(b, s.order + 768);
    assert_null(zp_sampler_batch(&s, 256, 4, &n));
    assert_int_equal(n, 0);
    zp_sampler_free(&s);
}

/* The shard's batch count without a permutation (the trainers of a
 * data-parallel run use it) is the sampler's own, and rank 0's is the most. */
static void shard_batches_match_the_sampler(void **state)
{
    (void)state;
    int64_t sizes[] = {1, 2, 7, 64, 65, 127, 1025};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        zp_sampler_t s;
        assert_int_equal(zp_sampler_init(&s, sizes[si]), 0);
        for (int world = 1; world <= 5; world++)
            for (int rank = 0; rank < world; rank++)
                for (int64_t b = 1; b <= 9; b += 4)
                    for (int drop = 0; drop < 2; drop++) {
                        assert_int_equal(zp_sampler_epoch(&s, 3, 0, 1, true, rank, world, 0), 0);
                        int64_t want = zp_sampler_batches(&s, b, drop);
                        assert_int_equal(zp_sampler_shard_batches(sizes[si], rank, world, b, drop), want);
                        assert_true(zp_sampler_shard_batches(sizes[si], 0, world, b, drop) >= want);
                    }
        zp_sampler_free(&s);
    }
}

/* An epoch cut short and resumed with another number of ranks, checked
 * entry by entry against the sampler: `world` ranks shard the permutation
 * from `from`, rank r trains k[r] batches; the position is the first entry
 * no rank trained, and `repeats` the trained entries past it. Then `again`
 * ranks shard the permutation from the position: with the trained ones every
 * entry of the epoch is trained, exactly once but for the repeats. */
static void resume_at(int64_t n, int64_t from, int world, int64_t b, bool drop, const int64_t *k,
                      int again)
{
    zp_sampler_t s;
    assert_int_equal(zp_sampler_init(&s, n), 0);
    uint8_t *times = calloc((size_t)n, 1);  /* by sample index */
    int64_t *at = calloc((size_t)n, sizeof *at); /* a sample's entry in the permutation */
    zp_sampler_epoch(&s, 11, 0, 5, true, 0, 1, 0);
    for (int64_t i = 0; i < n; i++)
        at[s.order[i]] = i;
    for (int64_t i = 0; i < from; i++)
        times[s.order[i]] = 1; /* the epoch's part before `from`, trained earlier */
    int64_t trained = 0;
    for (int r = 0; r < world; r++) {
        assert_int_equal(zp_sampler_epoch(&s, 11, 0, 5, true, r, world, from), 0);
        int64_t nb = zp_sampler_batches(&s, b, drop);
        for (int64_t j = 0; j < (k[r] >= nb ? s.count : k[r] * b) && j < s.count; j++, trained++)
            times[s.order[j]]++;
    }
    int64_t repeats = -1, pos = zp_sampler_position(from, n - from, world, b, drop, k, 0, &repeats);
    int64_t first = from; /* the first entry not trained, by the sampler's own shards */
    zp_sampler_epoch(&s, 11, 0, 5, true, 0, 1, 0);
    while (first < n && times[s.order[first]])
        first++;
    assert_int_equal(pos, first);
    assert_int_equal(repeats, from + trained - first);
    for (int r = 0; r < again; r++) { /* the resumed part */
        assert_int_equal(zp_sampler_epoch(&s, 11, 0, 5, true, r, again, pos), 0);
        for (int64_t j = 0; j < s.count; j++) {
            assert_true(at[s.order[j]] >= pos);
            times[s.order[j]]++;
        }
    }
    int64_t twice = 0;
    for (int64_t i = 0; i < n; i++) {
        assert_true(times[i] == 1 || times[i] == 2);
        twice += times[i] == 2;
    }
    assert_int_equal(twice, repeats);
    zp_sampler_free(&s);
    free(times);
    free(at);
}

/* The ranks in step: k batches of b on each of `world` ranks end at
 * k * b * world, with no repeats, until a shard runs out. */
static void ranks_in_step_end_at_k_batches_of_every_rank(void **state)
{
    (void)state;
    int64_t k[8];
    for (int world = 1; world <= 4; world++)
        for (int64_t steps = 0; steps <= 3; steps++) {
            for (int r = 0; r < world; r++)
                k[r] = steps;
            int64_t repeats;
            assert_int_equal(zp_sampler_position(0, 1000, world, 32, false, k, 0, &repeats),
                             steps * 32 * world);
            assert_int_equal(repeats, 0);
            assert_int_equal(zp_sampler_position(0, 1000, world, 32, false, NULL, steps, &repeats),
                             steps * 32 * world);
            assert_int_equal(repeats, 0);
            for (int again = 1; again <= 5; again++)
                resume_at(1000, 0, world, 32, false, k, again);
        }
}

/* Uneven shards (n not a multiple of the world size), drop_last on and off,
 * ranks ahead of others by a batch or more, an epoch resumed twice (from >
 * 0), the epoch's end: every case covers the epoch. */
static void a_cut_epoch_resumes_with_any_world(void **state)
{
    (void)state;
    const int64_t sizes[] = {1, 10, 63, 64, 65, 1025};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (int world = 1; world <= 4; world++)
            for (int64_t b = 1; b <= 9; b += 4)
                for (int drop = 0; drop < 2; drop++)
                    for (int64_t steps = 0; steps <= 5; steps++)
                        for (int ahead = 0; ahead < world; ahead++) { /* rank `ahead` one batch more */
                            int64_t k[8], n = sizes[si], from = n / 3;
                            for (int r = 0; r < world; r++)
                                k[r] = steps + (r == ahead && world > 1);
                            for (int again = 1; again <= 4; again++) {
                                resume_at(n, 0, world, b, drop, k, again);
                                resume_at(n, from, world, b, drop, k, again);
                            }
                        }
}

/* The position of a rank one batch ahead, counted: 3 ranks of batch 4 in 120
 * samples, rank 2 at batch 3 and the others at 2: the position is 24 (2
 * batches of every rank) and rank 2's third batch, 4 entries, is a repeat. */
static void a_rank_ahead_is_counted_as_repeats(void **state)
{
    (void)state;
    const int64_t k[3] = {2, 2, 3};
    int64_t repeats;
    assert_int_equal(zp_sampler_position(0, 120, 3, 4, false, k, 0, &repeats), 24);
    assert_int_equal(repeats, 4);
    const int64_t over[3] = {10, 10, 10}; /* every shard done: the epoch's end */
    assert_int_equal(zp_sampler_position(0, 120, 3, 4, false, over, 0, &repeats), 120);
    assert_int_equal(repeats, 0);
    const int64_t dropped[2] = {3, 3}; /* 2 x 15 samples of batch 4, drop_last: 3 trained each */
    assert_int_equal(zp_sampler_position(0, 30, 2, 4, true, dropped, 0, &repeats), 30);
    assert_int_equal(repeats, 0);
}

static void bad_rank_is_refused(void **state)
{
    (void)state;
    zp_sampler_t s;
    zp_sampler_init(&s, 10);
    assert_int_not_equal(zp_sampler_epoch(&s, 1, 0, 0, true, 2, 2, 0), 0);
    assert_int_not_equal(zp_sampler_epoch(&s, 1, 0, 0, true, 0, 0, 0), 0);
    assert_int_not_equal(zp_sampler_epoch(&s, 1, 0, 0, true, 0, 1, 11), 0); /* past the end */
    zp_sampler_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_seed_same_order),
        cmocka_unit_test(different_epochs_and_seeds_differ),
        cmocka_unit_test(every_epoch_is_a_permutation),
        cmocka_unit_test(no_shuffle_is_the_identity),
        cmocka_unit_test(sampler_shards_are_disjoint_and_cover_the_epoch),
        cmocka_unit_test(batches_follow_drop_last),
        cmocka_unit_test(shard_batches_match_the_sampler),
        cmocka_unit_test(ranks_in_step_end_at_k_batches_of_every_rank),
        cmocka_unit_test(a_cut_epoch_resumes_with_any_world),
        cmocka_unit_test(a_rank_ahead_is_counted_as_repeats),
        cmocka_unit_test(bad_rank_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests of the sampler: deterministic, epoch-dependent, and sharded
 * into disjoint pieces that cover the split. */
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
    zp_sampler_epoch(&a, 42, 0, 3, true, 0, 1);
    zp_sampler_epoch(&b, 42, 0, 3, true, 0, 1);
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
    zp_sampler_epoch(&a, 42, 0, 0, true, 0, 1);
    zp_sampler_epoch(&b, 42, 0, 1, true, 0, 1);
    zp_sampler_epoch(&c, 43, 0, 0, true, 0, 1);
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
        zp_sampler_epoch(&a, 7, 0, e, true, 0, 1);
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
    zp_sampler_epoch(&a, 7, 1, 4, false, 0, 1);
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
        zp_sampler_epoch(&s, 9, 0, 2, true, r, world);
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
    zp_sampler_epoch(&s, 1, 0, 0, true, 0, 1);
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
                        assert_int_equal(zp_sampler_epoch(&s, 3, 0, 1, true, rank, world), 0);
                        int64_t want = zp_sampler_batches(&s, b, drop);
                        assert_int_equal(zp_sampler_shard_batches(sizes[si], rank, world, b, drop), want);
                        assert_true(zp_sampler_shard_batches(sizes[si], 0, world, b, drop) >= want);
                    }
        zp_sampler_free(&s);
    }
}

static void bad_rank_is_refused(void **state)
{
    (void)state;
    zp_sampler_t s;
    zp_sampler_init(&s, 10);
    assert_int_not_equal(zp_sampler_epoch(&s, 1, 0, 0, true, 2, 2), 0);
    assert_int_not_equal(zp_sampler_epoch(&s, 1, 0, 0, true, 0, 0), 0);
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
        cmocka_unit_test(bad_rank_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

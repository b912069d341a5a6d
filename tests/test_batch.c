/* Unit tests of the prefetch's batch assembly (stages/prefetch/batch.h),
 * without processes or a ring: samples land at their positions, duplicates
 * keep the first copy (crops with them, or marked unknown when a result has
 * none), held results are copied in when the slot comes, and skipped samples
 * are compacted away. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "schemas/errors.h"
#include "stages/prefetch/batch.h"

#define BS 4
#define SB 3 /* bytes per sample */

static uint32_t order[BS] = {40, 41, 42, 43}; /* the sampler's indices of the batch */
static uint32_t s_idx[BS];
static int32_t s_labels[BS];
static uint8_t s_data[BS * SB];
static zp_crop_t s_crops[BS];

static zp_slot_view_t slot(void)
{
    memcpy(s_idx, order, sizeof s_idx);
    memset(s_labels, 0x55, sizeof s_labels);
    memset(s_data, 0, sizeof s_data);
    memset(s_crops, 0x55, sizeof s_crops);
    return (zp_slot_view_t){s_idx, s_labels, s_data, s_crops, SB};
}

/* Crop i of a result: a box that says i in every field. */
static zp_crop_t crop(int i) { return (zp_crop_t){i, i + 1, i + 2, i + 3, i & 1, 300 + i, 200 + i}; }

/* A fetch of every sample, in reverse order: offset i -> position BS-1-i. */
static zp_batch_t *started(void)
{
    zp_batch_t *bt;
    assert_int_equal(zp_batch_create(&bt, BS), 0);
    zp_batch_start(bt, 7, order, BS);
    for (int i = 0; i < BS; i++)
        bt->fetch.pos[bt->fetch.n++] = (uint32_t)(BS - 1 - i);
    return bt;
}

static void samples_land_at_their_positions_and_a_duplicate_keeps_the_first_copy(void **state)
{
    (void)state;
    zp_slot_view_t v = slot();
    zp_batch_t *bt = started();
    int32_t labels[2] = {5, 6};
    uint8_t data[2 * SB] = {1, 1, 1, 2, 2, 2};
    zp_batch_copy_in(bt, &v, &bt->fetch, 0, 2, (const uint8_t *)labels, data, NULL);
    assert_int_equal(bt->filled, 2);
    assert_false(zp_batch_complete(bt));
    assert_int_equal(s_crops[3].x, -1); /* a result without crops: not known */
    assert_int_equal(s_crops[2].x, -1);
    assert_int_equal(s_labels[3], 5);
    assert_int_equal(s_labels[2], 6);
    assert_int_equal(s_data[3 * SB], 1);
    assert_int_equal(s_data[2 * SB + 2], 2);
    int32_t again[1] = {9};
    uint8_t other[SB] = {9, 9, 9};
    zp_batch_copy_in(bt, &v, &bt->fetch, 0, 1, (const uint8_t *)again, other, NULL);
    assert_int_equal(bt->filled, 2);
    assert_int_equal(s_labels[3], 5);
    assert_int_equal(s_data[3 * SB], 1);
    zp_batch_copy_in(bt, &v, &bt->fetch, 2, 2, (const uint8_t *)labels, data, NULL);
    assert_true(zp_batch_complete(bt));
    zp_batch_destroy(&bt);
    assert_null(bt);
    zp_batch_destroy(&bt);
}

static void a_result_held_before_the_slot_is_copied_in_when_it_comes(void **state)
{
    (void)state;
    zp_batch_t *bt = started();
    int32_t labels[BS] = {10, 11, 12, 13};
    uint8_t data[BS * SB];
    for (int i = 0; i < BS * SB; i++)
        data[i] = (uint8_t)(i / SB + 100);
    zp_crop_t crops[BS];
    for (int i = 0; i < BS; i++)
        crops[i] = crop(i);
    zp_frames_t f;
    zp_frames_init(&f);
    f.n = 5;
    for (int i = 0; i < 2; i++)
        zmq_msg_init(&f.part[i]);
    zmq_msg_init_size(&f.part[2], sizeof labels);
    zmq_msg_init_size(&f.part[3], sizeof data);
    zmq_msg_init_size(&f.part[4], sizeof crops);
    memcpy(zmq_msg_data(&f.part[2]), labels, sizeof labels);
    memcpy(zmq_msg_data(&f.part[3]), data, sizeof data);
    memcpy(zmq_msg_data(&f.part[4]), crops, sizeof crops);
    zp_msg_t m = {.type = ZP_MSG_RESULT, .offset = 0, .n = BS, .nframes = 5};
    assert_int_equal(zp_batch_hold(bt, &m, &f), 0);
    zp_frames_free(&f); /* the frames moved: closing f leaves the held copy alone */
    assert_int_equal(bt->nheld, 1);
    assert_int_equal(bt->filled, 0);
    zp_slot_view_t v = slot();
    zp_batch_copy_held(bt, &v);
    assert_int_equal(bt->nheld, 0);
    assert_true(zp_batch_complete(bt));
    for (int i = 0; i < BS; i++) {
        assert_int_equal(s_labels[BS - 1 - i], 10 + i);
        assert_int_equal(s_data[(BS - 1 - i) * SB], 100 + i);
        zp_crop_t want = crop(i);
        assert_memory_equal(&s_crops[BS - 1 - i], &want, sizeof want);
    }
    zp_batch_destroy(&bt);
}

static void a_held_result_without_crops_marks_them_unknown(void **state)
{
    (void)state;
    zp_batch_t *bt = started();
    int32_t labels[BS] = {10, 11, 12, 13};
    uint8_t data[BS * SB] = {0};
    zp_frames_t f;
    zp_frames_init(&f);
    f.n = 4; /* a sender of no crops */
    for (int i = 0; i < 2; i++)
        zmq_msg_init(&f.part[i]);
    zmq_msg_init_size(&f.part[2], sizeof labels);
    zmq_msg_init_size(&f.part[3], sizeof data);
    memcpy(zmq_msg_data(&f.part[2]), labels, sizeof labels);
    memcpy(zmq_msg_data(&f.part[3]), data, sizeof data);
    zp_msg_t m = {.type = ZP_MSG_RESULT, .offset = 0, .n = BS, .nframes = 4};
    assert_int_equal(zp_batch_hold(bt, &m, &f), 0);
    zp_frames_free(&f);
    zp_slot_view_t v = slot();
    zp_batch_copy_held(bt, &v);
    assert_true(zp_batch_complete(bt));
    for (int i = 0; i < BS; i++)
        assert_int_equal(s_crops[i].x, -1);
    zp_batch_destroy(&bt);
}

static void an_abandoned_batch_closes_what_it_held_and_is_unused(void **state)
{
    (void)state;
    zp_batch_t *bt = started();
    bt->fetch.id = 9;
    bt->slot = 1;
    zp_frames_t f;
    zp_frames_init(&f);
    f.n = 4;
    for (int i = 0; i < 4; i++)
        zmq_msg_init_size(&f.part[i], 8);
    zp_msg_t m = {.type = ZP_MSG_RESULT, .offset = 0, .n = 1};
    assert_int_equal(zp_batch_hold(bt, &m, &f), 0);
    zp_frames_free(&f);
    zp_batch_abandon(bt); /* the held frames are closed here (LeakSanitizer would see them) */
    assert_int_equal(bt->nheld, 0);
    assert_int_equal(bt->batch, -1);
    assert_int_equal(bt->slot, -1);
    assert_int_equal(bt->fetch.id, 0);
    assert_int_equal(bt->fetch.n, 0);
    zp_batch_start(bt, 3, order, BS); /* reusable */
    assert_int_equal(bt->batch, 3);
    assert_false(zp_batch_complete(bt));
    zp_batch_destroy(&bt);
}

static void skipped_samples_are_compacted_away(void **state)
{
    (void)state;
    zp_slot_view_t v = slot();
    zp_batch_t *bt = started();
    /* offsets 0..3 -> positions 3..0; positions 1 and 3 skipped */
    int32_t labels[BS] = {ZP_LABEL_SKIPPED, 7, ZP_LABEL_SKIPPED, 8};
    uint8_t data[BS * SB] = {9, 9, 9, 2, 2, 2, 9, 9, 9, 1, 1, 1};
    zp_crop_t crops[BS] = {crop(0), crop(1), crop(2), crop(3)};
    zp_batch_copy_in(bt, &v, &bt->fetch, 0, BS, (const uint8_t *)labels, data,
                     (const uint8_t *)crops);
    assert_true(zp_batch_complete(bt));
    assert_int_equal(bt->skipped, 2);
    assert_int_equal(s_data[3 * SB], 0); /* a skipped sample's data are not copied */
    assert_int_equal(zp_batch_compact(bt, &v), 2);
    assert_int_equal(bt->n, 2);
    assert_int_equal(s_idx[0], 40);
    assert_int_equal(s_idx[1], 42);
    assert_int_equal(s_labels[0], 8);
    assert_int_equal(s_labels[1], 7);
    assert_int_equal(s_data[0], 1);
    assert_int_equal(s_data[SB + 2], 2);
    assert_memory_equal(&s_crops[0], &crops[3], sizeof crops[3]); /* moved with their samples */
    assert_memory_equal(&s_crops[1], &crops[1], sizeof crops[1]);
    zp_batch_destroy(&bt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(samples_land_at_their_positions_and_a_duplicate_keeps_the_first_copy),
        cmocka_unit_test(a_result_held_before_the_slot_is_copied_in_when_it_comes),
        cmocka_unit_test(a_held_result_without_crops_marks_them_unknown),
        cmocka_unit_test(skipped_samples_are_compacted_away),
        cmocka_unit_test(an_abandoned_batch_closes_what_it_held_and_is_unused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

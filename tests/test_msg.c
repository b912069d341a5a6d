/* Unit tests of the wire codec: every message type survives encode and
 * decode with all its fields and payload frames (what it refuses:
 * test_msg_refused.c). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/base/log.h"
#include "schemas/msg.h"
#include "msg_wire.h"

/* ---- round trips: one per message type ------------------------------------------------- */

static void ready_round_trips(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    encode(&w, &(zp_msg_t){.type = ZP_MSG_READY, .credit = 7});
    expect_accepted(&w);
    assert_int_equal(w.m.type, ZP_MSG_READY);
    assert_int_equal(w.m.present, ZP_B(credit));
    assert_int_equal(w.m.credit, 7);
    assert_int_equal(w.m.nframes, 1);
    wire_free(&w);
}

static void task_and_fetch_round_trip_with_their_index_frame(void **state)
{
    (void)state;
    zp_msg_type_t types[] = {ZP_MSG_TASK, ZP_MSG_FETCH};
    for (int t = 0; t < 2; t++) {
        wire_t w;
        wire_init(&w);
        encode(&w, &(zp_msg_t){.type = types[t], .id = UINT64_MAX, .split = 1, .n = 5});
        add_frame(&w, indices, 5 * 4);
        expect_accepted(&w);
        assert_int_equal(w.m.type, types[t]);
        assert_int_equal(w.m.present, ZP_B(id) | ZP_B(split) | ZP_B(n));
        assert_true(w.m.id == UINT64_MAX);
        assert_int_equal(w.m.split, 1);
        assert_int_equal(w.m.n, 5);
        assert_int_equal(w.m.nframes, 2);
        assert_ptr_equal(w.m.frame[0], w.sb.data);
        assert_int_equal(w.m.frame_size[0], w.sb.size);
        assert_ptr_equal(w.m.frame[1], indices);
        assert_int_equal(w.m.frame_size[1], 20);
        uint32_t got[5];
        memcpy(got, w.m.frame[1], sizeof got);
        assert_memory_equal(got, indices, sizeof got);
        wire_free(&w);
    }
}

static void samples_and_result_round_trip_with_three_payload_frames(void **state)
{
    (void)state;
    zp_msg_type_t types[] = {ZP_MSG_SAMPLES, ZP_MSG_RESULT};
    for (int t = 0; t < 2; t++) {
        wire_t w;
        wire_init(&w);
        encode(&w, &(zp_msg_t){.type = types[t], .id = 42, .split = 0, .n = 3, .elems = 8,
                               .offset = 1u << 30});
        add_frame(&w, indices, 3 * 4);
        add_frame(&w, labels, 3 * 4);
        add_frame(&w, data, 3 * 8 * 4);
        expect_accepted(&w);
        uint32_t want = ZP_B(id) | ZP_B(split) | ZP_B(n) | ZP_B(elems);
        if (types[t] == ZP_MSG_RESULT)
            want |= ZP_B(offset);
        assert_int_equal(w.m.type, types[t]);
        assert_int_equal(w.m.present, want);
        assert_int_equal(w.m.id, 42);
        assert_int_equal(w.m.split, 0);
        assert_int_equal(w.m.n, 3);
        assert_int_equal(w.m.elems, 8);
        assert_int_equal(w.m.offset, types[t] == ZP_MSG_RESULT ? 1u << 30 : 0);
        assert_int_equal(w.m.nframes, 4);
        assert_ptr_equal(w.m.frame[1], indices);
        assert_ptr_equal(w.m.frame[2], labels);
        assert_ptr_equal(w.m.frame[3], data);
        assert_int_equal(w.m.frame_size[3], 96);
        wire_free(&w);
    }
}

static void fail_round_trips_with_its_error_text(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    zp_msg_t in = {.type = ZP_MSG_FAIL, .id = 9};
    snprintf(in.error, sizeof in.error, "train-images-idx3-ubyte.gz: truncated at byte 1048576");
    encode(&w, &in);
    expect_accepted(&w);
    assert_int_equal(w.m.type, ZP_MSG_FAIL);
    assert_int_equal(w.m.present, ZP_B(id) | ZP_B(error));
    assert_int_equal(w.m.id, 9);
    assert_string_equal(w.m.error, in.error);
    wire_free(&w);
}

static void error_of_255_bytes_is_the_longest_accepted(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    zp_msg_t in = {.type = ZP_MSG_FAIL, .id = 1};
    memset(in.error, 'e', 255);
    encode(&w, &in);
    expect_accepted(&w);
    assert_int_equal(strlen(w.m.error), 255);
    assert_string_equal(w.m.error, in.error);
    wire_free(&w);
}

static void batch_round_trips_every_field(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    encode(&w, &(zp_msg_t){.type = ZP_MSG_BATCH, .slot = 3, .gen = 0xfedcba9876543210ull,
                           .nonce = 0x8badf00d12345678ull, .split = 1, .epoch = 14, .index = 233, .batches = 469, .n = 96,
                           .elems = 784});
    expect_accepted(&w);
    assert_int_equal(w.m.type, ZP_MSG_BATCH);
    assert_int_equal(w.m.present, ZP_B(slot) | ZP_B(gen) | ZP_B(nonce) | ZP_B(split) |
                                      ZP_B(epoch) | ZP_B(index) | ZP_B(batches) | ZP_B(n) |
                                      ZP_B(elems));
    assert_int_equal(w.m.slot, 3);
    assert_true(w.m.gen == 0xfedcba9876543210ull);
    assert_true(w.m.nonce == 0x8badf00d12345678ull);
    assert_int_equal(w.m.split, 1);
    assert_int_equal(w.m.epoch, 14);
    assert_int_equal(w.m.index, 233);
    assert_int_equal(w.m.batches, 469);
    assert_int_equal(w.m.n, 96);
    assert_int_equal(w.m.elems, 784);
    wire_free(&w);
}

static void free_round_trips_slot_and_generation(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    encode(&w, &(zp_msg_t){.type = ZP_MSG_FREE, .slot = 1, .gen = 77});
    expect_accepted(&w);
    assert_int_equal(w.m.type, ZP_MSG_FREE);
    assert_int_equal(w.m.present, ZP_B(slot) | ZP_B(gen));
    assert_int_equal(w.m.slot, 1);
    assert_int_equal(w.m.gen, 77);
    wire_free(&w);
}

static void epoch_end_round_trips_a_sample_count_beyond_max_batch(void **state)
{
    (void)state;
    /* n of EPOCH_END counts the whole epoch; the 1..ZP_MAX_BATCH bound is for batches */
    wire_t w;
    wire_init(&w);
    encode(&w, &(zp_msg_t){.type = ZP_MSG_EPOCH_END, .split = 0, .epoch = 2, .batches = 469,
                           .n = 60000000});
    expect_accepted(&w);
    assert_int_equal(w.m.type, ZP_MSG_EPOCH_END);
    assert_int_equal(w.m.present, ZP_B(split) | ZP_B(epoch) | ZP_B(batches) | ZP_B(n));
    assert_int_equal(w.m.epoch, 2);
    assert_int_equal(w.m.batches, 469);
    assert_int_equal(w.m.n, 60000000);
    wire_free(&w);

    wire_init(&w);
    encode(&w, &(zp_msg_t){.type = ZP_MSG_EPOCH_END, .split = 1, .epoch = 0, .batches = 0, .n = 0});
    expect_accepted(&w);
    assert_int_equal(w.m.n, 0);
    wire_free(&w);
}

static void field_free_messages_round_trip(void **state)
{
    (void)state;
    zp_msg_type_t types[] = {ZP_MSG_END, ZP_MSG_STAT_REQ, ZP_MSG_CTL_REP};
    for (int t = 0; t < 3; t++) {
        wire_t w;
        wire_init(&w);
        encode(&w, &(zp_msg_t){.type = types[t]});
        expect_accepted(&w);
        assert_int_equal(w.m.type, types[t]);
        assert_int_equal(w.m.present, 0);
        assert_int_equal(w.m.nframes, 1);
        wire_free(&w);
    }
}

static void ctl_round_trips_its_command(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    encode(&w, &(zp_msg_t){.type = ZP_MSG_CTL, .cmd = "down"});
    expect_accepted(&w);
    assert_int_equal(w.m.type, ZP_MSG_CTL);
    assert_int_equal(w.m.present, ZP_B(cmd));
    assert_string_equal(w.m.cmd, "down");
    wire_free(&w);
}

static void ctl_rep_carries_an_error_only_when_present(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    encode(&w, &(zp_msg_t){.type = ZP_MSG_CTL_REP, .error = "unknown command 'up'",
                           .present = ZP_B(error)});
    expect_accepted(&w);
    assert_int_equal(w.m.type, ZP_MSG_CTL_REP);
    assert_int_equal(w.m.present, ZP_B(error));
    assert_string_equal(w.m.error, "unknown command 'up'");
    wire_free(&w);

    /* without the present bit the error text stays home */
    wire_init(&w);
    encode(&w, &(zp_msg_t){.type = ZP_MSG_CTL_REP, .error = "not sent"});
    expect_accepted(&w);
    assert_int_equal(w.m.present, 0);
    assert_string_equal(w.m.error, "");
    wire_free(&w);
}

static void event_round_trips_its_body_map(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    zp_msg_pack_begin(&w.pk, ZP_MSG_EVENT, 1);
    key(&w, "body");
    msgpack_pack_map(&w.pk, 4);
    kv_s(&w, "kind", "stage_up");
    kv_s(&w, "stage", "loader");
    kv_u(&w, "instance", 3);
    key(&w, "loss");
    msgpack_pack_double(&w.pk, 0.25);
    expect_accepted(&w);
    assert_int_equal(w.m.type, ZP_MSG_EVENT);
    assert_int_equal(w.m.present, ZP_B(body));
    assert_int_equal(w.m.body.type, MSGPACK_OBJECT_MAP);
    assert_int_equal(w.m.body.via.map.size, 4);
    char buf[32];
    assert_string_equal(zp_msg_map_str(&w.m.body, "kind", buf, sizeof buf), "stage_up");
    assert_string_equal(zp_msg_map_str(&w.m.body, "stage", buf, sizeof buf), "loader");
    assert_string_equal(zp_msg_map_str(&w.m.body, "absent", buf, sizeof buf), "");
    assert_true(zp_msg_map_num(&w.m.body, "instance", -1) == 3);
    assert_true(zp_msg_map_num(&w.m.body, "loss", -1) == 0.25);
    assert_true(zp_msg_map_num(&w.m.body, "kind", -1) == -1); /* a string is not a number */
    assert_true(zp_msg_map_num(&w.m.body, "absent", -1) == -1);
    assert_null(zp_msg_map_get(&w.m.body, "absent"));
    wire_free(&w);
}

static void stat_rep_round_trips_its_body_array(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    zp_msg_pack_begin(&w.pk, ZP_MSG_STAT_REP, 1);
    key(&w, "body");
    msgpack_pack_array(&w.pk, 2);
    for (int i = 0; i < 2; i++) {
        msgpack_pack_map(&w.pk, 2);
        kv_s(&w, "stage", i ? "cache" : "loader");
        kv_u(&w, "total_samples", 1000u * (unsigned)(i + 1));
    }
    expect_accepted(&w);
    assert_int_equal(w.m.type, ZP_MSG_STAT_REP);
    assert_int_equal(w.m.present, ZP_B(body));
    assert_int_equal(w.m.body.type, MSGPACK_OBJECT_ARRAY);
    assert_int_equal(w.m.body.via.array.size, 2);
    char buf[32];
    const msgpack_object *r = &w.m.body.via.array.ptr[1];
    assert_string_equal(zp_msg_map_str(r, "stage", buf, sizeof buf), "cache");
    assert_true(zp_msg_map_num(r, "total_samples", 0) == 2000);
    wire_free(&w);
}

static void event_body_of_every_msgpack_format_is_accepted(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    zp_msg_pack_begin(&w.pk, ZP_MSG_EVENT, 1);
    key(&w, "body");
    msgpack_pack_map(&w.pk, 1);
    key(&w, "all");
    pack_every_kind(&w.pk);
    expect_accepted(&w);
    const msgpack_object *all = zp_msg_map_get(&w.m.body, "all");
    assert_non_null(all);
    assert_int_equal(all->type, MSGPACK_OBJECT_ARRAY);
    assert_int_equal(all->via.array.size, 32);
    assert_int_equal(all->via.array.ptr[16].via.str.size, 300);
    assert_int_equal(all->via.array.ptr[27].via.array.size, 20);
    assert_int_equal(all->via.array.ptr[28].via.map.size, 17);
    wire_free(&w);
}

static void encode_refuses_types_it_cannot_write(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    zp_msg_type_t bad[] = {ZP_MSG_NONE, ZP_MSG_COUNT, ZP_MSG_EVENT, ZP_MSG_STAT_REP};
    for (int i = 0; i < 4; i++)
        assert_int_equal(zp_msg_encode(&(zp_msg_t){.type = bad[i]}, &sb), ZP_EINVAL);
    assert_int_equal(sb.size, 0); /* nothing written */
    msgpack_sbuffer_destroy(&sb);
}

static void every_type_has_its_wire_name(void **state)
{
    (void)state;
#define NAME(name, wire, frames, req, doc) assert_string_equal(zp_msg_name(ZP_MSG_##name), wire);
    ZP_MSGS(NAME)
#undef NAME
    assert_string_equal(zp_msg_name(ZP_MSG_NONE), "?");
    assert_string_equal(zp_msg_name(ZP_MSG_COUNT), "?");
}

/* ---- refusals: headers ----------------------------------------------------------------- */

static void unknown_header_keys_are_ignored(void **state)
{
    (void)state;
    /* a newer sender may add keys; the receiver reads the ones it knows */
    wire_t w;
    wire_init(&w);
    zp_msg_pack_begin(&w.pk, ZP_MSG_READY, 3);
    kv_u(&w, "credit", 2);
    kv_s(&w, "hint", "ignored");
    msgpack_pack_uint32(&w.pk, 7); /* a key that is not even a string */
    msgpack_pack_nil(&w.pk);
    expect_accepted(&w);
    assert_int_equal(w.m.credit, 2);
    wire_free(&w);
}

/* ---- fuzz: damaged headers never crash ------------------------------------------------- */

int main(void)
{
    const struct CMUnitTest round_trips[] = {
        cmocka_unit_test(ready_round_trips),
        cmocka_unit_test(task_and_fetch_round_trip_with_their_index_frame),
        cmocka_unit_test(samples_and_result_round_trip_with_three_payload_frames),
        cmocka_unit_test(fail_round_trips_with_its_error_text),
        cmocka_unit_test(error_of_255_bytes_is_the_longest_accepted),
        cmocka_unit_test(batch_round_trips_every_field),
        cmocka_unit_test(free_round_trips_slot_and_generation),
        cmocka_unit_test(epoch_end_round_trips_a_sample_count_beyond_max_batch),
        cmocka_unit_test(field_free_messages_round_trip),
        cmocka_unit_test(ctl_round_trips_its_command),
        cmocka_unit_test(ctl_rep_carries_an_error_only_when_present),
        cmocka_unit_test(event_round_trips_its_body_map),
        cmocka_unit_test(stat_rep_round_trips_its_body_array),
        cmocka_unit_test(event_body_of_every_msgpack_format_is_accepted),
        cmocka_unit_test(encode_refuses_types_it_cannot_write),
        cmocka_unit_test(every_type_has_its_wire_name),
        cmocka_unit_test(unknown_header_keys_are_ignored),
    };
    int failed = cmocka_run_group_tests_name("msg: round trips", round_trips, setup, NULL);
    return failed ? 1 : 0;
}

/* Unit tests of the wire codec: every message type survives encode and
 * decode with all its fields and payload frames; every malformed header or
 * frame set is refused with ZP_EPROTO and a reason; random damage to valid
 * headers never crashes the decoder. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/log.h"
#include "schemas/msg.h"

/* ---- helpers: a message on the wire ---------------------------------------------------- */

/* Frame 0 is the msgpack header in `sb`; frames 1.. are payloads. One more
 * slot than the protocol allows, to send too many frames. */
typedef struct {
    msgpack_sbuffer sb;
    msgpack_packer pk;
    const void *frame[ZP_MAX_FRAMES + 1];
    size_t size[ZP_MAX_FRAMES + 1];
    int nframes;
    zp_msg_t m; /* decoded; its pointers point into sb and the payloads */
    char why[256];
} wire_t;

static void wire_init(wire_t *w)
{
    memset(w, 0, sizeof *w);
    msgpack_sbuffer_init(&w->sb);
    msgpack_packer_init(&w->pk, &w->sb, msgpack_sbuffer_write);
    w->nframes = 1;
}

static void wire_free(wire_t *w)
{
    zp_msg_release(&w->m);
    msgpack_sbuffer_destroy(&w->sb);
}

static void add_frame(wire_t *w, const void *data, size_t size)
{
    assert_true(w->nframes <= ZP_MAX_FRAMES);
    w->frame[w->nframes] = data;
    w->size[w->nframes++] = size;
}

static int wire_decode(wire_t *w)
{
    w->frame[0] = w->sb.data;
    w->size[0] = w->sb.size;
    w->why[0] = 0;
    return zp_msg_decode(&w->m, w->frame, w->size, w->nframes, w->why, sizeof w->why);
}

static void encode(wire_t *w, const zp_msg_t *in)
{
    assert_int_equal(zp_msg_encode(in, &w->sb), 0);
}

static void expect_accepted(wire_t *w)
{
    int rc = wire_decode(w);
    if (rc)
        fail_msg("refused (%d): %s", rc, w->why);
}

/* Decodes, asserts ZP_EPROTO with `reason` in the message, and frees w. */
static void expect_refused(wire_t *w, const char *reason)
{
    int rc = wire_decode(w);
    char why[sizeof w->why];
    memcpy(why, w->why, sizeof why);
    wire_free(w);
    if (rc != ZP_EPROTO)
        fail_msg("expected ZP_EPROTO (%s), got %d", reason, rc);
    if (!strstr(why, reason))
        fail_msg("reason '%s' does not say '%s'", why, reason);
}

static void key(wire_t *w, const char *k) { zp_pack_str(&w->pk, k); }

static void kv_u(wire_t *w, const char *k, uint64_t v)
{
    key(w, k);
    msgpack_pack_uint64(&w->pk, v);
}

static void kv_s(wire_t *w, const char *k, const char *v)
{
    key(w, k);
    zp_pack_str(&w->pk, v);
}

/* Payloads. The decoder only looks at their sizes; they hold values anyway. */
static uint32_t indices[64];
static int32_t labels[64];
static float data[64 * 8];

static int setup(void **state)
{
    (void)state;
    for (int i = 0; i < 64; i++)
        indices[i] = 1000u + (uint32_t)i, labels[i] = i % 10;
    for (int i = 0; i < 64 * 8; i++)
        data[i] = (float)i / 8.0f;
    return 0;
}

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
    assert_string_equal(zp_map_str(&w.m.body, "kind", buf, sizeof buf), "stage_up");
    assert_string_equal(zp_map_str(&w.m.body, "stage", buf, sizeof buf), "loader");
    assert_string_equal(zp_map_str(&w.m.body, "absent", buf, sizeof buf), "");
    assert_true(zp_map_num(&w.m.body, "instance", -1) == 3);
    assert_true(zp_map_num(&w.m.body, "loss", -1) == 0.25);
    assert_true(zp_map_num(&w.m.body, "kind", -1) == -1); /* a string is not a number */
    assert_true(zp_map_num(&w.m.body, "absent", -1) == -1);
    assert_null(zp_map_get(&w.m.body, "absent"));
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
    assert_string_equal(zp_map_str(r, "stage", buf, sizeof buf), "cache");
    assert_true(zp_map_num(r, "total_samples", 0) == 2000);
    wire_free(&w);
}

/* Values of every msgpack format. Their data bytes look like headers of huge
 * containers (0xdd, 0xdf then 0xff), so a size check that loses its place
 * inside them refuses the whole header. */
static void pack_every_kind(msgpack_packer *pk)
{
    static const unsigned char trap[] = {0xdf, 0xff, 0xff, 0xff, 0xff, 0xdd, 0xff, 0xff, 0xff,
                                         0xff, 0xdd, 0xdd, 0xdd, 0xdd, 0xdd, 0xdd, 0xdd, 0xdd};
    char text[300];
    memset(text, 0xdd, sizeof text);
    msgpack_pack_array(pk, 32);
    msgpack_pack_nil(pk);
    msgpack_pack_true(pk);
    msgpack_pack_false(pk);
    msgpack_pack_fix_uint8(pk, 0xdf);
    msgpack_pack_fix_uint16(pk, 0xdfff);
    msgpack_pack_fix_uint32(pk, 0xdfdfdfdfu);
    msgpack_pack_fix_uint64(pk, 0xdfffffffdfffffffull);
    msgpack_pack_fix_int8(pk, -33);                     /* 0xdf */
    msgpack_pack_fix_int16(pk, -8225);                  /* 0xdfdf */
    msgpack_pack_fix_int32(pk, -538976289);             /* 0xdfdfdfdf */
    msgpack_pack_fix_int64(pk, -2305843009750564865ll); /* 0xdfffffffdfffffff */
    msgpack_pack_int(pk, -5);
    float f32;
    memcpy(&f32, &(uint32_t){0xdfffffffu}, 4); /* a float whose bytes read as map32 */
    msgpack_pack_float(pk, f32);
    msgpack_pack_double(pk, -2.25);
    msgpack_pack_str(pk, sizeof trap); /* fixstr */
    msgpack_pack_str_body(pk, trap, sizeof trap);
    msgpack_pack_str(pk, 40); /* str8 */
    msgpack_pack_str_body(pk, text, 40);
    msgpack_pack_str(pk, 300); /* str16 */
    msgpack_pack_str_body(pk, text, 300);
    msgpack_pack_v4raw(pk, 40); /* the old raw16 form */
    msgpack_pack_v4raw_body(pk, text, 40);
    msgpack_pack_bin(pk, 18);
    msgpack_pack_bin_body(pk, trap, 18);
    msgpack_pack_bin(pk, 300);
    msgpack_pack_bin_body(pk, text, 300);
    size_t ext[] = {1, 2, 4, 8, 16, 18, 300}; /* fixext 1..16, ext8, ext16 */
    for (int i = 0; i < 7; i++) {
        msgpack_pack_ext(pk, ext[i], 5);
        msgpack_pack_ext_body(pk, text, ext[i]);
    }
    msgpack_pack_array(pk, 20); /* array16 */
    for (int i = 0; i < 20; i++)
        msgpack_pack_uint8(pk, (uint8_t)i);
    msgpack_pack_map(pk, 17); /* map16 */
    for (int i = 0; i < 17; i++) {
        msgpack_pack_int(pk, i);
        msgpack_pack_array(pk, 0);
    }
    msgpack_pack_array(pk, 0);
    msgpack_pack_map(pk, 0);
    msgpack_pack_map(pk, 1);
    zp_pack_str(pk, "deep");
    msgpack_pack_array(pk, 1);
    msgpack_pack_array(pk, 1);
    msgpack_pack_map(pk, 0);
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
    const msgpack_object *all = zp_map_get(&w.m.body, "all");
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

/* A valid TASK of n = 4 with its index frame. */
static void valid_task(wire_t *w)
{
    wire_init(w);
    encode(w, &(zp_msg_t){.type = ZP_MSG_TASK, .id = 1, .split = 0, .n = 4});
    add_frame(w, indices, 16);
}

static void header_cut_at_any_byte_is_refused(void **state)
{
    (void)state;
    wire_t full;
    valid_task(&full);
    for (size_t cut = 0; cut < full.sb.size; cut++) {
        wire_t w;
        valid_task(&w);
        w.sb.size = cut;
        expect_refused(&w, "header is not valid msgpack");
    }
    wire_free(&full);
}

static void garbage_after_the_header_is_refused(void **state)
{
    (void)state;
    wire_t w;
    valid_task(&w);
    msgpack_pack_nil(&w.pk);
    msgpack_pack_nil(&w.pk);
    expect_refused(&w, "2 bytes of garbage after the header");
}

static void header_that_is_not_a_map_is_refused(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    msgpack_pack_array(&w.pk, 2);
    msgpack_pack_uint32(&w.pk, 1);
    zp_pack_str(&w.pk, "ready");
    expect_refused(&w, "header is not a msgpack map");
}

static void header_without_version_is_refused(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    msgpack_pack_map(&w.pk, 2);
    kv_s(&w, "t", "ready");
    kv_u(&w, "credit", 1);
    expect_refused(&w, "header has no version 'v'");

    wire_init(&w); /* a version that is not an unsigned integer is no version */
    msgpack_pack_map(&w.pk, 3);
    kv_s(&w, "v", "1");
    kv_s(&w, "t", "ready");
    kv_u(&w, "credit", 1);
    expect_refused(&w, "header has no version 'v'");
}

static void other_wire_version_is_refused(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    msgpack_pack_map(&w.pk, 3);
    kv_u(&w, "v", 2);
    kv_s(&w, "t", "ready");
    kv_u(&w, "credit", 1);
    expect_refused(&w, "wire version 2, expected 1");
}

static void header_without_type_is_refused(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    msgpack_pack_map(&w.pk, 2);
    kv_u(&w, "v", 1);
    kv_u(&w, "t", 3);
    expect_refused(&w, "header has no type 't'");
}

static void unknown_type_is_refused(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    msgpack_pack_map(&w.pk, 2);
    kv_u(&w, "v", 1);
    kv_s(&w, "t", "teleport");
    expect_refused(&w, "unknown message type 'teleport'");

    wire_init(&w); /* a prefix of a known name is not that name */
    msgpack_pack_map(&w.pk, 2);
    kv_u(&w, "v", 1);
    kv_s(&w, "t", "stat");
    expect_refused(&w, "unknown message type 'stat'");
}

static void missing_required_field_is_refused(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    zp_msg_pack_begin(&w.pk, ZP_MSG_TASK, 2);
    kv_u(&w, "id", 1);
    kv_u(&w, "split", 0);
    add_frame(&w, indices, 16);
    expect_refused(&w, "task: missing field 'n'");

    wire_init(&w);
    zp_msg_pack_begin(&w.pk, ZP_MSG_CTL, 0);
    expect_refused(&w, "ctl: missing field 'cmd'");

    wire_init(&w); /* a BATCH that does not name its ring's nonce */
    zp_msg_pack_begin(&w.pk, ZP_MSG_BATCH, 8);
    const char *keys[] = {"slot", "gen", "split", "epoch", "index", "batches", "n", "elems"};
    for (int i = 0; i < 8; i++)
        kv_u(&w, keys[i], 1);
    expect_refused(&w, "batch: missing field 'nonce'");
}

static void string_where_an_unsigned_is_expected_is_refused(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    zp_msg_pack_begin(&w.pk, ZP_MSG_TASK, 3);
    kv_s(&w, "id", "1");
    kv_u(&w, "split", 0);
    kv_u(&w, "n", 4);
    add_frame(&w, indices, 16);
    expect_refused(&w, "field 'id' must be an unsigned integer");
}

static void negative_or_fractional_unsigned_field_is_refused(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    zp_msg_pack_begin(&w.pk, ZP_MSG_READY, 1);
    key(&w, "credit");
    msgpack_pack_int64(&w.pk, -1);
    expect_refused(&w, "field 'credit' must be an unsigned integer");

    wire_init(&w);
    zp_msg_pack_begin(&w.pk, ZP_MSG_READY, 1);
    key(&w, "credit");
    msgpack_pack_double(&w.pk, 2.0);
    expect_refused(&w, "field 'credit' must be an unsigned integer");
}

static void non_string_error_or_cmd_is_refused(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    zp_msg_pack_begin(&w.pk, ZP_MSG_FAIL, 2);
    kv_u(&w, "id", 1);
    kv_u(&w, "error", 5);
    expect_refused(&w, "field 'error' must be a string");

    wire_init(&w);
    zp_msg_pack_begin(&w.pk, ZP_MSG_CTL, 1);
    key(&w, "cmd");
    msgpack_pack_nil(&w.pk);
    expect_refused(&w, "field 'cmd' must be a string");
}

static void error_of_300_bytes_is_refused(void **state)
{
    (void)state;
    char text[301];
    memset(text, 'x', 300);
    text[300] = 0;
    wire_t w;
    wire_init(&w);
    zp_msg_pack_begin(&w.pk, ZP_MSG_FAIL, 2);
    kv_u(&w, "id", 1);
    kv_s(&w, "error", text);
    expect_refused(&w, "field 'error' must be a string shorter than 256 bytes");

    text[256] = 0; /* one byte over: no room for the terminator */
    wire_init(&w);
    zp_msg_pack_begin(&w.pk, ZP_MSG_FAIL, 2);
    kv_u(&w, "id", 1);
    kv_s(&w, "error", text);
    expect_refused(&w, "field 'error' must be a string shorter than 256 bytes");
}

static void cmd_of_32_bytes_is_refused(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    zp_msg_pack_begin(&w.pk, ZP_MSG_CTL, 1);
    kv_s(&w, "cmd", "0123456789abcdef0123456789abcdef");
    expect_refused(&w, "field 'cmd' must be a string shorter than 32 bytes");
}

static void container_claiming_more_elements_than_bytes_is_refused(void **state)
{
    (void)state;
    /* msgpack-c would first allocate room for every claimed element: 192 GiB
     * for the map, 96 GiB for the array */
    wire_t w;
    wire_init(&w);
    msgpack_sbuffer_write(&w.sb, "\xdf\xff\xff\xff\xff\xa1v\x01", 8);
    expect_refused(&w, "header claims more elements than its 8 bytes hold");

    wire_init(&w);
    zp_msg_pack_begin(&w.pk, ZP_MSG_STAT_REP, 1);
    key(&w, "body");
    msgpack_pack_array(&w.pk, UINT32_MAX);
    msgpack_pack_nil(&w.pk);
    expect_refused(&w, "header claims more elements than");

    wire_init(&w); /* the claim is found behind values of every format */
    zp_msg_pack_begin(&w.pk, ZP_MSG_STAT_REP, 1);
    key(&w, "body");
    msgpack_pack_array(&w.pk, 2);
    pack_every_kind(&w.pk);
    msgpack_pack_map(&w.pk, UINT32_MAX);
    expect_refused(&w, "header claims more elements than");

    wire_init(&w); /* 16-bit counts too: 40 elements claimed, 20 bytes sent */
    zp_msg_pack_begin(&w.pk, ZP_MSG_STAT_REP, 1);
    key(&w, "body");
    msgpack_pack_array(&w.pk, 40);
    expect_refused(&w, "header claims more elements than");
}

/* ---- refusals: bodies ------------------------------------------------------------------ */

static void event_whose_body_is_an_array_is_refused(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    zp_msg_pack_begin(&w.pk, ZP_MSG_EVENT, 1);
    key(&w, "body");
    msgpack_pack_array(&w.pk, 0);
    expect_refused(&w, "event: body must be a map");
}

static void stat_rep_whose_body_is_a_map_is_refused(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    zp_msg_pack_begin(&w.pk, ZP_MSG_STAT_REP, 1);
    key(&w, "body");
    msgpack_pack_map(&w.pk, 0);
    expect_refused(&w, "stat_rep: body must be an array");
}

static void body_that_is_a_scalar_or_missing_is_refused(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    zp_msg_pack_begin(&w.pk, ZP_MSG_EVENT, 1);
    kv_s(&w, "body", "kind=up");
    expect_refused(&w, "field 'body' must be a map or an array");

    wire_init(&w);
    zp_msg_pack_begin(&w.pk, ZP_MSG_EVENT, 0);
    expect_refused(&w, "event: missing field 'body'");
}

/* ---- refusals: frames and sizes -------------------------------------------------------- */

static void wrong_frame_count_is_refused(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    encode(&w, &(zp_msg_t){.type = ZP_MSG_TASK, .id = 1, .n = 4});
    expect_refused(&w, "task: 1 frames, expected 2");

    wire_init(&w);
    encode(&w, &(zp_msg_t){.type = ZP_MSG_READY, .credit = 1});
    add_frame(&w, indices, 4);
    expect_refused(&w, "ready: 2 frames, expected 1");

    wire_init(&w);
    encode(&w, &(zp_msg_t){.type = ZP_MSG_SAMPLES, .id = 1, .n = 1, .elems = 1});
    add_frame(&w, indices, 4);
    add_frame(&w, labels, 4);
    expect_refused(&w, "samples: 3 frames, expected 4");
}

static void zero_or_too_many_frames_are_refused(void **state)
{
    (void)state;
    wire_t w;
    valid_task(&w);
    w.nframes = 0;
    expect_refused(&w, "0 frames (expected 1..4)");

    valid_task(&w);
    for (int i = 0; i < 3; i++)
        add_frame(&w, indices, 16);
    expect_refused(&w, "5 frames (expected 1..4)");
}

static void task_index_frame_of_the_wrong_size_is_refused(void **state)
{
    (void)state;
    size_t sizes[] = {0, 12, 15, 17, 20};
    for (int i = 0; i < 5; i++) {
        wire_t w;
        char reason[64];
        wire_init(&w);
        encode(&w, &(zp_msg_t){.type = ZP_MSG_TASK, .id = 1, .n = 4});
        add_frame(&w, indices, sizes[i]);
        snprintf(reason, sizeof reason, "task: frame 1 has %zu bytes, header says 16", sizes[i]);
        expect_refused(&w, reason);
    }
}

/* SAMPLES of n = 2, elems = 3 with frame `bad` of `size` bytes instead. */
static void samples_with_frame(wire_t *w, int bad, size_t size)
{
    wire_init(w);
    encode(w, &(zp_msg_t){.type = ZP_MSG_SAMPLES, .id = 5, .split = 1, .n = 2, .elems = 3});
    add_frame(w, indices, bad == 1 ? size : 8);
    add_frame(w, labels, bad == 2 ? size : 8);
    add_frame(w, data, bad == 3 ? size : 24);
}

static void samples_frames_must_match_n_and_elems(void **state)
{
    (void)state;
    wire_t w;
    samples_with_frame(&w, 0, 0);
    expect_accepted(&w);
    wire_free(&w);

    samples_with_frame(&w, 3, 20);
    expect_refused(&w, "samples: frame 3 has 20 bytes, header says 24");
    samples_with_frame(&w, 3, 28);
    expect_refused(&w, "samples: frame 3 has 28 bytes, header says 24");
    samples_with_frame(&w, 1, 4);
    expect_refused(&w, "samples: frame 1 has 4 bytes, header says 8");
    samples_with_frame(&w, 2, 12);
    expect_refused(&w, "samples: frame 2 has 12 bytes, header says 8");
}

/* RESULT of n = 2, elems = 3, dtype `dtype` (0: the field left out), data of `size` bytes. */
static void result_of_dtype(wire_t *w, uint64_t dtype, size_t size)
{
    wire_init(w);
    encode(w, &(zp_msg_t){.type = ZP_MSG_RESULT, .id = 5, .n = 2, .elems = 3, .dtype = dtype,
                          .present = dtype ? ZP_B(dtype) : 0});
    add_frame(w, indices, 8);
    add_frame(w, labels, 8);
    add_frame(w, data, size);
}

static void sample_bytes_follow_the_dtype(void **state)
{
    (void)state;
    wire_t w;
    result_of_dtype(&w, 0, 24); /* no dtype: float32, as senders before it existed */
    expect_accepted(&w);
    assert_int_equal(w.m.dtype, ZP_DTYPE_F32);
    wire_free(&w);
    result_of_dtype(&w, ZP_DTYPE_U8, 6);
    expect_accepted(&w);
    assert_int_equal(w.m.dtype, ZP_DTYPE_U8);
    assert_true(w.m.present & ZP_B(dtype));
    wire_free(&w);
    result_of_dtype(&w, ZP_DTYPE_F32, 24);
    expect_accepted(&w);
    wire_free(&w);
    result_of_dtype(&w, ZP_DTYPE_U8, 24);
    expect_refused(&w, "result: frame 3 has 24 bytes, header says 6");
    result_of_dtype(&w, ZP_DTYPE_F32, 6);
    expect_refused(&w, "result: frame 3 has 6 bytes, header says 24");
    result_of_dtype(&w, 3, 6);
    expect_refused(&w, "result: dtype = 3 is not 1 (float32) or 2 (uint8)");
}

static void n_outside_one_to_max_batch_is_refused(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    encode(&w, &(zp_msg_t){.type = ZP_MSG_TASK, .id = 1, .n = 0});
    add_frame(&w, indices, 0);
    expect_refused(&w, "task: n = 0 is outside 1..1048576");

    wire_init(&w);
    encode(&w, &(zp_msg_t){.type = ZP_MSG_FETCH, .id = 1, .n = ZP_MAX_BATCH + 1});
    add_frame(&w, indices, 0);
    expect_refused(&w, "fetch: n = 1048577 is outside 1..1048576");

    wire_init(&w); /* a huge n must not wrap the size check */
    encode(&w, &(zp_msg_t){.type = ZP_MSG_TASK, .id = 1, .n = 1ull << 62});
    add_frame(&w, indices, 0);
    expect_refused(&w, "task: n = 4611686018427387904 is outside");

    wire_init(&w); /* a batch may hold none (every sample skipped), but not too many */
    encode(&w, &(zp_msg_t){.type = ZP_MSG_BATCH, .n = 0, .elems = 1});
    expect_accepted(&w);
    wire_free(&w);
    wire_init(&w);
    encode(&w, &(zp_msg_t){.type = ZP_MSG_BATCH, .n = ZP_MAX_BATCH + 1, .elems = 1});
    expect_refused(&w, "batch: n = 1048577 is outside 0..1048576");
}

static void n_of_exactly_max_batch_is_accepted(void **state)
{
    (void)state;
    uint32_t *big = calloc(ZP_MAX_BATCH, 4);
    assert_non_null(big);
    wire_t w;
    wire_init(&w);
    encode(&w, &(zp_msg_t){.type = ZP_MSG_FETCH, .id = 1, .n = ZP_MAX_BATCH});
    add_frame(&w, big, (size_t)ZP_MAX_BATCH * 4);
    expect_accepted(&w);
    assert_int_equal(w.m.n, ZP_MAX_BATCH);
    wire_free(&w);
    free(big);
}

static void elems_outside_its_range_is_refused(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    encode(&w, &(zp_msg_t){.type = ZP_MSG_BATCH, .n = 1, .elems = 0});
    expect_refused(&w, "batch: elems = 0 is outside 1..16777216");

    wire_init(&w);
    encode(&w, &(zp_msg_t){.type = ZP_MSG_SAMPLES, .id = 1, .n = 1, .elems = (16u << 20) + 1});
    add_frame(&w, indices, 4);
    add_frame(&w, labels, 4);
    add_frame(&w, data, 4);
    expect_refused(&w, "samples: elems = 16777217 is outside");
}

static void split_other_than_0_or_1_is_refused(void **state)
{
    (void)state;
    wire_t w;
    wire_init(&w);
    encode(&w, &(zp_msg_t){.type = ZP_MSG_TASK, .id = 1, .split = 2, .n = 4});
    add_frame(&w, indices, 16);
    expect_refused(&w, "task: split 2 is not 0 or 1");

    wire_init(&w);
    encode(&w, &(zp_msg_t){.type = ZP_MSG_EPOCH_END, .split = 7});
    expect_refused(&w, "epoch_end: split 7 is not 0 or 1");
}

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

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t next_rand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17; /* xorshift64, fixed seed */
    return (uint32_t)(rng >> 32);
}

/* Valid messages of every type, as seeds for the damage. */
static int make_seeds(wire_t *seeds)
{
    const zp_msg_t fixed[] = {
        {.type = ZP_MSG_READY, .credit = 2},
        {.type = ZP_MSG_TASK, .id = 12345, .split = 1, .n = 4},
        {.type = ZP_MSG_SAMPLES, .id = 1, .n = 2, .elems = 3},
        {.type = ZP_MSG_FAIL, .id = 3, .error = "loader[1]: file vanished"},
        {.type = ZP_MSG_FETCH, .id = 99, .n = 4},
        {.type = ZP_MSG_RESULT, .id = 9, .n = 2, .elems = 3, .offset = 200},
        {.type = ZP_MSG_BATCH, .slot = 1, .gen = 1ull << 40, .n = 64, .elems = 784, .batches = 9},
        {.type = ZP_MSG_FREE, .slot = 1, .gen = 3},
        {.type = ZP_MSG_EPOCH_END, .epoch = 1, .batches = 3, .n = 192},
        {.type = ZP_MSG_END},
        {.type = ZP_MSG_STAT_REQ},
        {.type = ZP_MSG_CTL, .cmd = "down"},
        {.type = ZP_MSG_CTL_REP, .error = "busy", .present = ZP_B(error)},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++, n++) {
        wire_init(&seeds[n]);
        encode(&seeds[n], &fixed[i]);
        uint64_t count = fixed[i].n;
        if (fixed[i].type == ZP_MSG_TASK || fixed[i].type == ZP_MSG_FETCH)
            add_frame(&seeds[n], indices, count * 4);
        if (fixed[i].type == ZP_MSG_SAMPLES || fixed[i].type == ZP_MSG_RESULT) {
            add_frame(&seeds[n], indices, count * 4);
            add_frame(&seeds[n], labels, count * 4);
            add_frame(&seeds[n], data, count * fixed[i].elems * 4);
        }
    }
    wire_init(&seeds[n]);
    zp_msg_pack_begin(&seeds[n].pk, ZP_MSG_EVENT, 1);
    key(&seeds[n], "body");
    msgpack_pack_map(&seeds[n].pk, 3);
    kv_s(&seeds[n], "kind", "epoch");
    kv_u(&seeds[n], "epoch", 4);
    key(&seeds[n], "acc");
    msgpack_pack_double(&seeds[n++].pk, 0.875);
    wire_init(&seeds[n]);
    zp_msg_pack_begin(&seeds[n].pk, ZP_MSG_STAT_REP, 1);
    key(&seeds[n], "body");
    msgpack_pack_array(&seeds[n].pk, 1);
    msgpack_pack_map(&seeds[n].pk, 1);
    kv_u(&seeds[n++], "total", 5);
    for (int i = 0; i < n; i++) {
        expect_accepted(&seeds[i]); /* every seed is valid before the damage */
        zp_msg_release(&seeds[i].m);
    }
    return n;
}

/* Damages `buf` (of *len bytes, capacity cap) in one of several ways. */
static void damage(unsigned char *buf, size_t *len, size_t cap)
{
    static const unsigned char markers[] = {0xdc, 0xdd, 0xde, 0xdf, 0xda, 0xdb, 0xc6, 0xc9, 0xff};
    size_t at = *len ? next_rand() % *len : 0;
    switch (next_rand() % 6) {
    case 0: /* flip a bit */
        if (*len)
            buf[at] ^= (unsigned char)(1u << (next_rand() % 8));
        break;
    case 1: /* any byte */
        if (*len)
            buf[at] = (unsigned char)next_rand();
        break;
    case 2: /* cut */
        *len = at;
        break;
    case 3: /* a container or length marker, then 0xff bytes: a huge count */
        if (*len) {
            buf[at] = markers[next_rand() % sizeof markers];
            for (size_t i = at + 1; i < *len && i < at + 5; i++)
                buf[i] = 0xff;
        }
        break;
    case 4: /* insert a byte */
        if (*len < cap) {
            memmove(buf + at + 1, buf + at, *len - at);
            buf[at] = (unsigned char)next_rand();
            (*len)++;
        }
        break;
    default: /* duplicate a run of bytes at the end */
        if (*len) {
            size_t run = 1 + next_rand() % 8, end = *len;
            for (size_t i = 0; i < run && end < cap; i++, end++)
                buf[end] = buf[at + i < end ? at + i : at];
            *len = end;
        }
        break;
    }
}

static void damaged_headers_never_crash_the_decoder(void **state)
{
    (void)state;
    wire_t seeds[ZP_MSG_COUNT];
    int nseeds = make_seeds(seeds);
    unsigned char buf[512];
    int accepted = 0, refused = 0;
    for (int iter = 0; iter < 20000; iter++) {
        const wire_t *s = &seeds[next_rand() % (uint32_t)nseeds];
        size_t len = s->sb.size;
        assert_true(len <= sizeof buf);
        memcpy(buf, s->sb.data, len);
        for (uint32_t k = 1 + next_rand() % 3; k > 0; k--)
            damage(buf, &len, sizeof buf);
        const void *frames[ZP_MAX_FRAMES] = {buf};
        size_t sizes[ZP_MAX_FRAMES] = {len};
        int nframes = s->nframes;
        for (int i = 1; i < nframes; i++)
            frames[i] = s->frame[i], sizes[i] = s->size[i];
        if (next_rand() % 16 == 0) /* now and then, the wrong number of frames */
            nframes = 1 + (int)(next_rand() % ZP_MAX_FRAMES);
        zp_msg_t m;
        char why[256] = "";
        int rc = zp_msg_decode(&m, frames, sizes, nframes, why, sizeof why);
        if (rc == 0) {
            accepted++;
            assert_true(m.type > ZP_MSG_NONE && m.type < ZP_MSG_COUNT);
        } else {
            refused++;
            assert_int_equal(rc, ZP_EPROTO);
            assert_true(why[0] != 0);
        }
        zp_msg_release(&m);
        zp_msg_release(&m); /* safe twice */
    }
    print_message("fuzz: %d accepted, %d refused\n", accepted, refused);
    assert_true(refused > 10000); /* the damage does reach the checks */
    for (int i = 0; i < nseeds; i++)
        wire_free(&seeds[i]);
}

/* ---- overflow-safe checks on wire values ---------------------------------------------- */

/* prefetch.c checked a RESULT with `offset + n <= fetch size`: offset
 * UINT64_MAX and n 1 wrap to 0 and passed, then indexed far past the fetch. */
static void a_span_near_uint64_max_does_not_wrap_into_range(void **state)
{
    (void)state;
    assert_true(zp_span_fits(0, 10, 10));
    assert_true(zp_span_fits(10, 0, 10));
    assert_true(zp_span_fits(3, 7, 10));
    assert_false(zp_span_fits(3, 8, 10));
    assert_false(zp_span_fits(11, 0, 10));
    assert_false(zp_span_fits(UINT64_MAX, 1, 10));
    assert_false(zp_span_fits(1, UINT64_MAX, 10));
    assert_false(zp_span_fits(UINT64_MAX - 4, 5, 10));
    assert_false(zp_span_fits(UINT32_MAX, (uint64_t)UINT32_MAX + 2, 100));
    assert_true(zp_span_fits(UINT64_MAX - 1, 1, UINT64_MAX));
    assert_false(zp_span_fits(UINT64_MAX, 1, UINT64_MAX));
}

/* cache.c added a READY's u64 credit, cast to int64, to the loader's: 2^63
 * and more became negative (no tasks ever), and near INT64_MAX the signed
 * sum overflowed. The sum saturates at the cap instead. */
static void a_credit_near_uint64_max_saturates_at_the_cap(void **state)
{
    (void)state;
    assert_int_equal(zp_credit_add(0, 1, 64), 1);
    assert_int_equal(zp_credit_add(10, 54, 64), 64);
    assert_int_equal(zp_credit_add(10, 53, 64), 63);
    assert_int_equal(zp_credit_add(63, 0, 64), 63);
    assert_int_equal(zp_credit_add(64, 1, 64), 64);
    assert_int_equal(zp_credit_add(3, UINT64_MAX, 64), 64);
    assert_int_equal(zp_credit_add(3, (uint64_t)INT64_MAX, 64), 64);
    assert_int_equal(zp_credit_add(3, (uint64_t)INT64_MAX + 1, 64), 64);
    assert_int_equal(zp_credit_add(3, UINT32_MAX, 64), 64);
    assert_int_equal(zp_credit_add(0, (uint64_t)UINT32_MAX + 1, 64), 64);
}

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
    const struct CMUnitTest refusals[] = {
        cmocka_unit_test(header_cut_at_any_byte_is_refused),
        cmocka_unit_test(garbage_after_the_header_is_refused),
        cmocka_unit_test(header_that_is_not_a_map_is_refused),
        cmocka_unit_test(header_without_version_is_refused),
        cmocka_unit_test(other_wire_version_is_refused),
        cmocka_unit_test(header_without_type_is_refused),
        cmocka_unit_test(unknown_type_is_refused),
        cmocka_unit_test(container_claiming_more_elements_than_bytes_is_refused),
        cmocka_unit_test(missing_required_field_is_refused),
        cmocka_unit_test(string_where_an_unsigned_is_expected_is_refused),
        cmocka_unit_test(negative_or_fractional_unsigned_field_is_refused),
        cmocka_unit_test(non_string_error_or_cmd_is_refused),
        cmocka_unit_test(error_of_300_bytes_is_refused),
        cmocka_unit_test(cmd_of_32_bytes_is_refused),
        cmocka_unit_test(event_whose_body_is_an_array_is_refused),
        cmocka_unit_test(stat_rep_whose_body_is_a_map_is_refused),
        cmocka_unit_test(body_that_is_a_scalar_or_missing_is_refused),
        cmocka_unit_test(wrong_frame_count_is_refused),
        cmocka_unit_test(zero_or_too_many_frames_are_refused),
        cmocka_unit_test(task_index_frame_of_the_wrong_size_is_refused),
        cmocka_unit_test(samples_frames_must_match_n_and_elems),
        cmocka_unit_test(sample_bytes_follow_the_dtype),
        cmocka_unit_test(n_outside_one_to_max_batch_is_refused),
        cmocka_unit_test(n_of_exactly_max_batch_is_accepted),
        cmocka_unit_test(elems_outside_its_range_is_refused),
        cmocka_unit_test(split_other_than_0_or_1_is_refused),
    };
    const struct CMUnitTest fuzz[] = {
        cmocka_unit_test(damaged_headers_never_crash_the_decoder),
        cmocka_unit_test(a_span_near_uint64_max_does_not_wrap_into_range),
        cmocka_unit_test(a_credit_near_uint64_max_saturates_at_the_cap),
    };
    int failed = 0;
    failed += cmocka_run_group_tests_name("msg: round trips", round_trips, setup, NULL);
    failed += cmocka_run_group_tests_name("msg: refusals", refusals, setup, NULL);
    failed += cmocka_run_group_tests_name("msg: fuzz", fuzz, setup, NULL);
    return failed ? 1 : 0;
}

/* Unit tests of the wire codec: every malformed header or frame set is
 * refused with ZP_EPROTO and a reason; random damage to valid headers never
 * crashes the decoder (round trips: test_msg.c). */
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
    zp_msg_pack_str(&w.pk, "ready");
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
    expect_refused(&w, "0 frames (expected 1..5)");

    valid_task(&w);
    for (int i = 0; i < 4; i++)
        add_frame(&w, indices, 16);
    expect_refused(&w, "6 frames (expected 1..5)");
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

static void result_of_dtype(wire_t *w, uint64_t dtype, size_t size);

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

    /* a fifth frame is the samples' crops, one zp_crop_t each */
    static const uint8_t crops[2 * sizeof(zp_crop_t) + 1];
    samples_with_frame(&w, 0, 0);
    add_frame(&w, crops, 2 * sizeof(zp_crop_t));
    expect_accepted(&w);
    wire_free(&w);
    samples_with_frame(&w, 0, 0);
    add_frame(&w, crops, 2 * sizeof(zp_crop_t) + 1);
    expect_refused(&w, "samples: frame 4 has 57 bytes, header says 56");
    result_of_dtype(&w, 0, 24);
    add_frame(&w, crops, sizeof(zp_crop_t));
    expect_refused(&w, "result: frame 4 has 28 bytes, header says 56");
    /* other messages have no such frame */
    wire_init(&w);
    encode(&w, &(zp_msg_t){.type = ZP_MSG_TASK, .id = 1, .n = 2});
    add_frame(&w, indices, 8);
    add_frame(&w, crops, 2 * sizeof(zp_crop_t));
    expect_refused(&w, "task: 3 frames, expected 2");
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
    failed += cmocka_run_group_tests_name("msg: refusals", refusals, setup, NULL);
    failed += cmocka_run_group_tests_name("msg: fuzz", fuzz, setup, NULL);
    return failed ? 1 : 0;
}

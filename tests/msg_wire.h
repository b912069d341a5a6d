/* msg_wire.h — a message on the wire, built by hand for the codec's tests
 * (test_msg.c: round trips; test_msg_refused.c: what the decoder refuses).
 * Include after cmocka.h and schemas/msg.h. */
#ifndef ZP_TEST_MSG_WIRE_H
#define ZP_TEST_MSG_WIRE_H

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

static inline void wire_init(wire_t *w)
{
    memset(w, 0, sizeof *w);
    msgpack_sbuffer_init(&w->sb);
    msgpack_packer_init(&w->pk, &w->sb, msgpack_sbuffer_write);
    w->nframes = 1;
}

static inline void wire_free(wire_t *w)
{
    zp_msg_release(&w->m);
    msgpack_sbuffer_destroy(&w->sb);
}

static inline void add_frame(wire_t *w, const void *data, size_t size)
{
    assert_true(w->nframes <= ZP_MAX_FRAMES);
    w->frame[w->nframes] = data;
    w->size[w->nframes++] = size;
}

static inline int wire_decode(wire_t *w)
{
    w->frame[0] = w->sb.data;
    w->size[0] = w->sb.size;
    w->why[0] = 0;
    return zp_msg_decode(&w->m, w->frame, w->size, w->nframes, w->why, sizeof w->why);
}

static inline void encode(wire_t *w, const zp_msg_t *in)
{
    assert_int_equal(zp_msg_encode(in, &w->sb), 0);
}

static inline void expect_accepted(wire_t *w)
{
    int rc = wire_decode(w);
    if (rc)
        fail_msg("refused (%d): %s", rc, w->why);
}

/* Decodes, asserts ZP_EPROTO with `reason` in the message, and frees w. */
static inline void expect_refused(wire_t *w, const char *reason)
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

static inline void key(wire_t *w, const char *k) { zp_msg_pack_str(&w->pk, k); }

static inline void kv_u(wire_t *w, const char *k, uint64_t v)
{
    key(w, k);
    msgpack_pack_uint64(&w->pk, v);
}

static inline void kv_s(wire_t *w, const char *k, const char *v)
{
    key(w, k);
    zp_msg_pack_str(&w->pk, v);
}

/* Payloads. The decoder only looks at their sizes; they hold values anyway. */
static uint32_t indices[64] __attribute__((unused));
static int32_t labels[64] __attribute__((unused));
static float data[64 * 8] __attribute__((unused));

static inline int setup(void **state)
{
    (void)state;
    for (int i = 0; i < 64; i++)
        indices[i] = 1000u + (uint32_t)i, labels[i] = i % 10;
    for (int i = 0; i < 64 * 8; i++)
        data[i] = (float)i / 8.0f;
    return 0;
}


/* Values of every msgpack format. Their data bytes look like headers of huge
 * containers (0xdd, 0xdf then 0xff), so a size check that loses its place
 * inside them refuses the whole header. */
static inline void pack_every_kind(msgpack_packer *pk)
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
    zp_msg_pack_str(pk, "deep");
    msgpack_pack_array(pk, 1);
    msgpack_pack_array(pk, 1);
    msgpack_pack_map(pk, 0);
}

#endif

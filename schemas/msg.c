/* msg.c — encoder, decoder and validator generated from the lists in msg.h. */
#include "schemas/msg.h"
#include "schemas/errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

_Static_assert(sizeof(zp_crop_t) == 28, "zp_crop_t is 7 int32s, unpadded, on the wire");

typedef struct {
    const char *wire;
    int frames;
    uint32_t required;
} spec_t;

#define ZP_MSG_SPEC(name, wire, frames, req, doc) [ZP_MSG_##name] = {wire, frames, req},
static const spec_t SPECS[ZP_MSG_COUNT] = {ZP_MSGS(ZP_MSG_SPEC)};
#undef ZP_MSG_SPEC

#define ZP_FIELD_NAME(name, kind, doc) #name,
static const char *const FIELD_NAMES[ZP_F_COUNT] = {ZP_FIELDS(ZP_FIELD_NAME)};
#undef ZP_FIELD_NAME
#define ZP_FIELD_KIND(name, kind, doc) #kind[0],
static const char FIELD_KINDS[ZP_F_COUNT] = {ZP_FIELDS(ZP_FIELD_KIND)};
#undef ZP_FIELD_KIND

const char *zp_msg_name(zp_msg_type_t t)
{
    return (t > ZP_MSG_NONE && t < ZP_MSG_COUNT) ? SPECS[t].wire : "?";
}

static uint64_t *u_field(zp_msg_t *m, int f)
{
    uint64_t *slots[ZP_F_COUNT] = {
        [ZP_F_id] = &m->id,       [ZP_F_credit] = &m->credit, [ZP_F_split] = &m->split,
        [ZP_F_epoch] = &m->epoch, [ZP_F_n] = &m->n,           [ZP_F_offset] = &m->offset,
        [ZP_F_elems] = &m->elems, [ZP_F_dtype] = &m->dtype, [ZP_F_slot] = &m->slot,
        [ZP_F_gen] = &m->gen,     [ZP_F_nonce] = &m->nonce,   [ZP_F_index] = &m->index,
        [ZP_F_skipped] = &m->skipped, [ZP_F_batches] = &m->batches, [ZP_F_fp] = &m->fp,
        [ZP_F_plan] = &m->plan};
    return slots[f];
}

static int key_is(const msgpack_object *k, const char *s)
{
    return k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(s) &&
           memcmp(k->via.str.ptr, s, k->via.str.size) == 0;
}

const msgpack_object *zp_msg_map_get(const msgpack_object *map, const char *key)
{
    if (!map || map->type != MSGPACK_OBJECT_MAP)
        return NULL;
    for (uint32_t i = 0; i < map->via.map.size; i++)
        if (key_is(&map->via.map.ptr[i].key, key))
            return &map->via.map.ptr[i].val;
    return NULL;
}

double zp_msg_map_num(const msgpack_object *map, const char *key, double fallback)
{
    const msgpack_object *v = zp_msg_map_get(map, key);
    if (!v)
        return fallback;
    switch (v->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return (double)v->via.u64;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return (double)v->via.i64;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return v->via.f64;
    default: return fallback;
    }
}

const char *zp_msg_map_str(const msgpack_object *map, const char *key, char *buf, size_t len)
{
    const msgpack_object *v = zp_msg_map_get(map, key);
    buf[0] = 0;
    if (v && v->type == MSGPACK_OBJECT_STR)
        snprintf(buf, len, "%.*s", (int)v->via.str.size, v->via.str.ptr);
    return buf;
}

__attribute__((format(printf, 3, 4))) static int reject(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return ZP_EPROTO;
}

/* Stores one header field; `why` on a type error. */
static int take_field(zp_msg_t *m, int f, const msgpack_object *v, char *why, size_t len)
{
    switch (FIELD_KINDS[f]) {
    case 'U':
        if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return reject(why, len, "field '%s' must be an unsigned integer", FIELD_NAMES[f]);
        *u_field(m, f) = v->via.u64;
        break;
    case 'S': {
        char *dst = f == ZP_F_error ? m->error : m->cmd;
        size_t cap = f == ZP_F_error ? sizeof m->error : sizeof m->cmd;
        if (v->type != MSGPACK_OBJECT_STR || v->via.str.size >= cap)
            return reject(why, len, "field '%s' must be a string shorter than %zu bytes",
                          FIELD_NAMES[f], cap);
        memcpy(dst, v->via.str.ptr, v->via.str.size);
        dst[v->via.str.size] = 0;
        break;
    }
    case 'M':
        if (v->type != MSGPACK_OBJECT_MAP && v->type != MSGPACK_OBJECT_ARRAY)
            return reject(why, len, "field '%s' must be a map or an array", FIELD_NAMES[f]);
        m->body = *v;
        break;
    }
    m->present |= 1u << f;
    return 0;
}

static int check_header(zp_msg_t *m, const msgpack_object *h, char *why, size_t len)
{
    if (h->type != MSGPACK_OBJECT_MAP)
        return reject(why, len, "header is not a msgpack map");
    const msgpack_object *v = zp_msg_map_get(h, "v"), *t = zp_msg_map_get(h, "t");
    if (!v || v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return reject(why, len, "header has no version 'v'");
    if (v->via.u64 != ZP_WIRE_VERSION)
        return reject(why, len, "wire version %llu, expected %d", (unsigned long long)v->via.u64,
                      ZP_WIRE_VERSION);
    if (!t || t->type != MSGPACK_OBJECT_STR)
        return reject(why, len, "header has no type 't'");
    for (int i = 1; i < ZP_MSG_COUNT; i++)
        if (key_is(t, SPECS[i].wire))
            m->type = (zp_msg_type_t)i;
    if (m->type == ZP_MSG_NONE)
        return reject(why, len, "unknown message type '%.*s'", (int)(t->via.str.size > 32 ? 32 : t->via.str.size), t->via.str.ptr);
    for (uint32_t i = 0; i < h->via.map.size; i++) {
        const msgpack_object *k = &h->via.map.ptr[i].key;
        for (int f = 0; f < ZP_F_COUNT; f++)
            if (key_is(k, FIELD_NAMES[f])) {
                int rc = take_field(m, f, &h->via.map.ptr[i].val, why, len);
                if (rc)
                    return rc;
            }
    }
    uint32_t missing = SPECS[m->type].required & ~m->present;
    for (int f = 0; f < ZP_F_COUNT; f++)
        if (missing & (1u << f))
            return reject(why, len, "%s: missing field '%s'", SPECS[m->type].wire, FIELD_NAMES[f]);
    return 0;
}

/* Payload sizes must agree with the header. */
static int check_payload(zp_msg_t *m, char *why, size_t len)
{
    const char *name = SPECS[m->type].wire;
    /* SAMPLES and RESULT may end in a frame of crops */
    int crops = (m->type == ZP_MSG_SAMPLES || m->type == ZP_MSG_RESULT) &&
                m->nframes == SPECS[m->type].frames + 1;
    if (m->nframes != SPECS[m->type].frames && !crops)
        return reject(why, len, "%s: %d frames, expected %d", name, m->nframes,
                      SPECS[m->type].frames);
    if ((m->present & ZP_B(split)) && m->split > 1)
        return reject(why, len, "%s: split %llu is not 0 or 1", name, (unsigned long long)m->split);
    /* EPOCH_END counts a whole epoch; a BATCH whose every sample was skipped holds none */
    unsigned least = m->type == ZP_MSG_BATCH ? 0 : 1;
    if ((m->present & ZP_B(n)) && m->type != ZP_MSG_EPOCH_END && m->type != ZP_MSG_REDUCE &&
        (m->n < least || m->n > ZP_MAX_BATCH))
        return reject(why, len, "%s: n = %llu is outside %u..%u", name, (unsigned long long)m->n,
                      least, ZP_MAX_BATCH);
    if ((m->present & ZP_B(elems)) && (m->elems < 1 || m->elems > ZP_MAX_ELEMS))
        return reject(why, len, "%s: elems = %llu is outside 1..%u", name,
                      (unsigned long long)m->elems, ZP_MAX_ELEMS);
    if ((m->present & ZP_B(dtype)) && m->dtype != ZP_DTYPE_F32 && m->dtype != ZP_DTYPE_U8)
        return reject(why, len, "%s: dtype = %llu is not 1 (float32) or 2 (uint8)", name,
                      (unsigned long long)m->dtype);
    if (!(m->present & ZP_B(dtype)))
        m->dtype = ZP_DTYPE_F32;
    size_t want[ZP_MAX_FRAMES] = {0};
    switch (m->type) {
    case ZP_MSG_TASK:
    case ZP_MSG_FETCH: want[1] = m->n * 4; break;
    case ZP_MSG_SAMPLES:
    case ZP_MSG_RESULT:
        want[1] = want[2] = m->n * 4;
        want[3] = m->n * m->elems * zp_dtype_size(m->dtype);
        if (crops)
            want[4] = m->n * sizeof(zp_crop_t);
        break;
    case ZP_MSG_VALUES: /* values of their own sizes, each at least its 40-byte header */
        if (m->frame_size[1] < m->n * 40)
            return reject(why, len, "values: frame 1 has %zu bytes, too few for %llu values",
                          m->frame_size[1], (unsigned long long)m->n);
        want[1] = m->frame_size[1];
        break;
    case ZP_MSG_REDUCE:
        if (m->n > (1ull << 30))
            return reject(why, len, "reduce: n = %llu is above 2^30", (unsigned long long)m->n);
        want[1] = m->n * 4;
        want[2] = m->elems * 8;
        break;
    case ZP_MSG_EVENT:
        if (m->body.type != MSGPACK_OBJECT_MAP)
            return reject(why, len, "event: body must be a map");
        break;
    case ZP_MSG_STAT_REP:
        if (m->body.type != MSGPACK_OBJECT_ARRAY)
            return reject(why, len, "stat_rep: body must be an array");
        break;
    default: break;
    }
    for (int i = 1; i < m->nframes; i++)
        if (m->frame_size[i] != want[i])
            return reject(why, len, "%s: frame %d has %zu bytes, header says %zu", name, i,
                          m->frame_size[i], want[i]);
    return 0;
}

/* msgpack-c allocates a container's elements before it reads them, so a
 * 5-byte header that claims 4 billion of them asks for 192 GiB. Every element
 * takes at least one byte of its own: returns 0 when a 16- or 32-bit
 * container brings the elements claimed so far in p[0..n) past n. Truncation
 * and bad bytes are left for msgpack to report. */
static int counts_fit(const unsigned char *p, size_t n)
{
    /* formats 0xc4..0xdf: bytes of length, fixed bytes after it, elements per count */
    static const unsigned char fmt[28][3] = {
        {1, 0, 0}, {2, 0, 0}, {4, 0, 0},                        /* bin 8, 16, 32 */
        {1, 1, 0}, {2, 1, 0}, {4, 1, 0},                        /* ext 8, 16, 32 */
        {0, 4, 0}, {0, 8, 0},                                   /* float 32, 64 */
        {0, 1, 0}, {0, 2, 0}, {0, 4, 0}, {0, 8, 0},             /* uint 8..64 */
        {0, 1, 0}, {0, 2, 0}, {0, 4, 0}, {0, 8, 0},             /* int 8..64 */
        {0, 2, 0}, {0, 3, 0}, {0, 5, 0}, {0, 9, 0}, {0, 17, 0}, /* fixext 1..16 */
        {1, 0, 0}, {2, 0, 0}, {4, 0, 0},                        /* str 8, 16, 32 */
        {2, 0, 1}, {4, 0, 1}, {2, 0, 2}, {4, 0, 2},             /* array 16, 32, map 16, 32 */
    };
    uint64_t claimed = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i++];
        if (c < 0xc4 || c >= 0xe0) {
            if (c >= 0x80 && c <= 0x9f) /* fixmap, fixarray */
                claimed += (c & 0x0f) * (c <= 0x8f ? 2u : 1u);
            else if (c >= 0xa0 && c <= 0xbf) /* fixstr */
                i += c & 0x1f;
            continue; /* fixint, nil, bool (and the unused 0xc1) */
        }
        size_t w = fmt[c - 0xc4][0], skip = fmt[c - 0xc4][1], per = fmt[c - 0xc4][2];
        if (n - i < w)
            return 1;
        uint64_t len = 0;
        for (size_t k = 0; k < w; k++)
            len = len << 8 | p[i++];
        if (per)
            claimed += len * per;
        else if (skip + len > n - i)
            return 1;
        else
            i += skip + len;
        if (per && claimed > n)
            return 0;
    }
    return 1;
}

int zp_msg_decode(zp_msg_t *m, const void *const *frames, const size_t *sizes, int nframes,
                  char *why, size_t whylen)
{
    memset(m, 0, sizeof *m);
    if (nframes < 1 || nframes > ZP_MAX_FRAMES)
        return reject(why, whylen, "%d frames (expected 1..%d)", nframes, ZP_MAX_FRAMES);
    m->nframes = nframes;
    for (int i = 0; i < nframes; i++) {
        m->frame[i] = frames[i];
        m->frame_size[i] = sizes[i];
    }
    msgpack_unpacked_init(&m->unpacked);
    m->has_unpacked = 1;
    size_t off = 0;
    if (!counts_fit(frames[0], sizes[0]))
        return reject(why, whylen, "header claims more elements than its %zu bytes hold", sizes[0]);
    if (msgpack_unpack_next(&m->unpacked, frames[0], sizes[0], &off) != MSGPACK_UNPACK_SUCCESS)
        return reject(why, whylen, "header is not valid msgpack (%zu bytes)", sizes[0]);
    if (off != sizes[0])
        return reject(why, whylen, "%zu bytes of garbage after the header", sizes[0] - off);
    int rc = check_header(m, &m->unpacked.data, why, whylen);
    return rc ? rc : check_payload(m, why, whylen);
}

void zp_msg_release(zp_msg_t *m)
{
    if (m->has_unpacked)
        msgpack_unpacked_destroy(&m->unpacked);
    m->has_unpacked = 0;
}

void zp_msg_pack_str(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

void zp_msg_pack_begin(msgpack_packer *pk, zp_msg_type_t t, int extra)
{
    msgpack_pack_map(pk, 2 + (uint32_t)extra);
    zp_msg_pack_str(pk, "v");
    msgpack_pack_uint32(pk, ZP_WIRE_VERSION);
    zp_msg_pack_str(pk, "t");
    zp_msg_pack_str(pk, SPECS[t].wire);
}

int zp_msg_encode(const zp_msg_t *m, msgpack_sbuffer *sb)
{
    if (m->type <= ZP_MSG_NONE || m->type >= ZP_MSG_COUNT)
        return ZP_EINVAL;
    uint32_t req = SPECS[m->type].required;
    if (req & ZP_B(body))
        return ZP_EINVAL; /* packed by the caller */
    req |= m->present & ~ZP_B(body); /* optional fields the sender set: CTL_REP's error, ... */
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    zp_msg_pack_begin(&pk, m->type, __builtin_popcount(req));
    zp_msg_t *mm = (zp_msg_t *)m;
    for (int f = 0; f < ZP_F_COUNT; f++) {
        if (!(req & (1u << f)))
            continue;
        zp_msg_pack_str(&pk, FIELD_NAMES[f]);
        if (FIELD_KINDS[f] == 'U')
            msgpack_pack_uint64(&pk, *u_field(mm, f));
        else
            zp_msg_pack_str(&pk, f == ZP_F_error ? m->error : m->cmd);
    }
    return 0;
}

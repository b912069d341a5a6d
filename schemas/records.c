/* records.c — the field tables of records.h and the one reader of records. */
#include "schemas/records.h"
#include "schemas/msg.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* <NAME>_T: the struct of record NAME, so that a row finds its member's offset. */
typedef zp_rec_head_t HEAD_T;
#define ALIAS_(NAME, name, KIND, event, doc) typedef zp_rec_##name##_t NAME##_T;
ZP_RECORDS(ALIAS_)
#undef ALIAS_

#define ROW_(REC, key, type, fallback, doc)                                                        \
    {#key, #type[0], fallback, offsetof(REC##_T, key), sizeof(((REC##_T *)0)->key), doc},
/* HEAD_FIELDS[], and NAME_FIELDS[] for each record: one row per field. */
static const zp_rec_field_t HEAD_FIELDS[] = {ZP_RECORD_HEAD(ROW_)};
#define TABLE_(NAME, name, KIND, event, doc)                                                       \
    static const zp_rec_field_t NAME##_FIELDS[] = {ZP_RECORD_##NAME(ROW_)};
ZP_RECORDS(TABLE_)
#undef TABLE_

typedef struct {
    int kind;
    const char *event, *doc;
    const zp_rec_field_t *fields;
    int nfields;
} record_t;

#define RECORD_ROW_(NAME, name, KIND, event, doc)                                                  \
    [ZP_REC_##NAME] = {ZP_KIND_##KIND, event, doc, NAME##_FIELDS,                                 \
                       (int)(sizeof NAME##_FIELDS / sizeof NAME##_FIELDS[0])},
static const record_t RECORDS[ZP_REC_COUNT] = {
    [ZP_REC_NONE] = {-1, "", "the head every record starts with", HEAD_FIELDS,
                     (int)(sizeof HEAD_FIELDS / sizeof HEAD_FIELDS[0])},
    ZP_RECORDS(RECORD_ROW_)};
#undef RECORD_ROW_

#define KIND_NAME_(NAME, wire, doc) wire,
static const char *const KIND_NAMES[] = {ZP_RECORD_KINDS(KIND_NAME_)};
#undef KIND_NAME_

const zp_rec_field_t *zp_records_fields(zp_record_type_t t, int *n)
{
    if ((int)t < 0 || t >= ZP_REC_COUNT) {
        *n = 0;
        return NULL;
    }
    *n = RECORDS[t].nfields;
    return RECORDS[t].fields;
}

const char *zp_records_kind_name(int kind)
{
    return kind >= 0 && kind < ZP_KIND_COUNT ? KIND_NAMES[kind] : "?";
}

int zp_records_kind(zp_record_type_t t)
{
    return t > ZP_REC_NONE && t < ZP_REC_COUNT ? RECORDS[t].kind : -1;
}

const char *zp_records_event(zp_record_type_t t)
{
    return t > ZP_REC_NONE && t < ZP_REC_COUNT ? RECORDS[t].event : "";
}

const char *zp_records_doc(zp_record_type_t t)
{
    return (int)t >= 0 && t < ZP_REC_COUNT ? RECORDS[t].doc : "";
}

/* An integer field: an integer as it is, a float truncated (-1 when it is
 * not finite or beyond int64). */
static int64_t as_int(const msgpack_object *v)
{
    if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        return v->via.u64 > INT64_MAX ? INT64_MAX : (int64_t)v->via.u64;
    if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return v->via.i64;
    return isfinite(v->via.f64) && fabs(v->via.f64) < 9e18 ? (int64_t)v->via.f64 : -1;
}

static int is_number(const msgpack_object *v)
{
    return v->type == MSGPACK_OBJECT_POSITIVE_INTEGER || v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ||
           v->type == MSGPACK_OBJECT_FLOAT32 || v->type == MSGPACK_OBJECT_FLOAT64;
}

/* Reads one field into its member; 1 when the body had it with a usable type. */
static int read_field(const zp_rec_field_t *f, const msgpack_object *body, char *base)
{
    const msgpack_object *v = zp_msg_map_get(body, f->key);
    void *dst = base + f->offset;
    switch (f->type) {
    case 'I': {
        int64_t x = v && is_number(v) ? as_int(v) : (int64_t)f->fallback;
        memcpy(dst, &x, sizeof x);
        return v && is_number(v);
    }
    case 'N': {
        double x = zp_msg_map_num(body, f->key, f->fallback);
        memcpy(dst, &x, sizeof x);
        return v && is_number(v);
    }
    case 'A': {
        const msgpack_object *x = v && v->type == MSGPACK_OBJECT_ARRAY ? v : NULL;
        memcpy(dst, &x, sizeof x);
        return x != NULL;
    }
    default: /* S, T */
        zp_msg_map_str(body, f->key, dst, f->size);
        return v && v->type == MSGPACK_OBJECT_STR;
    }
}

/* Every field of a table into the struct at `out`, whose first member is `present`. */
static void read_fields(const record_t *r, const msgpack_object *body, void *out)
{
    uint64_t present = 0;
    for (int i = 0; i < r->nfields; i++)
        present |= (uint64_t)read_field(&r->fields[i], body, out) << i;
    memcpy(out, &present, sizeof present);
}

zp_record_type_t zp_records_head(const msgpack_object *body, zp_rec_head_t *h)
{
    read_fields(&RECORDS[ZP_REC_NONE], body, h);
    if (!body || body->type != MSGPACK_OBJECT_MAP)
        return ZP_REC_NONE;
    for (int t = ZP_REC_NONE + 1; t < ZP_REC_COUNT; t++)
        if (!strcmp(h->kind, KIND_NAMES[RECORDS[t].kind]) &&
            (RECORDS[t].kind != ZP_KIND_METRIC || !strcmp(h->event, RECORDS[t].event)))
            return (zp_record_type_t)t;
    return ZP_REC_NONE;
}

zp_record_type_t zp_records_decode(zp_record_type_t t, const msgpack_object *body, void *out)
{
    if (t <= ZP_REC_NONE || t >= ZP_REC_COUNT)
        return ZP_REC_NONE;
    read_fields(&RECORDS[t], body, out);
    return t;
}

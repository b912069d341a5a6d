/* tb.c — the TensorBoard writer (tb.h): records into scalars, thinned per tag,
 * each an Event (protobuf-c, schemas/tensorboard.proto) in a TFRecord frame. */
#define _GNU_SOURCE
#include "stages/logger/tb.h"
#include "pipeline/base/files.h"
#include "pipeline/base/log.h"
#include "schemas/errors.h"
#include "schemas/records.h"
#include "schemas/tensorboard.pb-c.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    char tag[ZP_TB_TAG_MAX];
    int64_t last_step, gap, at_gap; /* thinning: tb.h */
} tag_t;

struct zp_tb {
    FILE *f;
    char path[PATH_MAX];
    int failed;
    double t0;          /* wall time the writer opened: the stats' x axis starts there */
    int64_t train_step; /* the last train step heard of */
    int64_t dropped_tags;
    tag_t tags[ZP_TB_TAGS_MAX];
    int ntags;
};

/* ---- CRC-32C, reflected polynomial 0x82f63b78, one table -------------------------------- */

static uint32_t crc_table[256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t zp_tb_crc32c(const void *p, size_t n)
{
    if (!crc_table[1])
        crc_init();
    const unsigned char *b = p;
    uint32_t c = 0xffffffffu;
    while (n--)
        c = crc_table[(c ^ *b++) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

uint32_t zp_tb_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/* ---- framing ---------------------------------------------------------------------------- */

static void put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* One Event in a TFRecord frame. 0, or -1 once the file failed. */
static int write_event(zp_tb_t *tb, const Tensorboard__Event *ev)
{
    if (tb->failed)
        return -1;
    unsigned char buf[64 + ZP_TB_TAG_MAX], head[12], tail[4];
    size_t n = tensorboard__event__get_packed_size(ev);
    if (n > sizeof buf)
        return 0; /* cannot happen: a tag is at most ZP_TB_TAG_MAX bytes */
    tensorboard__event__pack(ev, buf);
    put_le(head, n, 8);
    put_le(head + 8, zp_tb_mask(zp_tb_crc32c(head, 8)), 4);
    put_le(tail, zp_tb_mask(zp_tb_crc32c(buf, n)), 4);
    if (fwrite(head, 1, 12, tb->f) != 12 || fwrite(buf, 1, n, tb->f) != n ||
        fwrite(tail, 1, 4, tb->f) != 4) {
        zp_error("%s: %s; TensorBoard scalars stop here", tb->path, strerror(errno));
        tb->failed = 1;
        return -1;
    }
    return 0;
}

int zp_tb_create(zp_tb_t **out, const char *dir)
{
    *out = NULL;
    int rc = zp_files_mkdirs(dir, 0755);
    if (rc) {
        zp_error("%s: cannot make the folder: %s", dir, strerror(-rc));
        return rc;
    }
    zp_tb_t *tb = calloc(1, sizeof *tb);
    if (!tb)
        return ZP_ENOMEM;
    char host[64] = "localhost";
    gethostname(host, sizeof host - 1);
    tb->t0 = zp_wall_s();
    snprintf(tb->path, sizeof tb->path, "%s/events.out.tfevents.%lld.%s", dir, (long long)tb->t0, host);
    if (!(tb->f = fopen(tb->path, "ab"))) {
        rc = -errno;
        zp_error("%s: %s", tb->path, strerror(errno));
        free(tb);
        return rc;
    }
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = tb->t0;
    ev.what_case = TENSORBOARD__EVENT__WHAT_FILE_VERSION;
    ev.file_version = "brain.Event:2";
    write_event(tb, &ev);
    *out = tb;
    return 0;
}

void zp_tb_destroy(zp_tb_t **tb)
{
    if (!tb || !*tb)
        return;
    if ((*tb)->f && fclose((*tb)->f) && !(*tb)->failed)
        zp_error("%s: %s", (*tb)->path, strerror(errno));
    free(*tb);
    *tb = NULL;
}

void zp_tb_flush(zp_tb_t *tb)
{
    if (tb)
        fflush(tb->f);
}

/* ---- scalars and thinning --------------------------------------------------------------- */

static tag_t *tag_slot(zp_tb_t *tb, const char *tag)
{
    for (int i = 0; i < tb->ntags; i++)
        if (!strcmp(tb->tags[i].tag, tag))
            return &tb->tags[i];
    if (tb->ntags == ZP_TB_TAGS_MAX) {
        if (!tb->dropped_tags++)
            zp_warn("%s: more than %d TensorBoard tags; \"%s\" and later new ones are left out",
                    tb->path, ZP_TB_TAGS_MAX, tag);
        return NULL;
    }
    tag_t *t = &tb->tags[tb->ntags++];
    snprintf(t->tag, sizeof t->tag, "%s", tag);
    t->last_step = INT64_MIN;
    t->gap = 1;
    return t;
}

int zp_tb_scalar(zp_tb_t *tb, const char *tag, int64_t step, double wall_time, double value)
{
    tag_t *t = tb && !tb->failed ? tag_slot(tb, tag) : NULL;
    if (!t)
        return tb && tb->failed ? -1 : 0;
    /* a step back (a resumed run) starts the tag's line again */
    if (t->last_step != INT64_MIN && step >= t->last_step && step - t->last_step < t->gap)
        return 0;
    Tensorboard__Summary__Value v = TENSORBOARD__SUMMARY__VALUE__INIT, *vp = &v;
    v.tag = t->tag;
    v.value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
    v.simple_value = (float)value;
    Tensorboard__Summary s = TENSORBOARD__SUMMARY__INIT;
    s.n_value = 1;
    s.value = &vp;
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = wall_time;
    ev.step = step;
    ev.what_case = TENSORBOARD__EVENT__WHAT_SUMMARY;
    ev.summary = &s;
    if (write_event(tb, &ev))
        return -1;
    t->last_step = step;
    if (++t->at_gap == ZP_TB_POINTS_PER_GAP && t->gap < INT64_MAX / 2)
        t->gap *= 2, t->at_gap = 0;
    return 1;
}

/* ---- records into scalars --------------------------------------------------------------- */

static void scalar2(zp_tb_t *tb, const char *a, const char *b, int64_t step, double time, double v)
{
    char tag[ZP_TB_TAG_MAX];
    snprintf(tag, sizeof tag, "%s/%s", a, b);
    zp_tb_scalar(tb, tag, step, time, v);
}

static void on_step(zp_tb_t *tb, const zp_rec_head_t *h, const msgpack_object *body)
{
    zp_rec_step_t x;
    zp_records_decode(ZP_REC_STEP, body, &x);
    tb->train_step = x.step;
    scalar2(tb, "train_step", "loss", x.step, h->time, x.loss);
    scalar2(tb, "train_step", "accuracy", x.step, h->time, x.accuracy);
    scalar2(tb, "train_step", "samples_per_s", x.step, h->time, x.samples_per_s);
    scalar2(tb, "train_step", "lr", x.step, h->time, x.lr);
}

static void on_epoch_end(zp_tb_t *tb, const zp_rec_head_t *h, const msgpack_object *body)
{
    zp_rec_epoch_end_t x;
    zp_records_decode(ZP_REC_EPOCH_END, body, &x);
    if (!x.split[0])
        return;
    tb->train_step = x.step;
    if (ZP_HAS(&x, EPOCH_END, loss))
        scalar2(tb, x.split, "loss", x.step, h->time, x.loss);
    if (ZP_HAS(&x, EPOCH_END, accuracy))
        scalar2(tb, x.split, "accuracy", x.step, h->time, x.accuracy);
    scalar2(tb, x.split, "samples_per_s", x.step, h->time, x.samples_per_s);
}

/* A program's own loss and accuracy of an epoch: the train/ and test/ tags. */
static void on_program_epoch(zp_tb_t *tb, const zp_rec_head_t *h, int test,
                             const msgpack_object *body)
{
    zp_rec_train_epoch_t x; /* test_epoch has the very same fields */
    zp_records_decode(test ? ZP_REC_TEST_EPOCH : ZP_REC_TRAIN_EPOCH, body, &x);
    const char *split = test ? "test" : "train"; /* as epoch_end names them */
    int64_t step = ZP_HAS(&x, TRAIN_EPOCH, step) ? x.step : tb->train_step;
    if (ZP_HAS(&x, TRAIN_EPOCH, loss))
        scalar2(tb, split, "loss", step, h->time, x.loss);
    if (ZP_HAS(&x, TRAIN_EPOCH, accuracy))
        scalar2(tb, split, "accuracy", step, h->time, x.accuracy);
}

static void on_cache(zp_tb_t *tb, const zp_rec_head_t *h, const msgpack_object *body)
{
    zp_rec_cache_t x;
    zp_records_decode(ZP_REC_CACHE, body, &x);
    if (x.split[0])
        scalar2(tb, x.split, "cache_hit_rate", tb->train_step, h->time, x.hit_rate);
}

static void on_stats(zp_tb_t *tb, const zp_rec_head_t *h, const msgpack_object *body)
{
    zp_rec_stats_t x;
    zp_records_decode(ZP_REC_STATS, body, &x);
    char who[ZP_REC_NAME_MAX + 24];
    snprintf(who, sizeof who, "%s[%lld]", h->stage, (long long)h->instance);
    int64_t s = h->time > tb->t0 ? (int64_t)(h->time - tb->t0) : 0;
    scalar2(tb, who, "items_per_s", s, h->time, x.items_per_s);
    scalar2(tb, who, "busy", s, h->time, x.busy);
    scalar2(tb, who, "wait_in", s, h->time, x.wait_in);
    scalar2(tb, who, "wait_out", s, h->time, x.wait_out);
    if (x.hit_rate >= 0)
        scalar2(tb, who, "hit_rate", s, h->time, x.hit_rate);
    if (!strcmp(h->stage, "trainer") && h->instance == 0)
        zp_tb_scalar(tb, "trainer/data_wait", s, h->time, x.wait_in);
}

static int key_is(const msgpack_object *k, const char *s)
{
    size_t n = strlen(s);
    return k->type == MSGPACK_OBJECT_STR && k->via.str.size == n && !memcmp(k->via.str.ptr, s, n);
}

/* A metric this version does not declare (a user program's log()): every
 * number but the head's, step and epoch, as <event>/<key>. */
static void on_user_metric(zp_tb_t *tb, const zp_rec_head_t *h, const msgpack_object *body)
{
    const msgpack_object_map *m = &body->via.map;
    int64_t step = 0;
    for (uint32_t i = 0; i < m->size; i++)
        if (key_is(&m->ptr[i].key, "step") && m->ptr[i].val.type == MSGPACK_OBJECT_POSITIVE_INTEGER)
            step = (int64_t)(m->ptr[i].val.via.u64 & INT64_MAX);
    int nhead;
    const zp_rec_field_t *head = zp_records_fields(ZP_REC_NONE, &nhead);
    for (uint32_t i = 0; i < m->size; i++) {
        const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;
        int skip = k->type != MSGPACK_OBJECT_STR || !k->via.str.size ||
                   key_is(k, "step") || key_is(k, "epoch");
        for (int j = 0; j < nhead && !skip; j++)
            skip = key_is(k, head[j].key);
        double d;
        if (v->type == MSGPACK_OBJECT_FLOAT64 || v->type == MSGPACK_OBJECT_FLOAT32)
            d = v->via.f64;
        else if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
            d = (double)v->via.u64;
        else if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
            d = (double)v->via.i64;
        else
            skip = 1;
        if (skip)
            continue;
        char tag[ZP_TB_TAG_MAX];
        snprintf(tag, sizeof tag, "%s/%.*s", h->event, (int)k->via.str.size, k->via.str.ptr);
        zp_tb_scalar(tb, tag, step, h->time, d);
    }
}

void zp_tb_record(zp_tb_t *tb, const msgpack_object *body)
{
    if (!tb || tb->failed)
        return;
    zp_rec_head_t h;
    zp_record_type_t type = zp_records_head(body, &h);
    if (type == ZP_REC_STEP)
        on_step(tb, &h, body);
    else if (type == ZP_REC_EPOCH_END)
        on_epoch_end(tb, &h, body);
    else if (type == ZP_REC_CACHE)
        on_cache(tb, &h, body);
    else if (type == ZP_REC_TRAIN_EPOCH || type == ZP_REC_TEST_EPOCH)
        on_program_epoch(tb, &h, type == ZP_REC_TEST_EPOCH, body);
    else if (type == ZP_REC_STATS)
        on_stats(tb, &h, body);
    else if (type == ZP_REC_NONE && body->type == MSGPACK_OBJECT_MAP && h.event[0] &&
             !strcmp(h.kind, zp_records_kind_name(ZP_KIND_METRIC)))
        on_user_metric(tb, &h, body);
}

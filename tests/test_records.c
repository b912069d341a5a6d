/* Unit tests of schemas/records.h: every record the stages write (through
 * zp_event_record and ZP_KEY, as the stages do, and the stats record through
 * zp_stage_stats_tick itself) is read back by zp_records_head/zp_records_decode with
 * every declared field; absent, mistyped and unknown fields read as the
 * readers have always read them (the row's fallback, "", ignored). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "pipeline/stage/event.h"
#include "pipeline/base/log.h"
#include "pipeline/stage/stage.h"
#include "schemas/msg.h"
#include "schemas/records.h"

static zp_stage_t *st; /* the sender */
static void *zctx, *pull;
static char wire[65536]; /* the last record received */
static zp_msg_t msg;

static int setup(void **state)
{
    (void)state;
    if (!(st = calloc(1, sizeof *st)) || !(zctx = zmq_ctx_new()))
        return -1;
    st->name = "prefetch";
    st->instance = 2;
    pull = zmq_socket(zctx, ZMQ_PULL);
    st->events = zmq_socket(zctx, ZMQ_PUSH);
    if (zmq_bind(pull, "inproc://records") || zmq_connect(st->events, "inproc://records"))
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    zp_msg_release(&msg);
    zmq_close(st->events);
    zmq_close(pull);
    zmq_ctx_term(zctx);
    free(st);
    return 0;
}

/* Receives the record just sent and decodes the EVENT message around it:
 * its body is msg.body (valid until the next call). */
static const msgpack_object *receive(void)
{
    zp_msg_release(&msg);
    int n = zmq_recv(pull, wire, sizeof wire, 0);
    assert_true(n > 0 && n < (int)sizeof wire);
    const void *frames[1] = {wire};
    size_t sizes[1] = {(size_t)n};
    char why[256];
    assert_int_equal(zp_msg_decode(&msg, frames, sizes, 1, why, sizeof why), 0);
    assert_int_equal(msg.type, ZP_MSG_EVENT);
    return &msg.body;
}

static uint64_t all_bits(int n)
{
    return n >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1;
}

/* A value for field i of each type, distinct per field. */
static int64_t int_of(int i) { return 1000 + 7 * i; }
static double num_of(int i) { return i + 0.25; }
static void str_of(int i, char *buf, size_t len) { snprintf(buf, len, "value-%d", i); }

static void every_record_written_with_every_field_reads_back_with_every_field(void **state)
{
    (void)state;
    for (int t = ZP_REC_NONE + 1; t < ZP_REC_COUNT; t++) {
        int n;
        const zp_rec_field_t *f = zp_records_fields((zp_record_type_t)t, &n);
        assert_true(n > 0 && n < 64);
        zp_event_t ev;
        zp_event_record(st, &ev, (zp_record_type_t)t);
        for (int i = 0; i < n; i++) {
            char s[32];
            int64_t ints[3] = {int_of(i), -int_of(i), 0};
            str_of(i, s, sizeof s);
            switch (f[i].type) {
            case 'I': zp_event_int(&ev, f[i].key, int_of(i)); break;
            case 'N': zp_event_num(&ev, f[i].key, num_of(i)); break;
            case 'A': zp_event_ints(&ev, f[i].key, ints, 3); break;
            default: zp_event_str(&ev, f[i].key, s); break;
            }
        }
        zp_event_send(st, &ev);
        assert_int_equal(st->events_dropped, 0);
        const msgpack_object *b = receive();

        zp_rec_head_t h;
        assert_int_equal(zp_records_head(b, &h), t);
        int metric = zp_records_kind((zp_record_type_t)t) == ZP_KIND_METRIC;
        /* the map holds exactly the head and the fields written: counted, not typed */
        assert_int_equal(b->type, MSGPACK_OBJECT_MAP);
        assert_int_equal(b->via.map.size, 5 + metric + n);
        uint64_t head_all = all_bits(ZP_RI_HEAD_COUNT_);
        assert_true(h.present == (metric ? head_all : head_all & ~(1ull << ZP_RI_HEAD_event)));
        assert_string_equal(h.kind, zp_records_kind_name(zp_records_kind((zp_record_type_t)t)));
        assert_string_equal(h.event, zp_records_event((zp_record_type_t)t));
        assert_string_equal(h.stage, "prefetch");
        assert_int_equal(h.instance, 2);
        assert_true(h.pid > 0 && h.time > 1e9);

        union { /* room for any record's struct */
            zp_rec_stats_t a;
            zp_rec_epoch_end_t b;
            zp_rec_step_t c;
            char bytes[4096];
        } out;
        assert_true(sizeof out.bytes >= f[n - 1].offset + f[n - 1].size);
        assert_int_equal(zp_records_decode((zp_record_type_t)t, b, &out), t);
        uint64_t present;
        memcpy(&present, &out, sizeof present);
        assert_true(present == all_bits(n));
        for (int i = 0; i < n; i++) {
            const char *at = out.bytes + f[i].offset;
            int64_t iv;
            double nv;
            const msgpack_object *av;
            char s[32];
            switch (f[i].type) {
            case 'I': memcpy(&iv, at, sizeof iv); assert_int_equal(iv, int_of(i)); break;
            case 'N': memcpy(&nv, at, sizeof nv); assert_true(nv == num_of(i)); break;
            case 'A':
                memcpy(&av, at, sizeof av);
                assert_non_null(av);
                assert_int_equal(av->via.array.size, 3);
                assert_int_equal(av->via.array.ptr[1].via.i64, -int_of(i));
                break;
            default: str_of(i, s, sizeof s); assert_string_equal(at, s); break;
            }
        }
    }
}

static void the_stats_tick_writes_the_declared_stats_record(void **state)
{
    (void)state;
    zp_stats_t *s = &st->stats;
    s->items = 12345, s->bytes = 678, s->errors = 3, s->lmdb_errors = 1, s->queue = 7;
    s->hits = 3, s->lookups = 4, s->final = 1;
    st->events_dropped = 0;
    s->start = s->since = s->w_start = zp_now_ns() - 1000000000;
    s->next_ns = 0; /* now */
    zp_stage_stats_tick(st);
    const msgpack_object *b = receive();
    zp_rec_head_t h;
    assert_int_equal(zp_records_head(b, &h), ZP_REC_STATS);
    zp_rec_stats_t x;
    zp_records_decode(ZP_REC_STATS, b, &x);
    int n;
    zp_records_fields(ZP_REC_STATS, &n);
    assert_true(x.present == all_bits(n)); /* the writer sends every declared field */
    assert_int_equal(x.total_items, 12345);
    assert_int_equal(x.total_bytes, 678);
    assert_int_equal(x.errors, 3);
    assert_int_equal(x.lmdb_errors, 1);
    assert_int_equal(x.queue, 7);
    assert_int_equal(x.final, 1);
    assert_float_equal(x.hit_rate, 0.75, 1e-12);
    assert_true(x.uptime_s >= 1.0 && x.window_s >= 1.0);
    assert_true(x.items_per_s > 0 && x.items_per_s <= 12345);
}

static void absent_or_mistyped_fields_read_as_their_fallback_and_unknown_keys_are_ignored(void **state)
{
    (void)state;
    zp_event_t ev;
    zp_event_begin(st, &ev, "stats");
    zp_event_str(&ev, "queue", "seven"); /* mistyped */
    zp_event_int(&ev, "no_such_key", 1);  /* unknown */
    zp_event_num(&ev, "total_items", 5.9); /* an integer field given as a float */
    zp_event_send(st, &ev);
    const msgpack_object *b = receive();
    zp_rec_head_t h;
    assert_int_equal(zp_records_head(b, &h), ZP_REC_STATS);
    zp_rec_stats_t x;
    zp_records_decode(ZP_REC_STATS, b, &x);
    assert_true(x.present == 1ull << ZP_RI_STATS_total_items);
    assert_false(ZP_HAS(&x, STATS, queue));
    assert_int_equal(x.queue, 0);
    assert_int_equal(x.total_items, 5);
    assert_true(x.hit_rate == -1); /* `stat` shows "-" */
    assert_true(x.busy == 0 && x.final == 0);

    zp_event_record(st, &ev, ZP_REC_EPOCH_END);
    zp_event_send(st, &ev);
    b = receive();
    zp_rec_epoch_end_t e;
    assert_int_equal(zp_records_head(b, &h), ZP_REC_EPOCH_END);
    zp_records_decode(ZP_REC_EPOCH_END, b, &e);
    assert_true(e.present == 0);
    assert_int_equal(e.epoch, -1); /* the report refuses it */
    assert_true(e.loss == -1 && e.accuracy == -1); /* no model: the logger prints samples */
    assert_string_equal(e.split, "");

    zp_event_record(st, &ev, ZP_REC_STEP);
    zp_event_send(st, &ev);
    b = receive();
    zp_rec_step_t p;
    zp_records_decode(ZP_REC_STEP, b, &p);
    assert_int_equal(p.epochs, 1);
    assert_int_equal(p.steps_per_epoch, 1);
    assert_int_equal(p.epoch, 0);
    assert_true(p.loss == 0);
}

static void an_undeclared_kind_or_event_is_none_with_its_head_read(void **state)
{
    (void)state;
    zp_event_t ev;
    zp_event_begin(st, &ev, "metric");
    zp_event_str(&ev, "event", "from_a_newer_version");
    zp_event_send(st, &ev);
    const msgpack_object *b = receive();
    zp_rec_head_t h;
    assert_int_equal(zp_records_head(b, &h), ZP_REC_NONE);
    assert_string_equal(h.kind, "metric");
    assert_string_equal(h.event, "from_a_newer_version");
    assert_int_equal(h.instance, 2);

    zp_event_begin(st, &ev, "gossip");
    zp_event_send(st, &ev);
    assert_int_equal(zp_records_head(receive(), &h), ZP_REC_NONE);

    msgpack_object not_a_map = {.type = MSGPACK_OBJECT_NIL};
    assert_int_equal(zp_records_head(&not_a_map, &h), ZP_REC_NONE);
    assert_true(h.present == 0);
    assert_string_equal(h.stage, "");
    zp_rec_stats_t x;
    assert_int_equal(zp_records_decode(ZP_REC_NONE, &not_a_map, &x), ZP_REC_NONE);
    assert_int_equal(zp_records_decode(ZP_REC_COUNT, &not_a_map, &x), ZP_REC_NONE);
}

static void keys_are_the_declared_names_and_unique_in_their_record(void **state)
{
    (void)state;
    assert_string_equal(ZP_KEY(STATS, total_items), "total_items");
    assert_string_equal(ZP_KEY(HEAD, kind), "kind");
    assert_string_equal(ZP_KEY(SAMPLE_SKIPPED, error), "error");
    for (int t = ZP_REC_NONE; t < ZP_REC_COUNT; t++) {
        int n, nh;
        const zp_rec_field_t *f = zp_records_fields((zp_record_type_t)t, &n);
        const zp_rec_field_t *head = zp_records_fields(ZP_REC_NONE, &nh);
        assert_true(strlen(zp_records_doc((zp_record_type_t)t)) > 0);
        for (int i = 0; i < n; i++) {
            assert_true(strchr("INSTA", f[i].type) != NULL);
            assert_true(strlen(f[i].doc) > 0);
            for (int j = 0; j < i; j++)
                assert_string_not_equal(f[i].key, f[j].key);
            for (int j = 0; t != ZP_REC_NONE && j < nh; j++) /* the head's keys are the head's */
                assert_string_not_equal(f[i].key, head[j].key);
        }
    }
    int n;
    assert_null(zp_records_fields(ZP_REC_COUNT, &n));
    assert_int_equal(n, 0);
}

int main(void)
{
    zp_log_set_level(ZP_LOG_ERROR);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(every_record_written_with_every_field_reads_back_with_every_field),
        T(the_stats_tick_writes_the_declared_stats_record),
        T(absent_or_mistyped_fields_read_as_their_fallback_and_unknown_keys_are_ignored),
        T(an_undeclared_kind_or_event_is_none_with_its_head_read),
        T(keys_are_the_declared_names_and_unique_in_their_record),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}

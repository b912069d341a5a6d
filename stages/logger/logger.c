/* logger.c — collects every stage's events: metric records into
 * metrics.jsonl, counters into stats.jsonl (and the latest per stage instance
 * for `zeus-pipe stat`), every event as received into events.msgpack, a
 * progress line on the terminal, TensorBoard scalars into tb/ (tb.h; with
 * logger.tensorboard), and at the end the run's report (report.txt,
 * report.json and report.html from one reading of the run; see
 * pipeline/report/report.h) and its timeline (trace.json; see
 * pipeline/report/trace.h). */
#define _GNU_SOURCE
#include "stages/logger/logger.h"
#include "stages/logger/tb.h"
#include "pipeline/base/hash.h"
#include "pipeline/base/log.h"
#include "pipeline/base/names.h"
#include "pipeline/report/report.h"
#include "pipeline/net/inbox.h"
#include "pipeline/net/sock.h"
#include "pipeline/stage/stage.h"
#include "pipeline/report/trace.h"
#include "pipeline/base/json.h"
#include "schemas/records.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    char stage[ZP_REC_NAME_MAX];
    int64_t instance;
    double received;  /* wall time */
    msgpack_sbuffer body;
} latest_t;

typedef struct {
    zp_stage_t *st;
    void *pull, *rep;
    FILE *metrics, *stats, *events; /* events.msgpack: every event as received */
    zp_tb_t *tb;                    /* NULL: logger.tensorboard off, or tb/ could not be made */
    /* every stage instance heard from: under Slurm each rank's loaders,
     * prefetch and trainer and each node's cache, thousands at 1,024 ranks;
     * found by `index`, open addressing on (stage, instance), slot + 1 */
    latest_t *latest;
    int nlatest, cap;
    int *index;
    size_t index_cap; /* a power of two, at least twice nlatest */
    int tty, progress_shown;
    double last_plain;
    int64_t first_step_ns, first_step;
    int64_t dropped; /* malformed or unexpected messages on either socket */
    zp_frames_t f;
    zp_inbox_t pull_in, rep_in; /* events; stat requests */
} logger_t;

static size_t latest_hash(const char *stage, int64_t instance)
{
    uint64_t h = zp_mix64((uint64_t)instance);
    for (const char *c = stage; *c; c++)
        h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
    return (size_t)zp_mix64(h);
}

/* The index's place of (stage, instance): its slot's, or the empty one where it goes. */
static size_t latest_find(const logger_t *l, const char *stage, int64_t instance)
{
    size_t mask = l->index_cap - 1, at = latest_hash(stage, instance) & mask;
    for (; l->index[at]; at = (at + 1) & mask) {
        const latest_t *e = &l->latest[l->index[at] - 1];
        if (e->instance == instance && !strcmp(e->stage, stage))
            break;
    }
    return at;
}

/* Room for one more instance: the slots and the index doubled when full. */
static int latest_grow(logger_t *l)
{
    if (l->nlatest == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        latest_t *more = realloc(l->latest, (size_t)cap * sizeof *more);
        if (!more)
            return ZP_ENOMEM;
        l->latest = more, l->cap = cap;
    }
    if (2 * ((size_t)l->nlatest + 1) <= l->index_cap)
        return 0;
    size_t cap = l->index_cap ? 2 * l->index_cap : 128;
    int *index = calloc(cap, sizeof *index);
    if (!index)
        return ZP_ENOMEM;
    free(l->index);
    l->index = index, l->index_cap = cap;
    for (int i = 0; i < l->nlatest; i++)
        l->index[latest_find(l, l->latest[i].stage, l->latest[i].instance)] = i + 1;
    return 0;
}

/* The slot of a stage instance, made on its first record; NULL without memory. */
static latest_t *latest_slot(logger_t *l, const char *stage, int64_t instance)
{
    int found = l->index_cap ? l->index[latest_find(l, stage, instance)] : 0;
    if (found)
        return &l->latest[found - 1];
    if (latest_grow(l))
        return NULL;
    latest_t *e = &l->latest[l->nlatest];
    snprintf(e->stage, sizeof e->stage, "%s", stage);
    e->instance = instance;
    e->received = 0;
    msgpack_sbuffer_init(&e->body);
    l->index[latest_find(l, stage, instance)] = ++l->nlatest;
    return e;
}

static void fmt_rate(char *buf, size_t len, double v)
{
    if (v >= 1e6)
        snprintf(buf, len, "%.1fM", v / 1e6);
    else if (v >= 1e3)
        snprintf(buf, len, "%.1fk", v / 1e3);
    else
        snprintf(buf, len, "%.0f", v);
}

static void progress(logger_t *l, const msgpack_object *b)
{
    zp_rec_step_t x;
    zp_records_decode(ZP_REC_STEP, b, &x);
    int64_t now = zp_now_ns();
    if (!l->first_step_ns) {
        l->first_step_ns = now;
        l->first_step = x.step;
    }
    int64_t total = x.steps_per_epoch * x.epochs, done = x.step - l->first_step;
    double eta = done > 0 ? (now - l->first_step_ns) / 1e9 / done * (total - x.step) : 0;
    char rate[16];
    fmt_rate(rate, sizeof rate, x.samples_per_s);
    char line[200];
    snprintf(line, sizeof line, "epoch %lld/%lld  step %lld/%lld  %s samples/s  loss %.4f  ETA %dm%02ds",
             (long long)x.epoch + 1, (long long)x.epochs, (long long)x.step, (long long)total, rate,
             x.loss, (int)eta / 60, (int)eta % 60);
    if (l->tty) {
        printf("\r\033[K%s", line);
        l->progress_shown = 1;
    } else if (zp_wall_s() - l->last_plain >= 5) {
        printf("%s\n", line);
        l->last_plain = zp_wall_s();
    }
    fflush(stdout);
}

static void epoch_end(logger_t *l, const msgpack_object *b)
{
    zp_rec_epoch_end_t x;
    zp_records_decode(ZP_REC_EPOCH_END, b, &x);
    if (l->progress_shown)
        printf("\r\033[K");
    l->progress_shown = 0;
    char rate[16];
    fmt_rate(rate, sizeof rate, x.samples_per_s);
    if (x.accuracy >= 0)
        printf("epoch %lld %-5s loss %.4f  accuracy %.4f  (%s samples/s)\n", (long long)x.epoch + 1,
               x.split, x.loss, x.accuracy, rate);
    else
        printf("epoch %lld %-5s %lld samples  (%s samples/s)\n", (long long)x.epoch + 1, x.split,
               (long long)x.samples, rate);
    fflush(stdout);
}

/* The latest stats record of its stage instance, kept for `zeus-pipe stat`;
 * a final one (the stage exited) drops the instance from the list. */
static void keep_stats(logger_t *l, const zp_rec_head_t *h, const msgpack_object *b)
{
    zp_rec_stats_t x;
    zp_records_decode(ZP_REC_STATS, b, &x);
    latest_t *e = latest_slot(l, h->stage, h->instance);
    if (e && x.final == 1) {
        e->received = 0; /* gone: `stat` stops listing it */
    } else if (e) {
        e->body.size = 0;
        msgpack_packer pk;
        msgpack_packer_init(&pk, &e->body, msgpack_sbuffer_write);
        msgpack_pack_object(&pk, *b);
        e->received = zp_wall_s();
    }
}

static void write_line(FILE *f, const msgpack_object *b)
{
    zp_json_write(f, b);
    fputc('\n', f);
}

static void on_event(logger_t *l, const zp_msg_t *m)
{
    zp_rec_head_t h;
    zp_record_type_t type = zp_records_head(&m->body, &h);
    zp_tb_record(l->tb, &m->body);
    if (type == ZP_REC_STATS) {
        keep_stats(l, &h, &m->body);
        write_line(l->stats, &m->body);
    } else if (type == ZP_REC_WARNING) {
        zp_rec_warning_t x;
        zp_records_decode(ZP_REC_WARNING, &m->body, &x);
        if (l->progress_shown)
            printf("\r\033[K");
        l->progress_shown = 0;
        printf("warning: %s[%lld]: %s\n", h.stage, (long long)h.instance, x.message);
        fflush(stdout);
        write_line(l->metrics, &m->body);
    } else if (!strcmp(h.kind, zp_records_kind_name(ZP_KIND_METRIC))) { /* also one not declared */
        write_line(l->metrics, &m->body);
        fflush(l->metrics);
        if (type == ZP_REC_STEP)
            progress(l, &m->body);
        else if (type == ZP_REC_EPOCH_END)
            epoch_end(l, &m->body);
    }
}

static int on_event_msg(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    logger_t *l = ctx;
    on_event(l, m);
    if (l->events)
        fwrite(zmq_msg_data(&f->part[0]), 1, zmq_msg_size(&f->part[0]), l->events);
    l->st->stats.items++;
    l->st->stats.bytes += (int64_t)zmq_msg_size(&f->part[0]);
    return 0;
}

static const zp_route_t PULL_ROUTES[] = {{ZP_MSG_EVENT, on_event_msg}};

static int readable(void *sock)
{
    int events = 0;
    size_t len = sizeof events;
    return zmq_getsockopt(sock, ZMQ_EVENTS, &events, &len) == 0 && (events & ZMQ_POLLIN);
}

/* Every event waiting. */
static void on_pull(logger_t *l)
{
    while (readable(l->pull) && !zp_inbox_recv(&l->pull_in, l->pull, ZMQ_DONTWAIT, &l->f, l))
        ;
}

/* STAT_REQ: the latest record of every stage instance heard from recently. */
static int on_stat_req(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    (void)m, (void)f;
    logger_t *l = ctx;
    static msgpack_sbuffer sb;
    sb.size = 0;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    double now = zp_wall_s(), stale = 3.0 * l->st->cfg.stat_interval_ms / 1000 + 2;
    int fresh = 0;
    for (int i = 0; i < l->nlatest; i++)
        fresh += now - l->latest[i].received < stale;
    zp_msg_pack_begin(&pk, ZP_MSG_STAT_REP, 1);
    zp_msg_pack_str(&pk, "body");
    msgpack_pack_array(&pk, (uint32_t)fresh);
    for (int i = 0; i < l->nlatest; i++)
        if (now - l->latest[i].received < stale)
            msgpack_sbuffer_write(&sb, l->latest[i].body.data, l->latest[i].body.size);
    zmq_send(l->rep, sb.data, sb.size, 0);
    return 0;
}

static const zp_route_t REP_ROUTES[] = {{ZP_MSG_STAT_REQ, on_stat_req}};

/* A request the REP socket could not read or route is answered with an error:
 * a REP socket answers every request before it can take the next. */
static void on_bad_request(void *ctx, const char *why)
{
    (void)why; /* logged by the inbox */
    logger_t *l = ctx;
    static msgpack_sbuffer sb;
    sb.size = 0;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    zp_msg_pack_begin(&pk, ZP_MSG_CTL_REP, 1);
    zp_msg_pack_str(&pk, "error");
    zp_msg_pack_str(&pk, "expected a stat_req");
    zmq_send(l->rep, sb.data, sb.size, 0);
}

static int open_all(logger_t *l)
{
    zp_stage_t *st = l->st;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/metrics.jsonl", st->run_dir);
    l->metrics = fopen(path, "a");
    snprintf(path, sizeof path, "%s/stats.jsonl", st->run_dir);
    l->stats = fopen(path, "a");
    snprintf(path, sizeof path, "%s/events.msgpack", st->run_dir);
    l->events = fopen(path, "a");
    if (!l->metrics || !l->stats || !l->events) {
        zp_error("%s: %s", path, strerror(errno));
        return 1;
    }
    snprintf(path, sizeof path, "%s/tb", st->run_dir);
    if (st->cfg.tensorboard && zp_tb_create(&l->tb, path))
        zp_warn("%s: no TensorBoard scalars for this run (logger.tensorboard: false turns them off)", path);
    if (zp_stage_socket(st, &l->pull, ZMQ_PULL, zp_names_sock(ZP_SOCK_EVENTS), 1, 0))
        return 1;
    int hwm = 100000;
    zmq_setsockopt(l->pull, ZMQ_RCVHWM, &hwm, sizeof hwm);
    /* under Slurm also tcp, for each node's autoscale (pipeline/base/names.h) */
    if (zp_stage_socket(st, &l->rep, ZMQ_REP, zp_names_sock(ZP_SOCK_STAT), 1, 0))
        return 1;
    return 0;
}

static void finish(logger_t *l)
{
    /* Drain what the stages sent before they exited. */
    for (int quiet = 0; quiet < 3;) {
        zmq_pollitem_t it = {l->pull, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 50) > 0)
            on_pull(l), quiet = 0;
        else
            quiet++;
    }
    if (l->progress_shown)
        printf("\r\033[K");
    fflush(l->metrics);
    if (fclose(l->events))
        zp_error("events.msgpack: %s", strerror(errno));
    l->events = NULL;
    zp_report_write(l->st->run_dir, stdout);
    fflush(stdout);
    char err[PATH_MAX + 128];
    if (zp_trace_write(l->st->run_dir, l->st->cfg.trace_max_events, NULL, err, sizeof err))
        zp_error("cannot write trace.json: %s (`zeus-pipe report RUN --trace` tries again)", err);
}

int zp_logger_main(zp_stage_t *st)
{
    static logger_t l;
    l.st = st;
    l.tty = isatty(STDOUT_FILENO);
    zp_frames_init(&l.f);
    l.pull_in = ZP_STAGE_INBOX(st, PULL_ROUTES, 0, "a stage", &l.dropped);
    l.rep_in = ZP_STAGE_INBOX(st, REP_ROUTES, 0, "a stat client", &l.dropped);
    l.rep_in.on_drop = on_bad_request; /* a REP socket answers even what it cannot read */
    int rc = open_all(&l);
    while (!rc && !zp_stop) {
        zp_stage_stats_state(&st->stats, ZP_ST_WAIT_IN);
        zmq_pollitem_t it[2] = {{l.pull, 0, ZMQ_POLLIN, 0}, {l.rep, 0, ZMQ_POLLIN, 0}};
        int n = zmq_poll(it, 2, 100);
        zp_stage_stats_state(&st->stats, ZP_ST_BUSY);
        if (n > 0 && (it[0].revents & ZMQ_POLLIN))
            on_pull(&l);
        if (n > 0 && (it[1].revents & ZMQ_POLLIN))
            zp_inbox_recv(&l.rep_in, l.rep, ZMQ_DONTWAIT, &l.f, &l);
        zp_stage_stats_tick(st);
        if (n > 0 || zp_now_ns() % 1000000000 < 100000000)
            fflush(l.stats), fflush(l.events), zp_tb_flush(l.tb);
    }
    if (!rc)
        finish(&l);
    zp_frames_free(&l.f);
    zp_sock_destroy(&l.pull);
    zp_sock_destroy(&l.rep);
    if (l.metrics)
        fclose(l.metrics);
    if (l.stats)
        fclose(l.stats);
    if (l.events)
        fclose(l.events);
    zp_tb_destroy(&l.tb);
    for (int i = 0; i < l.nlatest; i++)
        msgpack_sbuffer_destroy(&l.latest[i].body);
    free(l.latest);
    free(l.index);
    return rc;
}

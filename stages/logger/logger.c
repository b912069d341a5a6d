/* logger.c — collects every stage's events: metric records into
 * metrics.jsonl, counters into stats.jsonl (and the latest per stage instance
 * for `zeus-pipe stat`), a progress line on the terminal, and at the end a
 * per-epoch summary (also report.txt). */
#define _GNU_SOURCE
#include "pipeline/log.h"
#include "pipeline/sock.h"
#include "pipeline/stage.h"
#include "stages/logger/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RECORDS_MAX 1100

typedef struct {
    char stage[16];
    int64_t instance;
    double received;  /* wall time */
    msgpack_sbuffer body;
} latest_t;

typedef struct {
    int have_train, have_test;
    double train_loss, train_acc, test_loss, test_acc, samples_per_s, seconds;
} epoch_row_t;

typedef struct {
    zp_stage_t *st;
    void *pull, *rep;
    FILE *metrics, *stats;
    latest_t latest[RECORDS_MAX];
    int nlatest;
    epoch_row_t *rows;
    int64_t nrows;
    int tty, progress_shown;
    double last_plain;
    int64_t first_step_ns, first_step;
    int64_t bad_msgs;
    zp_frames_t f;
} logger_t;

static latest_t *latest_slot(logger_t *l, const char *stage, int64_t instance)
{
    for (int i = 0; i < l->nlatest; i++)
        if (l->latest[i].instance == instance && !strcmp(l->latest[i].stage, stage))
            return &l->latest[i];
    if (l->nlatest == RECORDS_MAX)
        return NULL;
    latest_t *e = &l->latest[l->nlatest++];
    snprintf(e->stage, sizeof e->stage, "%s", stage);
    e->instance = instance;
    msgpack_sbuffer_init(&e->body);
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
    int64_t epoch = (int64_t)zp_map_num(b, "epoch", 0), epochs = (int64_t)zp_map_num(b, "epochs", 1);
    int64_t step = (int64_t)zp_map_num(b, "step", 0), spe = (int64_t)zp_map_num(b, "steps_per_epoch", 1);
    int64_t now = zp_now_ns();
    if (!l->first_step_ns) {
        l->first_step_ns = now;
        l->first_step = step;
    }
    int64_t total = spe * epochs, done = step - l->first_step;
    double eta = done > 0 ? (now - l->first_step_ns) / 1e9 / done * (total - step) : 0;
    char rate[16];
    fmt_rate(rate, sizeof rate, zp_map_num(b, "samples_per_s", 0));
    char line[200];
    snprintf(line, sizeof line, "epoch %lld/%lld  step %lld/%lld  %s samples/s  loss %.4f  ETA %dm%02ds",
             (long long)epoch + 1, (long long)epochs, (long long)step, (long long)total, rate,
             zp_map_num(b, "loss", 0), (int)eta / 60, (int)eta % 60);
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
    int64_t epoch = (int64_t)zp_map_num(b, "epoch", -1);
    if (epoch < 0 || epoch >= 1000000)
        return;
    if (epoch >= l->nrows) {
        int64_t n = epoch + 16;
        epoch_row_t *r = realloc(l->rows, (size_t)n * sizeof *r);
        if (!r)
            return;
        memset(r + l->nrows, 0, (size_t)(n - l->nrows) * sizeof *r);
        l->rows = r;
        l->nrows = n;
    }
    epoch_row_t *r = &l->rows[epoch];
    char split[16];
    zp_map_str(b, "split", split, sizeof split);
    int test = !strcmp(split, "test");
    double loss = zp_map_num(b, "loss", -1), acc = zp_map_num(b, "accuracy", -1);
    if (test) {
        r->have_test = 1, r->test_loss = loss, r->test_acc = acc;
    } else {
        r->have_train = 1, r->train_loss = loss, r->train_acc = acc;
        r->samples_per_s = zp_map_num(b, "samples_per_s", 0);
        r->seconds = zp_map_num(b, "seconds", 0);
    }
    if (l->progress_shown)
        printf("\r\033[K");
    l->progress_shown = 0;
    char rate[16];
    fmt_rate(rate, sizeof rate, zp_map_num(b, "samples_per_s", 0));
    if (acc >= 0)
        printf("epoch %lld %-5s loss %.4f  accuracy %.4f  (%s samples/s)\n", (long long)epoch + 1,
               split, loss, acc, rate);
    else
        printf("epoch %lld %-5s %lld samples  (%s samples/s)\n", (long long)epoch + 1, split,
               (long long)zp_map_num(b, "samples", 0), rate);
    fflush(stdout);
}

static void summary(logger_t *l, FILE *out)
{
    int any = 0;
    for (int64_t e = 0; e < l->nrows; e++)
        any |= l->rows[e].have_train;
    if (!any)
        return;
    fprintf(out, "\n%5s  %10s  %9s  %9s  %9s  %10s  %7s\n", "epoch", "train_loss", "train_acc",
            "test_loss", "test_acc", "samples/s", "time");
    for (int64_t e = 0; e < l->nrows; e++) {
        epoch_row_t *r = &l->rows[e];
        if (!r->have_train)
            continue;
        char rate[16];
        fmt_rate(rate, sizeof rate, r->samples_per_s);
        if (r->train_acc < 0)
            fprintf(out, "%5lld  %10s  %9s  %9s  %9s  %10s  %6.1fs\n", (long long)e + 1, "-", "-",
                    "-", "-", rate, r->seconds);
        else if (r->have_test)
            fprintf(out, "%5lld  %10.4f  %9.4f  %9.4f  %9.4f  %10s  %6.1fs\n", (long long)e + 1,
                    r->train_loss, r->train_acc, r->test_loss, r->test_acc, rate, r->seconds);
        else
            fprintf(out, "%5lld  %10.4f  %9.4f  %9s  %9s  %10s  %6.1fs\n", (long long)e + 1,
                    r->train_loss, r->train_acc, "-", "-", rate, r->seconds);
    }
}

static void on_event(logger_t *l, zp_msg_t *m)
{
    char kind[16], stage[16], event[24];
    zp_map_str(&m->body, "kind", kind, sizeof kind);
    zp_map_str(&m->body, "stage", stage, sizeof stage);
    if (!strcmp(kind, "stats")) {
        latest_t *e = latest_slot(l, stage, (int64_t)zp_map_num(&m->body, "instance", 0));
        if (e) {
            e->body.size = 0;
            msgpack_packer pk;
            msgpack_packer_init(&pk, &e->body, msgpack_sbuffer_write);
            msgpack_pack_object(&pk, m->body);
            e->received = zp_wall_s();
        }
        zp_json_write(l->stats, &m->body);
        fputc('\n', l->stats);
        return;
    }
    if (!strcmp(kind, "warning")) {
        char msg[512];
        zp_map_str(&m->body, "message", msg, sizeof msg);
        if (l->progress_shown)
            printf("\r\033[K");
        l->progress_shown = 0;
        printf("warning: %s[%lld]: %s\n", stage, (long long)zp_map_num(&m->body, "instance", 0), msg);
        fflush(stdout);
        zp_json_write(l->metrics, &m->body);
        fputc('\n', l->metrics);
        return;
    }
    if (!strcmp(kind, "metric")) {
        zp_json_write(l->metrics, &m->body);
        fputc('\n', l->metrics);
        fflush(l->metrics);
        zp_map_str(&m->body, "event", event, sizeof event);
        if (!strcmp(event, "step"))
            progress(l, &m->body);
        else if (!strcmp(event, "epoch_end"))
            epoch_end(l, &m->body);
    }
}

static void on_pull(logger_t *l)
{
    while (zp_frames_recv(&l->f, l->pull, ZMQ_DONTWAIT) == 0) {
        zp_msg_t m;
        char why[256];
        if (zp_frames_decode(&l->f, 0, &m, why, sizeof why) || m.type != ZP_MSG_EVENT) {
            l->st->stats.errors++;
            if (l->bad_msgs++ < 10)
                zp_warn("dropped a malformed event: %s", m.type ? zp_msg_name(m.type) : why);
        } else {
            on_event(l, &m);
            l->st->stats.items++;
            l->st->stats.bytes += (int64_t)zmq_msg_size(&l->f.part[0]);
        }
        zp_msg_release(&m);
    }
}

/* STAT_REQ: the latest record of every stage instance heard from recently. */
static void on_rep(logger_t *l)
{
    if (zp_frames_recv(&l->f, l->rep, ZMQ_DONTWAIT))
        return;
    zp_msg_t m;
    char why[256];
    static msgpack_sbuffer sb;
    sb.size = 0;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    int ok = !zp_frames_decode(&l->f, 0, &m, why, sizeof why) && m.type == ZP_MSG_STAT_REQ;
    zp_msg_release(&m);
    double now = zp_wall_s(), stale = 3.0 * l->st->cfg.stat_interval_ms / 1000 + 2;
    int fresh = 0;
    for (int i = 0; ok && i < l->nlatest; i++)
        fresh += now - l->latest[i].received < stale;
    zp_msg_pack_begin(&pk, ok ? ZP_MSG_STAT_REP : ZP_MSG_CTL_REP, ok ? 1 : 1);
    if (ok) {
        zp_pack_str(&pk, "body");
        msgpack_pack_array(&pk, (uint32_t)fresh);
        for (int i = 0; i < l->nlatest; i++)
            if (now - l->latest[i].received < stale)
                msgpack_sbuffer_write(&sb, l->latest[i].body.data, l->latest[i].body.size);
    } else {
        zp_pack_str(&pk, "error");
        zp_pack_str(&pk, "expected a stat_req");
    }
    zmq_send(l->rep, sb.data, sb.size, 0);
}

static int open_all(logger_t *l)
{
    zp_stage_t *st = l->st;
    char ep[ZP_ENDPOINT_MAX + 16], path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/metrics.jsonl", st->run_dir);
    l->metrics = fopen(path, "a");
    snprintf(path, sizeof path, "%s/stats.jsonl", st->run_dir);
    l->stats = fopen(path, "a");
    if (!l->metrics || !l->stats) {
        zp_error("%s: %s", path, strerror(errno));
        return 1;
    }
    if (zp_stage_endpoint(st, "events", ep, sizeof ep) ||
        !(l->pull = zp_sock_open(st->zctx, ZMQ_PULL, ep, 1, 0)))
        return 1;
    int hwm = 100000;
    zmq_setsockopt(l->pull, ZMQ_RCVHWM, &hwm, sizeof hwm);
    if (zp_stage_endpoint(st, "stat", ep, sizeof ep) ||
        !(l->rep = zp_sock_open(st->zctx, ZMQ_REP, ep, 1, 0)))
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
    summary(l, stdout);
    fflush(stdout);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/report.txt", l->st->run_dir);
    FILE *r = fopen(path, "w");
    if (r) {
        fprintf(r, "run %s\n", l->st->cfg.run_name);
        summary(l, r);
        fclose(r);
    }
}

int zp_logger_main(zp_stage_t *st)
{
    static logger_t l;
    l.st = st;
    l.tty = isatty(STDOUT_FILENO);
    zp_frames_init(&l.f);
    int rc = open_all(&l);
    while (!rc && !zp_stop) {
        zp_stats_state(&st->stats, ZP_ST_WAIT_IN);
        zmq_pollitem_t it[2] = {{l.pull, 0, ZMQ_POLLIN, 0}, {l.rep, 0, ZMQ_POLLIN, 0}};
        int n = zmq_poll(it, 2, 100);
        zp_stats_state(&st->stats, ZP_ST_BUSY);
        if (n > 0 && (it[0].revents & ZMQ_POLLIN))
            on_pull(&l);
        if (n > 0 && (it[1].revents & ZMQ_POLLIN))
            on_rep(&l);
        zp_stats_tick(st);
        if (n > 0 || zp_now_ns() % 1000000000 < 100000000)
            fflush(l.stats);
    }
    if (!rc)
        finish(&l);
    zp_frames_close(&l.f);
    zp_sock_close(&l.pull);
    zp_sock_close(&l.rep);
    if (l.metrics)
        fclose(l.metrics);
    if (l.stats)
        fclose(l.stats);
    for (int i = 0; i < l.nlatest; i++)
        msgpack_sbuffer_destroy(&l.latest[i].body);
    free(l.rows);
    return rc;
}

#define _GNU_SOURCE
#include "pipeline/report/report.h"
#include "pipeline/runtime/dataset.h"
#include "pipeline/runtime/json.h"
#include "pipeline/runtime/log.h"
#include "pipeline/runtime/names.h"
#include "pipeline/report/runscan.h"
#include "pipeline/report/report_autoscale.h"
#include "pipeline/runtime/timer.h"
#include "schemas/msg.h"
#include "schemas/records.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define STAGES ZP_STAGE_COUNT

typedef struct {
    double *v; /* milliseconds; owned */
    size_t n, cap;
} series_t;

typedef struct { /* the last stats record of one stage instance */
    int stage;
    int64_t instance;
    double items, errors, uptime, busy, wait_in, wait_out;
} inst_t;

typedef struct { /* a sample a loader could not load (loader.on_error: skip) */
    char split[8];
    int64_t index;
    char error[200];
} skip_t;

#define SKIPS_MAX 10000

typedef struct {
    int have_train, have_test;
    double train_loss, train_acc, test_loss, test_acc, samples_per_s, seconds;
} epoch_row_t;

typedef struct {
    char run[256];
    series_t series[STAGES][ZP_R_COUNT];
    inst_t *inst;
    int ninst, inst_cap;
    epoch_row_t *rows;
    int64_t nrows;
    int64_t events, bad;
    int64_t skipped_bytes, skipped_records; /* torn or garbled spans of events.msgpack */
    int64_t loaders_lost, requeued; /* the cache stage's loader_lost records */
    skip_t *skips;                  /* distinct skipped samples, at most SKIPS_MAX; owned */
    int nskips;
    int64_t skip_events;            /* every skip, each epoch's again */
    char missing[400];              /* "" or which files were missing (runscan.h) */
    const char *source;             /* the files read (runscan.h); static */
    zp_autoscale_log_t autoscale;   /* the supervisor's loader.autoscale decisions */
    double t0;                      /* the earliest record's time: the run's start */
} report_t;

typedef struct { /* per stage, from its instances */
    int instances;
    double items, items_per_s, busy, wait_in, wait_out, errors;
} stage_sum_t;

static int push(series_t *s, double v)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        double *p = realloc(s->v, cap * sizeof *p);
        if (!p)
            return ZP_ENOMEM;
        s->v = p, s->cap = cap;
    }
    s->v[s->n++] = v;
    return 0;
}

static int on_timer(report_t *r, int stage, const msgpack_object *b)
{
    zp_rec_timer_t t;
    zp_record_decode(ZP_REC_TIMER, b, &t);
    int region = zp_timer_region_of(t.region);
    if (region < 0 || !t.ns)
        return ZP_EPROTO;
    for (uint32_t i = 0; i < t.ns->via.array.size; i++) {
        const msgpack_object *x = &t.ns->via.array.ptr[i];
        if (x->type != MSGPACK_OBJECT_POSITIVE_INTEGER && x->type != MSGPACK_OBJECT_NEGATIVE_INTEGER)
            return ZP_EPROTO;
        int rc = push(&r->series[stage][region], (double)x->via.i64 / 1e6);
        if (rc)
            return rc;
    }
    return 0;
}

static int on_stats(report_t *r, int stage, int64_t instance, const msgpack_object *b)
{
    inst_t *e = NULL;
    for (int i = 0; i < r->ninst && !e; i++)
        if (r->inst[i].stage == stage && r->inst[i].instance == instance)
            e = &r->inst[i];
    if (!e) {
        if (r->ninst == r->inst_cap) {
            int cap = r->inst_cap ? 2 * r->inst_cap : 16;
            inst_t *p = realloc(r->inst, (size_t)cap * sizeof *p);
            if (!p)
                return ZP_ENOMEM;
            r->inst = p, r->inst_cap = cap;
        }
        e = &r->inst[r->ninst++];
        e->stage = stage, e->instance = instance;
    }
    zp_rec_stats_t x;
    zp_record_decode(ZP_REC_STATS, b, &x);
    e->items = (double)x.total_items;
    e->errors = (double)x.errors;
    e->uptime = x.uptime_s;
    e->busy = x.total_busy_s;
    e->wait_in = x.total_wait_in_s;
    e->wait_out = x.total_wait_out_s;
    return 0;
}

/* The row of `epoch`, grown as needed (a new row's figures absent: -1);
 * NULL for an epoch beyond any run's, or when out of memory (*rc). */
static epoch_row_t *row_at(report_t *r, int64_t epoch, int *rc)
{
    *rc = 0;
    if (epoch < 0 || epoch >= 1000000) {
        *rc = ZP_EPROTO;
        return NULL;
    }
    if (epoch >= r->nrows) {
        int64_t n = epoch + 16;
        epoch_row_t *p = realloc(r->rows, (size_t)n * sizeof *p);
        if (!p) {
            *rc = ZP_ENOMEM;
            return NULL;
        }
        memset(p + r->nrows, 0, (size_t)(n - r->nrows) * sizeof *p);
        for (int64_t e = r->nrows; e < n; e++)
            p[e].train_loss = p[e].train_acc = p[e].test_loss = p[e].test_acc = -1;
        r->rows = p, r->nrows = n;
    }
    return &r->rows[epoch];
}

static int on_epoch(report_t *r, const msgpack_object *b)
{
    zp_rec_epoch_end_t x;
    zp_record_decode(ZP_REC_EPOCH_END, b, &x);
    int rc;
    epoch_row_t *row = row_at(r, x.epoch, &rc);
    if (!row)
        return rc;
    /* a program's epoch_end carries no loss: its train_epoch/test_epoch record does */
    int test = !strcmp(x.split, zp_dataset_split_name(ZP_SPLIT_TEST));
    double *loss = test ? &row->test_loss : &row->train_loss, *acc = test ? &row->test_acc : &row->train_acc;
    if (ZP_HAS(&x, EPOCH_END, loss))
        *loss = x.loss;
    if (ZP_HAS(&x, EPOCH_END, accuracy))
        *acc = x.accuracy;
    if (test) {
        row->have_test = 1;
    } else {
        row->have_train = 1;
        row->samples_per_s = x.samples_per_s;
        row->seconds = x.seconds;
    }
    return 0;
}

/* A program's own figures of an epoch (zp.log("train_epoch", loss=..., accuracy=...)). */
static int on_program_epoch(report_t *r, int test, const msgpack_object *b)
{
    zp_rec_train_epoch_t x; /* test_epoch has the very same fields */
    _Static_assert(sizeof(zp_rec_train_epoch_t) == sizeof(zp_rec_test_epoch_t), "alike");
    zp_record_decode(test ? ZP_REC_TEST_EPOCH : ZP_REC_TRAIN_EPOCH, b, &x);
    int rc;
    epoch_row_t *row = row_at(r, x.epoch, &rc);
    if (!row)
        return rc == ZP_EPROTO ? 0 : rc; /* a program's own numbering: not the run's to refuse */
    if (ZP_HAS(&x, TRAIN_EPOCH, loss))
        *(test ? &row->test_loss : &row->train_loss) = x.loss;
    if (ZP_HAS(&x, TRAIN_EPOCH, accuracy))
        *(test ? &row->test_acc : &row->train_acc) = x.accuracy;
    return 0;
}

static int on_skip(report_t *r, const msgpack_object *b)
{
    zp_rec_sample_skipped_t x;
    zp_record_decode(ZP_REC_SAMPLE_SKIPPED, b, &x);
    skip_t s;
    snprintf(s.split, sizeof s.split, "%.*s", (int)sizeof s.split - 1, x.split);
    s.index = x.index;
    snprintf(s.error, sizeof s.error, "%.*s", (int)sizeof s.error - 1, x.error);
    r->skip_events++;
    for (int i = 0; i < r->nskips; i++)
        if (r->skips[i].index == s.index && !strcmp(r->skips[i].split, s.split))
            return 0;
    if (r->nskips == SKIPS_MAX)
        return 0;
    if (!r->skips && !(r->skips = malloc(SKIPS_MAX * sizeof *r->skips)))
        return ZP_ENOMEM;
    r->skips[r->nskips++] = s;
    return 0;
}

static void on_loader_lost(report_t *r, const msgpack_object *b)
{
    zp_rec_loader_lost_t x;
    zp_record_decode(ZP_REC_LOADER_LOST, b, &x);
    r->loaders_lost++;
    r->requeued += x.requeued > 0 ? x.requeued : 0;
}

/* One record's body: {kind, stage, ...}. */
static int on_record(report_t *r, const msgpack_object *b)
{
    if (b->type != MSGPACK_OBJECT_MAP)
        return ZP_EPROTO;
    zp_rec_head_t h;
    zp_record_type_t type = zp_record_head(b, &h);
    if (h.time > 0 && (r->t0 <= 0 || h.time < r->t0))
        r->t0 = h.time;
    if (type == ZP_REC_AUTOSCALE) /* the supervisor's: no stage of its own */
        return zp_autoscale_log_add(&r->autoscale, b);
    int stage = zp_names_stage_of(h.stage);
    if (stage < 0)
        return ZP_EPROTO;
    switch (type) {
    case ZP_REC_TIMER: return on_timer(r, stage, b);
    case ZP_REC_STATS: return on_stats(r, stage, h.instance, b);
    case ZP_REC_EPOCH_END: return on_epoch(r, b);
    case ZP_REC_TRAIN_EPOCH: return on_program_epoch(r, 0, b);
    case ZP_REC_TEST_EPOCH: return on_program_epoch(r, 1, b);
    case ZP_REC_SAMPLE_SKIPPED: return on_skip(r, b);
    case ZP_REC_LOADER_LOST: on_loader_lost(r, b); return 0;
    default: return 0; /* a record the report does not use, or one it does not know */
    }
}

/* One record for the scan: one this version does not understand is skipped
 * and counted. */
static int scan_record(void *ctx, const msgpack_object *o)
{
    report_t *r = ctx;
    r->events++;
    int e = on_record(r, o);
    if (e == ZP_EPROTO)
        r->bad++;
    return e == ZP_EPROTO ? 0 : e;
}

static int load(report_t *r, const char *run_dir, char *err, size_t errlen)
{
    zp_runscan_t scan;
    int rc = zp_runscan(run_dir, scan_record, r, &scan, err, errlen);
    r->skipped_bytes = scan.skipped_bytes;
    r->skipped_records = scan.skipped_records;
    snprintf(r->missing, sizeof r->missing, "%s", scan.missing);
    r->source = scan.source;
    if (rc == ZP_ENOMEM)
        snprintf(err, errlen, "%s: out of memory", run_dir);
    return rc;
}

static void sum_stages(const report_t *r, stage_sum_t *out)
{
    memset(out, 0, STAGES * sizeof *out);
    for (int i = 0; i < r->ninst; i++) {
        const inst_t *e = &r->inst[i];
        stage_sum_t *s = &out[e->stage];
        double up = e->uptime > 0 ? e->uptime : 1;
        s->instances++;
        s->items += e->items;
        s->items_per_s += e->items / up;
        s->errors += e->errors;
        s->busy += e->busy / up, s->wait_in += e->wait_in / up, s->wait_out += e->wait_out / up;
    }
    for (int s = 0; s < STAGES; s++)
        if (out[s].instances)
            out[s].busy /= out[s].instances, out[s].wait_in /= out[s].instances,
                out[s].wait_out /= out[s].instances;
}

/* The trainer's epochs' time in all, seconds (the series are in ms). */
static double epoch_seconds(const report_t *r)
{
    const series_t *ep = &r->series[ZP_STAGE_TRAINER][ZP_R_EPOCH];
    double ms = 0;
    for (size_t i = 0; i < ep->n; i++)
        ms += ep->v[i];
    return ms / 1000;
}

/* The share of the trainer's epoch time spent in io (waiting for a batch); -1 without samples. */
static double wait_share(const report_t *r)
{
    const series_t *io = &r->series[ZP_STAGE_TRAINER][ZP_R_IO],
                   *ep = &r->series[ZP_STAGE_TRAINER][ZP_R_EPOCH];
    double a = 0, b = 0;
    for (size_t i = 0; i < io->n; i++)
        a += io->v[i];
    for (size_t i = 0; i < ep->n; i++)
        b += ep->v[i];
    return b > 0 ? a / b : -1;
}

int zp_report_bottleneck(const zp_data_stages_t *d, double wait, char *stage, size_t slen,
                         char *buf, size_t len)
{
    snprintf(stage, slen, "%s", "unknown");
    if (wait < 0) {
        snprintf(buf, len, "No trainer timings yet: the run has not finished an epoch.");
        return -1;
    }
    if (d->seconds < ZP_ADVICE_MIN_S) {
        snprintf(buf, len, "The trainer waited for data %.1f%% of its time over %.1f s of epochs: "
                 "too short a run for its shares to name a bottleneck (start-up weighs on "
                 "them); a run of %.0f s or more gets advice.", 100 * wait, d->seconds,
                 ZP_ADVICE_MIN_S);
        return -1;
    }
    if (wait < 0.10) {
        snprintf(stage, slen, "%s", zp_names_stage(ZP_STAGE_TRAINER));
        snprintf(buf, len, "The trainer is the bottleneck: it waited for data %.1f%% of its time, so "
                 "the data pipeline keeps up; a faster step (trainer.threads, a GPU backend) "
                 "speeds the run up.", 100 * wait);
        return 3;
    }
    int hot = 0; /* the busiest data stage: loader, cache or prefetch */
    for (int i = 1; i < 3; i++)
        if (d->busy[i] > d->busy[hot])
            hot = i;
    if (d->busy[hot] < 0.5) {
        snprintf(buf, len, "The trainer waited for data %.1f%% of its time while no data stage was "
                 "busy more than half of it: a latency problem, not a throughput one; try a bigger "
                 "prefetch.depth and prefetch.window.", 100 * wait);
        return -1;
    }
    snprintf(stage, slen, "%s", zp_names_stage(hot)); /* the data stages lead names.h */
    if (hot == 0)
        snprintf(buf, len, "The loaders are the bottleneck: the trainer waited for data %.1f%% of "
                 "its time while the %d loader(s) were busy %.0f%% of theirs; try more loaders "
                 "(loader.workers=%d) or warm the cache (zeus-pipe warm CONFIG) so that epochs "
                 "read from LMDB.", 100 * wait, d->loaders, 100 * d->busy[0], 2 * d->loaders);
    else if (hot == 1)
        snprintf(buf, len, "The cache stage is the bottleneck: the trainer waited for data %.1f%% "
                 "of its time while the cache stage was busy %.0f%% of its; try a larger "
                 "loader.task_size (fewer, bigger messages) or a larger cache.commit_every.",
                 100 * wait, 100 * d->busy[1]);
    else
        snprintf(buf, len, "The prefetch stage is the bottleneck: the trainer waited for data "
                 "%.1f%% of its time while the prefetch stage was busy %.0f%% of its; try more "
                 "prefetch.readers and a bigger prefetch.depth.", 100 * wait, 100 * d->busy[2]);
    return hot;
}

/* One sentence: which stage limits the run, and what to try. */
static void bottleneck(const stage_sum_t *s, double wait, double seconds, char *stage, size_t slen,
                       char *buf, size_t len)
{
    zp_data_stages_t d = {.busy = {s[0].busy, s[1].busy, s[2].busy}, .loaders = s[0].instances,
                          .seconds = seconds};
    zp_report_bottleneck(&d, wait, stage, slen, buf, len);
}

/* A loss or an accuracy, "-" when absent (< 0). */
static void figure(FILE *out, int width, double v)
{
    if (v < 0 || !isfinite(v))
        fprintf(out, "%*s  ", width, "-");
    else
        fprintf(out, "%*.4f  ", width, v);
}

static void text_epochs(const report_t *r, FILE *out)
{
    int any = 0;
    for (int64_t e = 0; e < r->nrows; e++)
        any |= r->rows[e].have_train;
    if (!any)
        return;
    fprintf(out, "\n%5s  %10s  %9s  %9s  %9s  %10s  %7s\n", "epoch", "train_loss", "train_acc",
            "test_loss", "test_acc", "samples/s", "time");
    for (int64_t e = 0; e < r->nrows; e++) {
        const epoch_row_t *w = &r->rows[e];
        if (!w->have_train)
            continue;
        fprintf(out, "%5lld  ", (long long)e + 1);
        figure(out, 10, w->train_loss);
        figure(out, 9, w->train_acc);
        figure(out, 9, w->have_test ? w->test_loss : -1);
        figure(out, 9, w->have_test ? w->test_acc : -1);
        fprintf(out, "%9.0f/s  %6.1fs\n", w->samples_per_s, w->seconds);
    }
}

static void text_regions(report_t *r, FILE *out)
{
    fprintf(out, "\ntime per region (ms; all instances of a stage together)\n");
    fprintf(out, "%-9s %-9s %9s %9s %9s %9s %9s %9s %10s\n", "stage", "region", "count", "min",
            "mean", "median", "max", "stdev", "total_s");
    for (int s = 0; s < STAGES; s++)
        for (int g = 0; g < ZP_R_COUNT; g++) {
            series_t *x = &r->series[s][g];
            if (!x->n)
                continue;
            zp_region_stats_t st;
            zp_timer_region_stats(x->v, x->n, &st);
            fprintf(out, "%-9s %-9s %9lld %9.3f %9.3f %9.3f %9.3f %9.3f %10.2f\n", zp_names_stage(s),
                    zp_timer_region_name(g), (long long)st.count, st.min, st.mean, st.median, st.max,
                    st.stdev, st.total / 1e3);
        }
}

static void text_stages(const stage_sum_t *s, FILE *out)
{
    fprintf(out, "\n%-9s %5s %12s %12s %6s %8s %9s %7s\n", "stage", "inst", "items", "items/s",
            "busy", "wait-in", "wait-out", "errors");
    for (int i = 0; i < STAGES; i++)
        if (s[i].instances)
            fprintf(out, "%-9s %5d %12.0f %12.1f %5.1f%% %7.1f%% %8.1f%% %7.0f\n", zp_names_stage(i),
                    s[i].instances, s[i].items, s[i].items_per_s, 100 * s[i].busy,
                    100 * s[i].wait_in, 100 * s[i].wait_out, s[i].errors);
}

static void json_num(FILE *out, const char *key, double v, int comma)
{
    if (isfinite(v))
        fprintf(out, "\"%s\":%.6g%s", key, v, comma ? "," : "");
    else
        fprintf(out, "\"%s\":null%s", key, comma ? "," : "");
}

static void json_report(report_t *r, const stage_sum_t *s, double wait, const char *hot,
                        const char *advice, FILE *out)
{
    fprintf(out, "{\"run\":");
    zp_json_str(out, r->run);
    fprintf(out, ",\"missing\":");
    zp_json_str(out, r->missing);
    fprintf(out, ",\"skipped_bytes\":%lld,\"skipped_records\":%lld", (long long)r->skipped_bytes,
            (long long)r->skipped_records);
    fprintf(out, ",\"epochs\":[");
    int first = 1;
    for (int64_t e = 0; e < r->nrows; e++) {
        const epoch_row_t *w = &r->rows[e];
        if (!w->have_train)
            continue;
        fprintf(out, "%s{\"epoch\":%lld,", first ? "" : ",", (long long)e + 1);
        first = 0;
        json_num(out, "train_loss", w->train_loss < 0 ? NAN : w->train_loss, 1); /* absent: null */
        json_num(out, "train_accuracy", w->train_acc < 0 ? NAN : w->train_acc, 1);
        json_num(out, "test_loss", w->have_test && w->test_loss >= 0 ? w->test_loss : NAN, 1);
        json_num(out, "test_accuracy", w->have_test && w->test_acc >= 0 ? w->test_acc : NAN, 1);
        json_num(out, "samples_per_s", w->samples_per_s, 1);
        json_num(out, "seconds", w->seconds, 0);
        fputc('}', out);
    }
    fprintf(out, "],\"regions\":[");
    first = 1;
    for (int i = 0; i < STAGES; i++)
        for (int g = 0; g < ZP_R_COUNT; g++) {
            series_t *x = &r->series[i][g];
            if (!x->n)
                continue;
            zp_region_stats_t st;
            zp_timer_region_stats(x->v, x->n, &st);
            fprintf(out, "%s{\"stage\":\"%s\",\"region\":\"%s\",\"count\":%lld,", first ? "" : ",",
                    zp_names_stage(i), zp_timer_region_name(g), (long long)st.count);
            first = 0;
            json_num(out, "min_ms", st.min, 1);
            json_num(out, "mean_ms", st.mean, 1);
            json_num(out, "median_ms", st.median, 1);
            json_num(out, "max_ms", st.max, 1);
            json_num(out, "stdev_ms", st.stdev, 1);
            json_num(out, "total_s", st.total / 1e3, 0);
            fputc('}', out);
        }
    fprintf(out, "],\"stages\":[");
    first = 1;
    for (int i = 0; i < STAGES; i++) {
        if (!s[i].instances)
            continue;
        fprintf(out, "%s{\"stage\":\"%s\",\"instances\":%d,", first ? "" : ",", zp_names_stage(i),
                s[i].instances);
        first = 0;
        json_num(out, "items", s[i].items, 1);
        json_num(out, "items_per_s", s[i].items_per_s, 1);
        json_num(out, "busy", s[i].busy, 1);
        json_num(out, "wait_in", s[i].wait_in, 1);
        json_num(out, "wait_out", s[i].wait_out, 1);
        json_num(out, "errors", s[i].errors, 0);
        fputc('}', out);
    }
    fprintf(out, "],\"loaders_lost\":%lld,\"tasks_requeued\":%lld,\"skips\":%lld,"
                 "\"skipped_samples\":[", (long long)r->loaders_lost, (long long)r->requeued,
            (long long)r->skip_events);
    for (int i = 0; i < r->nskips; i++) {
        fprintf(out, "%s{\"split\":", i ? "," : "");
        zp_json_str(out, r->skips[i].split);
        fprintf(out, ",\"index\":%lld,\"error\":", (long long)r->skips[i].index);
        zp_json_str(out, r->skips[i].error);
        fputc('}', out);
    }
    fprintf(out, "],");
    zp_autoscale_log_json(&r->autoscale, r->t0, out);
    json_num(out, "trainer_wait_share", wait >= 0 ? wait : NAN, 1);
    fprintf(out, "\"bottleneck\":{\"stage\":\"%s\",\"advice\":", hot);
    zp_json_str(out, advice);
    fprintf(out, "}}\n");
}

static void release(report_t *r)
{
    for (int s = 0; s < STAGES; s++)
        for (int g = 0; g < ZP_R_COUNT; g++)
            free(r->series[s][g].v);
    free(r->inst);
    free(r->rows);
    free(r->skips);
    zp_autoscale_log_free(&r->autoscale);
    free(r);
}

int zp_report(const char *run_dir, FILE *text, FILE *json, char *err, size_t errlen)
{
    report_t *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return ZP_ENOMEM;
    }
    const char *base = strrchr(run_dir, '/');
    snprintf(r->run, sizeof r->run, "%s", base && base[1] ? base + 1 : run_dir);
    int rc = load(r, run_dir, err, errlen);
    if (rc) {
        release(r);
        return rc;
    }
    stage_sum_t s[STAGES];
    sum_stages(r, s);
    double wait = wait_share(r);
    char hot[16], advice[600];
    bottleneck(s, wait, epoch_seconds(r), hot, sizeof hot, advice, sizeof advice);
    if (text) {
        fprintf(text, "run %s\n", r->run);
        if (r->missing[0])
            fprintf(text, "(%s)\n", r->missing);
        text_epochs(r, text);
        text_regions(r, text);
        text_stages(s, text);
        if (r->nskips) {
            fprintf(text, "\nSkipped samples (loader.on_error: skip): %d distinct, %lld skips in "
                          "all%s\n", r->nskips, (long long)r->skip_events,
                    r->nskips > 10 ? "; the first 10 (all in report.json):" : ":");
            for (int i = 0; i < r->nskips && i < 10; i++)
                fprintf(text, "  %s %lld: %s\n", r->skips[i].split, (long long)r->skips[i].index,
                        r->skips[i].error);
        }
        if (r->loaders_lost)
            fprintf(text, "\nLoaders lost (dead or silent past loader.liveness): %lld; tasks "
                          "re-queued: %lld.\n", (long long)r->loaders_lost, (long long)r->requeued);
        zp_autoscale_log_text(&r->autoscale, r->t0, text);
        if (wait >= 0)
            fprintf(text, "\nThe trainer waited for data %.1f%% of its time.\n", 100 * wait);
        fprintf(text, "%s\n", advice);
        if (r->bad)
            fprintf(text, "(%lld records of %s were not understood and skipped)\n",
                    (long long)r->bad, r->source);
        if (r->skipped_records)
            fprintf(text, "(%s: skipped %lld bytes (%lld torn or garbled record%s); "
                          "this report is of the rest)\n",
                    r->source, (long long)r->skipped_bytes, (long long)r->skipped_records,
                    r->skipped_records == 1 ? "" : "s");
    }
    if (json)
        json_report(r, s, wait, hot, advice, json); /* regions were sorted above: same stats */
    release(r);
    return 0;
}

int zp_run_summary(const char *run_dir, zp_run_summary_t *out, char *err, size_t errlen)
{
    *out = (zp_run_summary_t){0, -1, -1, -1, -1, 0};
    report_t *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return ZP_ENOMEM;
    }
    int rc = load(r, run_dir, err, errlen);
    for (int64_t e = 0; !rc && e < r->nrows; e++) {
        const epoch_row_t *w = &r->rows[e];
        if (!w->have_train)
            continue;
        out->epochs++;
        out->seconds += w->seconds;
        out->train_loss = w->train_loss;
        out->test_loss = w->have_test ? w->test_loss : -1;
        out->test_acc = w->have_test ? w->test_acc : -1;
        if (w->have_test && w->test_acc > out->best_test_acc)
            out->best_test_acc = w->test_acc;
    }
    release(r);
    return rc;
}

int zp_report_write(const char *run_dir, FILE *out)
{
    /* written beside, then renamed over: a report that cannot be made (no
     * events.msgpack, a full disk) leaves the previous one, never empty files */
    char text_tmp[PATH_MAX + 32], json_tmp[PATH_MAX + 32], path[PATH_MAX + 32],
        err[PATH_MAX + 128];
    snprintf(text_tmp, sizeof text_tmp, "%s/report.txt.tmp", run_dir);
    snprintf(json_tmp, sizeof json_tmp, "%s/report.json.tmp", run_dir);
    FILE *text = fopen(text_tmp, "w");
    FILE *json = text ? fopen(json_tmp, "w") : NULL;
    int rc = !text || !json ? -errno : zp_report(run_dir, text, json, err, sizeof err);
    if (!text || !json)
        snprintf(err, sizeof err, "%s: %s", text ? json_tmp : text_tmp, strerror(errno));
    if (text && fclose(text) && !rc)
        rc = -errno, snprintf(err, sizeof err, "%s: %s", text_tmp, strerror(errno));
    if (json && fclose(json) && !rc)
        rc = -errno, snprintf(err, sizeof err, "%s: %s", json_tmp, strerror(errno));
    snprintf(path, sizeof path, "%s/report.txt", run_dir);
    if (!rc && rename(text_tmp, path))
        rc = -errno, snprintf(err, sizeof err, "%s: %s", path, strerror(errno));
    snprintf(path, sizeof path, "%s/report.json", run_dir);
    if (!rc && rename(json_tmp, path))
        rc = -errno, snprintf(err, sizeof err, "%s: %s", path, strerror(errno));
    if (rc) {
        unlink(text_tmp);
        unlink(json_tmp);
    }
    if (!rc && out) {
        snprintf(path, sizeof path, "%s/report.txt", run_dir);
        FILE *f = fopen(path, "r");
        char buf[4096];
        size_t n;
        while (f && (n = fread(buf, 1, sizeof buf, f)) > 0)
            fwrite(buf, 1, n, out);
        if (f)
            fclose(f);
    }
    if (rc)
        zp_error("cannot write the report: %s", err);
    return rc;
}

/* report_html.c — RUN/report.html: what a run's records say, read once, as
 * one page of inline SVG plots and tables (report_html.h). */
#define _GNU_SOURCE
#include "pipeline/report/report_html.h"
#include "pipeline/runtime/dataset.h"
#include "pipeline/runtime/files.h"
#include "pipeline/report/html.h"
#include "pipeline/runtime/names.h"
#include "pipeline/report/report_autoscale.h"
#include "pipeline/report/report_page.h"
#include "pipeline/report/runscan.h"
#include "pipeline/report/svg.h"
#include "pipeline/runtime/timer.h"
#include "schemas/errors.h"
#include "schemas/records.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STAGES ZP_STAGE_COUNT
#define SKIPS_MAX 10000 /* skipped indices kept per split, for the checksum */
#define SKIPS_SHOWN 10

typedef struct { /* one stats record */
    double t, items_per_s, wait_in, busy_s, uptime_s;
    int64_t instance;
    int final;
} stat_pt_t;

typedef struct {
    stat_pt_t *v; /* owned */
    size_t n, cap;
} stat_list_t;

typedef struct {
    int64_t index;
    char error[ZP_REC_TEXT_MAX];
} shown_skip_t;

typedef struct {
    char run[256];
    zp_runscan_t scan;
    zp_page_epoch_t *rows; /* by epoch; owned */
    int64_t nrows;
    zp_xy_t step_loss, step_acc; /* x in epochs */
    stat_list_t stats[STAGES];
    double region_s[STAGES][ZP_R_COUNT];
    int64_t skipped_idx[ZP_SPLITS][SKIPS_MAX]; /* distinct skipped indices per split */
    int nskipped[ZP_SPLITS];
    shown_skip_t shown[SKIPS_SHOWN];
    int nshown;
    int64_t skip_events, loaders_lost, requeued;
    zp_autoscale_log_t autoscale; /* the supervisor's loader.autoscale decisions */
} page_t;

static int on_stats(page_t *p, int stage, const zp_rec_head_t *h, const msgpack_object *b)
{
    zp_rec_stats_t x;
    zp_record_decode(ZP_REC_STATS, b, &x);
    stat_list_t *l = &p->stats[stage];
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        stat_pt_t *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return ZP_ENOMEM;
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = (stat_pt_t){h->time, x.items_per_s, x.wait_in, x.total_busy_s, x.uptime_s,
                               h->instance, x.final == 1};
    return 0;
}

static int on_timer(page_t *p, int stage, const msgpack_object *b)
{
    zp_rec_timer_t t;
    zp_record_decode(ZP_REC_TIMER, b, &t);
    int region = zp_timer_region_of(t.region);
    if (region < 0 || !t.ns || t.ns->type != MSGPACK_OBJECT_ARRAY)
        return 0;
    for (uint32_t i = 0; i < t.ns->via.array.size; i++) {
        const msgpack_object *x = &t.ns->via.array.ptr[i];
        if (x->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
            p->region_s[stage][region] += (double)x->via.u64 / 1e9;
    }
    return 0;
}

/* The row of `epoch`, grown as needed (a new row's figures absent: -1); NULL
 * for an epoch past the run's own count (a garbled record, not a reason for
 * 10^6 rows: *rc 0) or out of memory. */
static zp_page_epoch_t *row_at(page_t *p, int64_t epoch, int64_t epochs, int *rc)
{
    *rc = 0;
    if (epoch < 0 || epoch >= 1000000 || (epochs > 0 && epoch >= epochs))
        return NULL;
    if (epoch >= p->nrows) {
        int64_t n = epoch + 1 > 2 * p->nrows ? epoch + 16 : 2 * p->nrows;
        zp_page_epoch_t *v = realloc(p->rows, (size_t)n * sizeof *v);
        if (!v) {
            *rc = ZP_ENOMEM;
            return NULL;
        }
        memset(v + p->nrows, 0, (size_t)(n - p->nrows) * sizeof *v);
        for (int64_t e = p->nrows; e < n; e++)
            for (int s = 0; s < ZP_SPLITS; s++)
                v[e].loss[s] = v[e].acc[s] = -1;
        p->rows = v, p->nrows = n;
    }
    return &p->rows[epoch];
}

static int on_epoch(page_t *p, const msgpack_object *b)
{
    zp_rec_epoch_end_t x;
    zp_record_decode(ZP_REC_EPOCH_END, b, &x);
    int split = !strcmp(x.split, zp_dataset_split_name(ZP_SPLIT_TEST)), rc;
    if (!split && strcmp(x.split, zp_dataset_split_name(ZP_SPLIT_TRAIN)))
        return 0;
    zp_page_epoch_t *r = row_at(p, x.epoch, x.epochs, &rc);
    if (!r)
        return rc;
    r->have[split] = 1;
    if (ZP_HAS(&x, EPOCH_END, loss)) /* a program's comes in its train_epoch/test_epoch record */
        r->loss[split] = x.loss;
    if (ZP_HAS(&x, EPOCH_END, accuracy))
        r->acc[split] = x.accuracy;
    r->samples[split] = x.samples, r->expected[split] = x.expected_samples;
    r->skipped[split] = x.skipped, r->distinct[split] = x.distinct;
    snprintf(r->checksum[split], sizeof r->checksum[split], "%.16s", x.index_checksum);
    if (!split)
        r->samples_per_s = x.samples_per_s, r->seconds = x.seconds;
    return 0;
}

/* A program's own figures of an epoch (zp.log("test_epoch", loss=..., accuracy=...)). */
static int on_program_epoch(page_t *p, int split, const msgpack_object *b)
{
    zp_rec_train_epoch_t x; /* test_epoch has the very same fields */
    zp_record_decode(split ? ZP_REC_TEST_EPOCH : ZP_REC_TRAIN_EPOCH, b, &x);
    int rc;
    zp_page_epoch_t *r = row_at(p, x.epoch, 0, &rc);
    if (!r)
        return rc;
    if (ZP_HAS(&x, TRAIN_EPOCH, loss))
        r->loss[split] = x.loss;
    if (ZP_HAS(&x, TRAIN_EPOCH, accuracy))
        r->acc[split] = x.accuracy;
    return 0;
}

static int on_step(page_t *p, const msgpack_object *b)
{
    zp_rec_step_t x;
    zp_record_decode(ZP_REC_STEP, b, &x);
    double at = (double)x.step / (x.steps_per_epoch > 0 ? (double)x.steps_per_epoch : 1);
    int rc = zp_xy_push(&p->step_loss, at, x.loss);
    return rc ? rc : zp_xy_push(&p->step_acc, at, x.accuracy);
}

static void on_skip(page_t *p, const msgpack_object *b)
{
    zp_rec_sample_skipped_t x;
    zp_record_decode(ZP_REC_SAMPLE_SKIPPED, b, &x);
    int split = !strcmp(x.split, zp_dataset_split_name(ZP_SPLIT_TEST));
    p->skip_events++;
    for (int i = 0; i < p->nskipped[split]; i++)
        if (p->skipped_idx[split][i] == x.index)
            return;
    if (p->nskipped[split] < SKIPS_MAX)
        p->skipped_idx[split][p->nskipped[split]++] = x.index;
    if (p->nshown < SKIPS_SHOWN) {
        p->shown[p->nshown].index = x.index;
        memcpy(p->shown[p->nshown++].error, x.error, sizeof x.error);
    }
}

static int on_body(void *ctx, const msgpack_object *b)
{
    page_t *p = ctx;
    zp_rec_head_t h;
    zp_record_type_t type = zp_record_head(b, &h);
    if (type == ZP_REC_AUTOSCALE) /* the supervisor's: no stage of its own */
        return zp_autoscale_log_add(&p->autoscale, b);
    int stage = zp_names_stage_of(h.stage);
    if (stage < 0)
        return 0; /* a stage this version does not know */
    switch (type) {
    case ZP_REC_STATS: return isfinite(h.time) ? on_stats(p, stage, &h, b) : 0;
    case ZP_REC_TIMER: return on_timer(p, stage, b);
    case ZP_REC_EPOCH_END: return on_epoch(p, b);
    case ZP_REC_TRAIN_EPOCH: return on_program_epoch(p, 0, b);
    case ZP_REC_TEST_EPOCH: return on_program_epoch(p, 1, b);
    case ZP_REC_STEP: return on_step(p, b);
    case ZP_REC_SAMPLE_SKIPPED: on_skip(p, b); return 0;
    case ZP_REC_LOADER_LOST: {
        zp_rec_loader_lost_t x;
        zp_record_decode(ZP_REC_LOADER_LOST, b, &x);
        p->loaders_lost++, p->requeued += x.requeued > 0 ? x.requeued : 0;
        return 0;
    }
    default: return 0;
    }
}

static int by_time(const void *a, const void *b)
{
    const stat_pt_t *x = a, *y = b;
    return (x->t > y->t) - (x->t < y->t);
}

/* A stage's value over time: after each of its records, the sum (or the
 * mean) of every live instance's latest value; an instance's final record
 * is its last. `wait` picks wait_in over items_per_s. */
static int stage_series(const stat_list_t *l, double t0, int wait, zp_xy_t *out)
{
    enum { INST_MAX = 1024 };
    int64_t id[INST_MAX];
    double val[INST_MAX];
    int live[INST_MAX], n = 0;
    for (size_t i = 0; i < l->n; i++) {
        const stat_pt_t *s = &l->v[i];
        int k = 0;
        while (k < n && id[k] != s->instance)
            k++;
        if (k == n && n == INST_MAX)
            continue;
        if (k == n)
            id[n++] = s->instance;
        val[k] = wait ? s->wait_in : s->items_per_s;
        live[k] = 1;
        double sum = 0;
        int count = 0;
        for (int j = 0; j < n; j++)
            if (live[j] && isfinite(val[j]))
                sum += val[j], count++;
        live[k] = !s->final;
        int rc = zp_xy_push(out, s->t - t0, wait && count ? sum / count : sum);
        if (rc)
            return rc;
    }
    return 0;
}

/* The mean over a stage's instances of each one's busy share in its last
 * record (in the order read; one pass: a run of a day has ~10^5 records a
 * stage). Instances past INST_MAX are left out. */
static double mean_busy(const stat_list_t *l, int *instances)
{
    enum { INST_MAX = 1024 };
    int64_t id[INST_MAX];
    double share[INST_MAX];
    int n = 0, count = 0;
    for (size_t i = 0; i < l->n; i++) {
        int k = 0;
        while (k < n && id[k] != l->v[i].instance)
            k++;
        if (k == n && n == INST_MAX)
            continue;
        if (k == n)
            id[n++] = l->v[i].instance;
        share[k] = l->v[i].uptime_s > 0 ? l->v[i].busy_s / l->v[i].uptime_s : -1;
    }
    double sum = 0;
    for (int k = 0; k < n; k++)
        if (share[k] >= 0)
            sum += share[k], count++;
    *instances = count;
    return count ? sum / count : 0;
}

/* The bottleneck sentence from the same figures report.txt uses: each
 * instance's last busy share, and the trainer's io time over its epochs. */
static void bottleneck(const page_t *p, char *buf, size_t len)
{
    zp_data_stages_t d = {{0}, 0, 0};
    for (int s = 0; s < 3; s++) {
        int count;
        d.busy[s] = mean_busy(&p->stats[s], &count);
        if (s == ZP_STAGE_LOADER)
            d.loaders = count;
    }
    double io = p->region_s[ZP_STAGE_TRAINER][ZP_R_IO], ep = p->region_s[ZP_STAGE_TRAINER][ZP_R_EPOCH];
    d.seconds = ep;
    char stage[16];
    zp_report_bottleneck(&d, ep > 0 ? io / ep : -1, stage, sizeof stage, buf, len);
}

static void release(page_t *p)
{
    for (int s = 0; s < STAGES; s++)
        free(p->stats[s].v);
    free(p->rows);
    zp_autoscale_log_free(&p->autoscale);
    zp_xy_free(&p->step_loss);
    zp_xy_free(&p->step_acc);
    free(p);
}

static void curves(FILE *out, const page_t *p, int acc)
{
    zp_xy_t per[ZP_SPLITS] = {{0}};
    for (int64_t e = 0; e < p->nrows; e++)
        for (int s = 0; s < ZP_SPLITS; s++) {
            double v = acc ? p->rows[e].acc[s] : p->rows[e].loss[s];
            if (p->rows[e].have[s] && v >= 0 && zp_xy_push(&per[s], (double)e + 1, v))
                break; /* out of memory: fewer points */
        }
    const zp_xy_t *steps = acc ? &p->step_acc : &p->step_loss;
    zp_svg_series_t s[3] = {
        {"train (per epoch)", "curve", &per[ZP_SPLIT_TRAIN], 1, 0},
        {"test (per epoch)", "curve", &per[ZP_SPLIT_TEST], 1, 0},
        {"train (per step record)", "curve", steps, 0, 1},
    };
    zp_svg_plot_t plot = {acc ? "accuracy" : "loss", acc ? "Accuracy" : "Loss", "epoch",
                          acc ? "accuracy" : "loss", acc};
    zp_svg_lines(out, &plot, s, steps->n ? 3 : 2);
    for (int i = 0; i < ZP_SPLITS; i++)
        zp_xy_free(&per[i]);
}

/* Items/s of every stage, and the trainer's wait, over seconds since the first stats record. */
static int timelines(FILE *out, page_t *p)
{
    double t0 = INFINITY;
    for (int s = 0; s < STAGES; s++) {
        stat_list_t *l = &p->stats[s];
        if (l->n)
            qsort(l->v, l->n, sizeof *l->v, by_time);
        if (l->n && l->v[0].t < t0)
            t0 = l->v[0].t;
    }
    zp_xy_t xy[STAGES] = {{0}}, wait = {0};
    zp_svg_series_t series[STAGES];
    int n = 0, rc = 0;
    for (int s = 0; s < STAGES && !rc; s++)
        if (p->stats[s].n) {
            rc = stage_series(&p->stats[s], t0, 0, &xy[s]);
            series[n++] = (zp_svg_series_t){zp_names_stage(s), "stage", &xy[s], 0, 0};
        }
    if (!rc)
        rc = stage_series(&p->stats[ZP_STAGE_TRAINER], t0, 1, &wait);
    if (!rc) {
        zp_svg_plot_t plot = {"throughput", "Items per second of each stage (all its instances)",
                              "seconds", "items/s", 0};
        zp_svg_lines(out, &plot, series, n);
        zp_svg_series_t w = {"trainer", "stage", &wait, 0, 0};
        zp_svg_plot_t wp = {"data-wait", "Share of the trainer's time spent waiting for data",
                            "seconds", "waiting", 1};
        zp_svg_lines(out, &wp, &w, 1);
    }
    for (int s = 0; s < STAGES; s++)
        zp_xy_free(&xy[s]);
    zp_xy_free(&wait);
    return rc;
}

static void regions(FILE *out, const page_t *p)
{
    zp_svg_bar_t bars[STAGES * ZP_R_COUNT];
    char labels[STAGES * ZP_R_COUNT][48];
    int n = 0;
    for (int s = 0; s < STAGES; s++)
        for (int g = 0; g < ZP_R_COUNT; g++)
            if (p->region_s[s][g] > 0) {
                snprintf(labels[n], sizeof labels[n], "%s %s", zp_names_stage(s), zp_timer_region_name(g));
                bars[n] = (zp_svg_bar_t){labels[n], p->region_s[s][g]};
                n++;
            }
    if (n)
        zp_svg_bars(out, "regions", "Time per stage and region, all instances together (regions "
                    "nest: a batch holds its io, forward and backward)", bars, n, "s");
    else
        fputs("<p class=\"none\">No time per region: no timer samples.</p>\n", out);
}

static void skips(FILE *out, const page_t *p)
{
    if (!p->skip_events && !p->loaders_lost)
        return;
    fputs("<h2>Faults</h2>\n", out);
    if (p->skip_events) {
        fprintf(out, "<p>Skipped samples (loader.on_error: skip): %d distinct, %lld skips in all%s</p><ul>\n",
                p->nskipped[0] + p->nskipped[1], (long long)p->skip_events,
                p->nshown == SKIPS_SHOWN ? "; the first ten (all in report.json):" : ":");
        for (int i = 0; i < p->nshown; i++) {
            fprintf(out, "<li>%lld: ", (long long)p->shown[i].index);
            zp_html_str(out, p->shown[i].error);
            fputs("</li>\n", out);
        }
        fputs("</ul>\n", out);
    }
    if (p->loaders_lost)
        fprintf(out, "<p>Loaders lost (dead or silent past loader.liveness): %lld; tasks re-queued: "
                     "%lld.</p>\n", (long long)p->loaders_lost, (long long)p->requeued);
}

/* The earliest stats record's time: the run's start, as the plots count it. */
static double first_time(const page_t *p)
{
    double t0 = INFINITY;
    for (int s = 0; s < STAGES; s++)
        for (size_t i = 0; i < p->stats[s].n; i++)
            if (p->stats[s].v[i].t < t0)
                t0 = p->stats[s].v[i].t;
    return isfinite(t0) ? t0 : 0;
}

static int write_page(FILE *out, page_t *p)
{
    char advice[600];
    bottleneck(p, advice, sizeof advice);
    zp_page_head(out, "zeus-pipe run ", p->run);
    if (p->scan.missing[0]) {
        fputs("<p class=\"missing\">", out);
        zp_html_str(out, p->scan.missing);
        fputs("</p>\n", out);
    }
    if (p->scan.skipped_records)
        fprintf(out, "<p class=\"missing\">%s: skipped %lld bytes (%lld torn or garbled "
                     "records); this page is of the rest.</p>\n", p->scan.source,
                (long long)p->scan.skipped_bytes, (long long)p->scan.skipped_records);
    fputs("<p class=\"bottleneck\">", out);
    zp_html_str(out, advice);
    fputs("</p>\n<h2>Training</h2>\n", out);
    curves(out, p, 0);
    curves(out, p, 1);
    fputs("<h2>Stages</h2>\n", out);
    int rc = timelines(out, p);
    regions(out, p);
    fputs("<h2>Epochs</h2>\n", out);
    zp_page_epochs(out, p->rows, p->nrows);
    fputs("<h2>Coverage</h2>\n", out);
    const int64_t *idx[ZP_SPLITS] = {p->skipped_idx[0], p->skipped_idx[1]};
    zp_page_coverage(out, p->rows, p->nrows, idx, p->nskipped);
    skips(out, p);
    zp_autoscale_log_html(&p->autoscale, first_time(p), out);
    zp_page_foot(out, "zeus-pipe report RUN --html");
    return rc;
}

int zp_report_html(const char *run_dir, FILE *out, char *err, size_t errlen)
{
    page_t *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return ZP_ENOMEM;
    }
    const char *base = strrchr(run_dir, '/');
    snprintf(p->run, sizeof p->run, "%s", base && base[1] ? base + 1 : run_dir);
    int rc = zp_runscan(run_dir, on_body, p, &p->scan, err, errlen);
    if (!rc)
        rc = write_page(out, p);
    if (rc == ZP_ENOMEM)
        snprintf(err, errlen, "%s: out of memory", run_dir);
    release(p);
    return rc;
}

static int fill(FILE *out, void *run_dir, char *err, size_t errlen)
{
    return zp_report_html(run_dir, out, err, errlen);
}

int zp_report_html_write(const char *run_dir, char *err, size_t errlen)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/report.html", run_dir);
    return zp_files_write_aside(path, fill, (void *)run_dir, err, errlen);
}

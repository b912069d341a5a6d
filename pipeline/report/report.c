/* report.c — the text and JSON report of a run, rendered from its run
 * model (report.h, model.h). */
#define _GNU_SOURCE
#include "pipeline/report/report.h"
#include "pipeline/report/report_html.h"
#include "pipeline/base/files.h"
#include "pipeline/base/json.h"
#include "pipeline/base/log.h"
#include "schemas/errors.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#define STAGES ZP_STAGE_COUNT
#define SKIPS_SHOWN 10 /* in the text; report.json lists every one kept */

/* A loss or an accuracy, "-" when absent (< 0). */
static void figure(FILE *out, int width, double v)
{
    if (v < 0 || !isfinite(v))
        fprintf(out, "%*s  ", width, "-");
    else
        fprintf(out, "%*.4f  ", width, v);
}

/* The figure of split s, or -1 when that split has no record. */
static double of_split(const zp_model_epoch_t *e, int s, const double *v)
{
    return e->have[s] ? v[s] : -1;
}

static void text_epochs(const zp_model_t *m, FILE *out)
{
    int any = 0;
    for (int64_t i = 0; i < m->nepochs; i++)
        any |= m->epoch[i].have[ZP_SPLIT_TRAIN];
    if (!any)
        return;
    fprintf(out, "\n%5s  %10s  %9s  %9s  %9s  %10s  %7s\n", "epoch", "train_loss", "train_acc",
            "test_loss", "test_acc", "samples/s", "time");
    for (int64_t i = 0; i < m->nepochs; i++) {
        const zp_model_epoch_t *e = &m->epoch[i];
        if (!e->have[ZP_SPLIT_TRAIN])
            continue;
        fprintf(out, "%5lld  ", (long long)e->epoch + 1);
        figure(out, 10, e->loss[ZP_SPLIT_TRAIN]);
        figure(out, 9, e->acc[ZP_SPLIT_TRAIN]);
        figure(out, 9, of_split(e, ZP_SPLIT_TEST, e->loss));
        figure(out, 9, of_split(e, ZP_SPLIT_TEST, e->acc));
        fprintf(out, "%9.0f/s  %6.1fs\n", e->samples_per_s, e->seconds);
    }
}

static void text_regions(const zp_model_t *m, FILE *out)
{
    fprintf(out, "\ntime per region (ms; all instances of a stage together)\n");
    fprintf(out, "%-9s %-9s %9s %9s %9s %9s %9s %9s %10s\n", "stage", "region", "count", "min",
            "mean", "median", "max", "stdev", "total_s");
    for (int s = 0; s < STAGES; s++)
        for (int g = 0; g < ZP_R_COUNT; g++) {
            const zp_region_stats_t *st = &m->region[s][g];
            if (st->count)
                fprintf(out, "%-9s %-9s %9lld %9.3f %9.3f %9.3f %9.3f %9.3f %10.2f\n",
                        zp_names_stage(s), zp_timer_region_name(g), (long long)st->count, st->min,
                        st->mean, st->median, st->max, st->stdev, st->total / 1e3);
        }
}

static void text_stages(const zp_model_t *m, FILE *out)
{
    fprintf(out, "\n%-9s %5s %12s %12s %6s %8s %9s %7s\n", "stage", "inst", "items", "items/s",
            "busy", "wait-in", "wait-out", "errors");
    for (int i = 0; i < STAGES; i++) {
        const zp_model_stage_t *s = &m->stage[i];
        if (s->instances)
            fprintf(out, "%-9s %5d %12.0f %12.1f %5.1f%% %7.1f%% %8.1f%% %7.0f\n", zp_names_stage(i),
                    s->instances, s->items, s->items_per_s, 100 * s->busy, 100 * s->wait_in,
                    100 * s->wait_out, s->errors);
    }
}

static void text_faults(const zp_model_t *m, FILE *out)
{
    if (m->nskips) {
        fprintf(out, "\nSkipped samples (loader.on_error: skip): %d distinct, %lld skips in all%s\n",
                m->nskips, (long long)m->skip_events,
                m->nskips > SKIPS_SHOWN ? "; the first 10 (all in report.json):" : ":");
        for (int i = 0; i < m->nskips && i < SKIPS_SHOWN; i++)
            fprintf(out, "  %s %lld: %s\n", zp_dataset_split_name(m->skip[i].split),
                    (long long)m->skip[i].index, m->skip[i].error);
    }
    if (m->loaders_lost)
        fprintf(out, "\nLoaders lost (dead or silent past loader.liveness): %lld; tasks "
                     "re-queued: %lld.\n", (long long)m->loaders_lost, (long long)m->tasks_requeued);
}

void zp_report_text(const zp_model_t *m, FILE *out)
{
    fprintf(out, "run %s\n", m->run);
    if (m->scan.missing[0])
        fprintf(out, "(%s)\n", m->scan.missing);
    text_epochs(m, out);
    text_regions(m, out);
    text_stages(m, out);
    text_faults(m, out);
    zp_report_autoscale_text(&m->autoscale, m->t0, out);
    if (m->wait_share >= 0)
        fprintf(out, "\nThe trainer waited for data %.1f%% of its time.\n", 100 * m->wait_share);
    fprintf(out, "%s\n", m->advice);
    if (m->unread)
        fprintf(out, "(%lld records of %s were not understood and skipped)\n",
                (long long)m->unread, m->scan.source);
    if (m->scan.skipped_records)
        fprintf(out, "(%s: skipped %lld bytes (%lld torn or garbled record%s); "
                     "this report is of the rest)\n",
                m->scan.source, (long long)m->scan.skipped_bytes,
                (long long)m->scan.skipped_records, m->scan.skipped_records == 1 ? "" : "s");
}

/* "key":v (null when v is no number, or — with `absent` — negative), then a comma unless last. */
static void json_num(FILE *out, const char *key, double v, int absent, int last)
{
    if (isfinite(v) && !(absent && v < 0))
        fprintf(out, "\"%s\":%.6g%s", key, v, last ? "" : ",");
    else
        fprintf(out, "\"%s\":null%s", key, last ? "" : ",");
}

static void json_epochs(const zp_model_t *m, FILE *out)
{
    fprintf(out, "\"epochs\":[");
    const char *sep = "";
    for (int64_t i = 0; i < m->nepochs; i++) {
        const zp_model_epoch_t *e = &m->epoch[i];
        if (!e->have[ZP_SPLIT_TRAIN])
            continue;
        fprintf(out, "%s{\"epoch\":%lld,", sep, (long long)e->epoch + 1);
        sep = ",";
        json_num(out, "train_loss", e->loss[ZP_SPLIT_TRAIN], 1, 0);
        json_num(out, "train_accuracy", e->acc[ZP_SPLIT_TRAIN], 1, 0);
        json_num(out, "test_loss", of_split(e, ZP_SPLIT_TEST, e->loss), 1, 0);
        json_num(out, "test_accuracy", of_split(e, ZP_SPLIT_TEST, e->acc), 1, 0);
        json_num(out, "samples_per_s", e->samples_per_s, 0, 0);
        json_num(out, "seconds", e->seconds, 0, 1);
        fputc('}', out);
    }
    fprintf(out, "],");
}

static void json_regions(const zp_model_t *m, FILE *out)
{
    fprintf(out, "\"regions\":[");
    const char *sep = "";
    for (int i = 0; i < STAGES; i++)
        for (int g = 0; g < ZP_R_COUNT; g++) {
            const zp_region_stats_t *st = &m->region[i][g];
            if (!st->count)
                continue;
            fprintf(out, "%s{\"stage\":\"%s\",\"region\":\"%s\",\"count\":%lld,", sep,
                    zp_names_stage(i), zp_timer_region_name(g), (long long)st->count);
            sep = ",";
            json_num(out, "min_ms", st->min, 0, 0);
            json_num(out, "mean_ms", st->mean, 0, 0);
            json_num(out, "median_ms", st->median, 0, 0);
            json_num(out, "max_ms", st->max, 0, 0);
            json_num(out, "stdev_ms", st->stdev, 0, 0);
            json_num(out, "total_s", st->total / 1e3, 0, 1);
            fputc('}', out);
        }
    fprintf(out, "],");
}

static void json_stages(const zp_model_t *m, FILE *out)
{
    fprintf(out, "\"stages\":[");
    const char *sep = "";
    for (int i = 0; i < STAGES; i++) {
        const zp_model_stage_t *s = &m->stage[i];
        if (!s->instances)
            continue;
        fprintf(out, "%s{\"stage\":\"%s\",\"instances\":%d,", sep, zp_names_stage(i), s->instances);
        sep = ",";
        json_num(out, "items", s->items, 0, 0);
        json_num(out, "items_per_s", s->items_per_s, 0, 0);
        json_num(out, "busy", s->busy, 0, 0);
        json_num(out, "wait_in", s->wait_in, 0, 0);
        json_num(out, "wait_out", s->wait_out, 0, 0);
        json_num(out, "errors", s->errors, 0, 1);
        fputc('}', out);
    }
    fprintf(out, "],");
}

static void json_faults(const zp_model_t *m, FILE *out)
{
    fprintf(out, "\"loaders_lost\":%lld,\"tasks_requeued\":%lld,\"skips\":%lld,\"skipped_samples\":[",
            (long long)m->loaders_lost, (long long)m->tasks_requeued, (long long)m->skip_events);
    for (int i = 0; i < m->nskips; i++) {
        fprintf(out, "%s{\"split\":", i ? "," : "");
        zp_json_str(out, zp_dataset_split_name(m->skip[i].split));
        fprintf(out, ",\"index\":%lld,\"error\":", (long long)m->skip[i].index);
        zp_json_str(out, m->skip[i].error);
        fputc('}', out);
    }
    fprintf(out, "],");
}

/* The run's phases (model.h): each one's epochs (from 1), kind, figures and verdict. */
static void json_phases(const zp_model_t *m, FILE *out)
{
    fprintf(out, "\"phases\":[");
    for (int i = 0; i < m->nphases; i++) {
        const zp_model_phase_t *p = &m->phase[i];
        fprintf(out, "%s{\"first_epoch\":%lld,\"last_epoch\":%lld,\"kind\":\"%s\",", i ? "," : "",
                (long long)p->first + 1, (long long)p->last + 1, zp_report_bottleneck_phase_name(p->kind));
        json_num(out, "seconds", p->seconds, 0, 0);
        json_num(out, "trainer_wait_share", p->wait, 1, 0);
        fprintf(out, "\"busy\":{");
        for (int s = 0; s < 3; s++) /* the data stages lead names.h */
            json_num(out, zp_names_stage(s), p->busy[s], 0, s == 2);
        fprintf(out, "},\"loaders\":%d,\"stage\":\"%s\",\"advice\":", p->loaders, p->stage);
        zp_json_str(out, p->advice);
        fputc('}', out);
    }
    fputc(']', out);
}

void zp_report_json(const zp_model_t *m, FILE *out)
{
    fprintf(out, "{\"run\":");
    zp_json_str(out, m->run);
    fprintf(out, ",\"missing\":");
    zp_json_str(out, m->scan.missing);
    fprintf(out, ",\"unread_records\":%lld,\"skipped_bytes\":%lld,\"skipped_records\":%lld,",
            (long long)m->unread, (long long)m->scan.skipped_bytes,
            (long long)m->scan.skipped_records);
    json_epochs(m, out);
    json_regions(m, out);
    json_stages(m, out);
    json_faults(m, out);
    zp_report_autoscale_json(&m->autoscale, m->t0, out);
    json_num(out, "trainer_wait_share", m->wait_share, 1, 0);
    fprintf(out, "\"bottleneck\":{\"stage\":\"%s\",\"advice\":", m->bottleneck);
    zp_json_str(out, m->advice);
    fprintf(out, "},");
    json_phases(m, out);
    fprintf(out, "}\n");
}

int zp_report(const char *run_dir, FILE *text, FILE *json, char *err, size_t errlen)
{
    zp_model_t *m;
    int rc = zp_model_load(&m, run_dir, err, errlen);
    if (rc)
        return rc;
    if (text)
        zp_report_text(m, text);
    if (json)
        zp_report_json(m, json);
    zp_model_destroy(&m);
    return 0;
}

int zp_report_summary(const char *run_dir, zp_run_summary_t *out, char *err, size_t errlen)
{
    *out = (zp_run_summary_t){0, -1, -1, -1, -1, 0};
    zp_model_t *m;
    int rc = zp_model_load(&m, run_dir, err, errlen);
    for (int64_t i = 0; !rc && i < m->nepochs; i++) {
        const zp_model_epoch_t *e = &m->epoch[i];
        if (!e->have[ZP_SPLIT_TRAIN])
            continue;
        out->epochs++;
        out->seconds += e->seconds;
        out->train_loss = e->loss[ZP_SPLIT_TRAIN];
        out->test_loss = of_split(e, ZP_SPLIT_TEST, e->loss);
        out->test_acc = of_split(e, ZP_SPLIT_TEST, e->acc);
        if (e->have[ZP_SPLIT_TEST] && e->acc[ZP_SPLIT_TEST] > out->best_test_acc)
            out->best_test_acc = e->acc[ZP_SPLIT_TEST];
    }
    zp_model_destroy(&m);
    return rc;
}

static int fill_text(FILE *out, void *m, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    zp_report_text(m, out);
    return 0;
}

static int fill_json(FILE *out, void *m, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    zp_report_json(m, out);
    return 0;
}

static int fill_html(FILE *out, void *m, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    zp_report_html_page(m, out);
    return 0;
}

int zp_report_write(const char *run_dir, FILE *out)
{
    static const struct {
        const char *name;
        zp_files_fill_fn *fill;
    } files[] = {{"report.txt", fill_text}, {"report.json", fill_json}, {"report.html", fill_html}};
    char path[PATH_MAX + 32], err[PATH_MAX + 128];
    zp_model_t *m;
    int rc = zp_model_load(&m, run_dir, err, sizeof err); /* once, for every file */
    for (size_t i = 0; !rc && i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", run_dir, files[i].name);
        rc = zp_files_write_aside(path, files[i].fill, m, err, sizeof err);
    }
    if (!rc && out)
        zp_report_text(m, out);
    zp_model_destroy(&m);
    if (rc)
        zp_error("cannot write the report: %s (`zeus-pipe report RUN` tries again)", err);
    return rc;
}

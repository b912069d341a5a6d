/* report_html.c — RUN/report.html: the run model (model.h) as one page of
 * inline SVG plots and tables (report_html.h). */
#define _GNU_SOURCE
#include "pipeline/report/report_html.h"
#include "pipeline/base/files.h"
#include "pipeline/report/escape.h"
#include "pipeline/report/page.h"
#include "pipeline/report/svg.h"

#include <limits.h>
#include <stdio.h>

#define STAGES ZP_STAGE_COUNT
#define SKIPS_SHOWN 10

static void curves(FILE *out, const zp_model_t *m, int acc)
{
    zp_xy_t per[ZP_SPLITS] = {{0}};
    for (int s = 0; s < ZP_SPLITS; s++)
        zp_model_curve(m, s, acc, &per[s]); /* out of memory: fewer points */
    const zp_xy_t *steps = acc ? &m->step_acc : &m->step_loss;
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

/* Items/s of every stage, and the trainer's wait, over seconds since the run's start. */
static void timelines(FILE *out, const zp_model_t *m)
{
    zp_svg_series_t series[STAGES];
    int n = 0;
    for (int s = 0; s < STAGES; s++)
        if (m->stage[s].throughput.n)
            series[n++] = (zp_svg_series_t){zp_names_stage(s), "stage", &m->stage[s].throughput, 0, 0};
    zp_svg_plot_t plot = {"throughput", "Items per second of each stage (all its instances)",
                          "seconds", "items/s", 0};
    zp_svg_lines(out, &plot, series, n);
    zp_svg_series_t w = {"trainer", "stage", &m->trainer_wait, 0, 0};
    zp_svg_plot_t wp = {"data-wait", "Share of the trainer's time spent waiting for data",
                        "seconds", "waiting", 1};
    zp_svg_lines(out, &wp, &w, 1);
}

static void regions(FILE *out, const zp_model_t *m)
{
    zp_svg_bar_t bars[STAGES * ZP_R_COUNT];
    char labels[STAGES * ZP_R_COUNT][48];
    int n = 0;
    for (int s = 0; s < STAGES; s++)
        for (int g = 0; g < ZP_R_COUNT; g++)
            if (m->region[s][g].total > 0) {
                snprintf(labels[n], sizeof labels[n], "%s %s", zp_names_stage(s), zp_timer_region_name(g));
                bars[n] = (zp_svg_bar_t){labels[n], m->region[s][g].total / 1e3};
                n++;
            }
    if (n)
        zp_svg_bars(out, "regions", "Time per stage and region, all instances together (regions "
                    "nest: a batch holds its io, forward and backward)", bars, n, "s");
    else
        fputs("<p class=\"none\">No time per region: no timer samples.</p>\n", out);
}

static void faults(FILE *out, const zp_model_t *m)
{
    if (!m->skip_events && !m->loaders_lost)
        return;
    fputs("<h2>Faults</h2>\n", out);
    if (m->skip_events) {
        fprintf(out, "<p>Skipped samples (loader.on_error: skip): %d distinct, %lld skips in all%s</p><ul>\n",
                m->nskips, (long long)m->skip_events,
                m->nskips >= SKIPS_SHOWN ? "; the first ten (all in report.json):" : ":");
        for (int i = 0; i < m->nskips && i < SKIPS_SHOWN; i++) {
            fprintf(out, "<li>%lld: ", (long long)m->skip[i].index);
            zp_escape_html(out, m->skip[i].error);
            fputs("</li>\n", out);
        }
        fputs("</ul>\n", out);
    }
    if (m->loaders_lost)
        fprintf(out, "<p>Loaders lost (dead or silent past loader.liveness): %lld; tasks re-queued: "
                     "%lld.</p>\n", (long long)m->loaders_lost, (long long)m->tasks_requeued);
}

/* What the page is not of: missing files, torn spans, records not understood. */
static void gaps(FILE *out, const zp_model_t *m)
{
    if (m->scan.missing[0]) {
        fputs("<p class=\"missing\">", out);
        zp_escape_html(out, m->scan.missing);
        fputs("</p>\n", out);
    }
    if (m->scan.skipped_records)
        fprintf(out, "<p class=\"missing\">%s: skipped %lld bytes (%lld torn or garbled "
                     "records); this page is of the rest.</p>\n", m->scan.source,
                (long long)m->scan.skipped_bytes, (long long)m->scan.skipped_records);
    if (m->unread)
        fprintf(out, "<p class=\"missing\">%lld records of %s were not understood and "
                     "skipped.</p>\n", (long long)m->unread, m->scan.source);
}

void zp_report_html_page(const zp_model_t *m, FILE *out)
{
    zp_page_head(out, "zeus-pipe run ", m->run);
    gaps(out, m);
    fputs("<p class=\"bottleneck\">", out);
    zp_escape_html(out, m->advice);
    fputs("</p>\n<h2>Training</h2>\n", out);
    curves(out, m, 0);
    curves(out, m, 1);
    fputs("<h2>Stages</h2>\n", out);
    timelines(out, m);
    regions(out, m);
    fputs("<h2>Epochs</h2>\n", out);
    zp_page_epochs(out, m);
    fputs("<h2>Coverage</h2>\n", out);
    zp_page_coverage(out, m);
    faults(out, m);
    zp_report_autoscale_html(&m->autoscale, m->t0, out);
    zp_page_foot(out, "zeus-pipe report RUN --html");
}

int zp_report_html(const char *run_dir, FILE *out, char *err, size_t errlen)
{
    zp_model_t *m;
    int rc = zp_model_load(&m, run_dir, err, errlen);
    if (rc)
        return rc;
    zp_report_html_page(m, out);
    zp_model_destroy(&m);
    return 0;
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

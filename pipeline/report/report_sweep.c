/* report_sweep.c — the comparison page of a sweep: its runs ranked, linked,
 * and their test curves, from each run's model, overlaid (report_sweep.h). */
#define _GNU_SOURCE
#include "pipeline/base/files.h"
#include "pipeline/report/escape.h"
#include "pipeline/report/report_sweep.h"
#include "pipeline/report/page.h"
#include "pipeline/report/svg.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    zp_xy_t acc, loss; /* test split, x = epoch from 1 */
} curves_t;

/* The test curves of the run in `dir`; none for a run with nothing to read. */
static void test_curves(const char *dir, curves_t *c)
{
    char err[PATH_MAX + 128];
    zp_model_t *m;
    if (!dir || !dir[0] || zp_model_load(&m, dir, err, sizeof err))
        return;
    zp_model_curve(m, ZP_SPLIT_TEST, 1, &c->acc); /* out of memory: fewer points */
    zp_model_curve(m, ZP_SPLIT_TEST, 0, &c->loss);
    zp_model_destroy(&m);
}

/* The run's page, relative to the sweep's: <its folder's name>/report.html. */
static const char *folder(const zp_report_sweep_run_t *r)
{
    const char *slash = r->dir ? strrchr(r->dir, '/') : NULL;
    return slash && slash[1] ? slash + 1 : r->dir && r->dir[0] ? r->dir : r->name;
}

static void table(FILE *out, const zp_report_sweep_run_t *runs, int n)
{
    fputs("<table id=\"runs\"><tr><th>rank</th><th class=\"l\">run</th><th class=\"l\">values</th>"
          "<th>test accuracy</th><th>test loss</th><th>best test accuracy</th><th>train loss</th>"
          "<th>epochs</th><th>seconds</th></tr>\n", out);
    for (int i = 0; i < n; i++) {
        const zp_report_sweep_run_t *r = &runs[i];
        fprintf(out, "<tr class=\"run\"><td>%d</td><td class=\"l\"><a href=\"", i + 1);
        zp_escape_html(out, folder(r)); /* a run's name holds [A-Za-z0-9._=-] only: no %-escapes needed */
        fputs("/report.html\">", out);
        zp_escape_html(out, r->name);
        fputs("</a></td><td class=\"l\">", out);
        zp_escape_html(out, r->values);
        fputs("</td>", out);
        if (r->status) {
            fprintf(out, "<td class=\"l bad\" colspan=\"6\">failed: exit %d</td></tr>\n", r->status);
            continue;
        }
        const zp_run_summary_t *s = &r->sum;
        double v[] = {s->test_acc, s->test_loss, s->best_test_acc, s->train_loss};
        for (int k = 0; k < 4; k++)
            v[k] >= 0 ? fprintf(out, "<td>%.4f</td>", v[k]) : fputs("<td>-</td>", out);
        fprintf(out, "<td>%d</td><td>%.1f</td></tr>\n", s->epochs, s->seconds);
    }
    fputs("</table>\n", out);
}

static void page(FILE *out, const char *title, const zp_report_sweep_run_t *runs, int n)
{
    curves_t *c = calloc((size_t)(n > 0 ? n : 1), sizeof *c);
    zp_svg_series_t *acc = calloc((size_t)(n > 0 ? n : 1), sizeof *acc),
                    *loss = calloc((size_t)(n > 0 ? n : 1), sizeof *loss);
    zp_page_head(out, "zeus-pipe sweep ", title);
    fprintf(out, "<p>%d run(s), best first (by the last epoch's test accuracy). Each run's own "
                 "report is behind its name.</p>\n", n);
    table(out, runs, n);
    if (c && acc && loss) {
        for (int i = 0; i < n; i++) {
            test_curves(runs[i].dir, &c[i]);
            acc[i] = (zp_svg_series_t){runs[i].name, "run", &c[i].acc, 1, 0};
            loss[i] = (zp_svg_series_t){runs[i].name, "run", &c[i].loss, 1, 0};
        }
        fputs("<h2>Test curves</h2>\n", out);
        zp_svg_plot_t pa = {"test-accuracy", "Test accuracy per epoch", "epoch", "accuracy", 1};
        zp_svg_lines(out, &pa, acc, n);
        zp_svg_plot_t pl = {"test-loss", "Test loss per epoch", "epoch", "loss", 0};
        zp_svg_lines(out, &pl, loss, n);
    }
    zp_page_foot(out, "zeus-pipe sweep");
    for (int i = 0; c && i < n; i++)
        zp_xy_free(&c[i].acc), zp_xy_free(&c[i].loss);
    free(c), free(acc), free(loss);
}

typedef struct {
    const char *title;
    const zp_report_sweep_run_t *runs;
    int n;
} sweep_t;

static int fill(FILE *out, void *ctx, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    const sweep_t *w = ctx;
    page(out, w->title, w->runs, w->n);
    return 0;
}

int zp_report_sweep_write(const char *path, const char *title, const zp_report_sweep_run_t *runs, int n,
                         char *err, size_t errlen)
{
    sweep_t w = {title, runs, n};
    return zp_files_write_aside(path, fill, &w, err, errlen);
}

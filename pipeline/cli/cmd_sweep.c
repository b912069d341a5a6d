/* cmd_sweep.c — `zeus-pipe sweep CONFIG -m KEY=A,B KEY2=C,D ...`: one run per
 * point of the grid, one after another, each named after its swept values,
 * then a table of every run's final metrics, best first. The grid and the
 * runs are zp_sweep_* (pipeline/supervisor/supervisor.h); this file parses
 * and prints. */
#define _GNU_SOURCE
#include "pipeline/cli/cmd.h"
#include "pipeline/report/report_sweep.h"
#include "pipeline/supervisor/supervisor.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(FILE *out, int status)
{
    fprintf(out,
            "usage: zeus-pipe sweep CONFIG [-m] KEY=A,B[,...] [KEY2=C,D ...] [KEY=VALUE ...]\n\n"
            "Runs CONFIG once per point of the grid of the comma-separated values (a list\n"
            "value in brackets is one value), one run after another, each named\n"
            "<run.name>-<key>=<value>-..., then prints a table of every run's final metrics,\n"
            "best test accuracy first (also written to <run.dir>/<run.name>-sweep.txt),\n"
            "and a page comparing them, <run.dir>/<run.name>-sweep.html: the table with\n"
            "links to each run's report.html, and every run's test curves overlaid.\n"
            "KEY=VALUE without a comma applies to every run. Every point is validated\n"
            "before the first run starts. -m (multirun) is accepted for familiarity.\n"
            "Exit: 0 when every run finished, 1 when one failed, 128+N when stopped.\n");
    return status;
}

/* CONFIG, the axes (KEY=A,B) and the fixed overrides (KEY=VALUE) into s; 0, or -1. */
static int parse(zp_sweep_t *s, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--multirun"))
            continue;
        if (!strchr(argv[i], '=')) {
            if (s->config || argv[i][0] == '-')
                return -1;
            s->config = argv[i];
        } else if (s->naxes < ZP_SWEEP_AXES_MAX && zp_sweep_axis(&s->axis[s->naxes], argv[i]) > 1) {
            s->naxes++;
        } else if (s->nfixed < ZP_SWEEP_FIXED_MAX) {
            s->fixed[s->nfixed++] = argv[i];
        } else {
            return -1;
        }
    }
    return s->config && s->naxes ? 0 : -1;
}

static void announce(const zp_sweep_t *s, int k, void *arg)
{
    fprintf(stderr, "zeus-pipe: sweep run %d/%d: %s (%s)\n", k + 1, s->npoints, s->point[k].name,
            s->point[k].values);
}

static void table(const zp_sweep_point_t *pts, int n, FILE *out)
{
    fprintf(out, "%-40s %-30s %8s %9s %9s %10s %6s %8s\n", "run", "values", "test_acc",
            "test_loss", "best_acc", "train_loss", "epochs", "time");
    for (int i = 0; i < n; i++) {
        const zp_sweep_point_t *p = &pts[i];
        if (p->status) {
            fprintf(out, "%-40s %-30s %s exit %d\n", p->name, p->values, "failed:", p->status);
            continue;
        }
        fprintf(out, "%-40s %-30s %8.4f %9.4f %9.4f %10.4f %6d %7.1fs\n", p->name, p->values,
                p->sum.test_acc, p->sum.test_loss, p->sum.best_test_acc, p->sum.train_loss,
                p->sum.epochs, p->sum.seconds);
    }
}

/* The comparison page of the runs that ran (ranked), <run.dir>/<run.name>-sweep.html. */
static void write_page(const zp_sweep_t *s)
{
    zp_report_sweep_run_t *runs = calloc((size_t)s->done + 1, sizeof *runs);
    char path[PATH_MAX + 128], err[PATH_MAX + 128];
    snprintf(path, sizeof path, "%s/%s-sweep.html", s->run_dir, s->run_name);
    for (int i = 0; runs && i < s->done; i++) {
        const zp_sweep_point_t *p = &s->point[i];
        runs[i] = (zp_report_sweep_run_t){p->name, p->values, p->dir, p->status, p->sum};
    }
    if (!runs)
        fprintf(stderr, "zeus-pipe: sweep: %s: out of memory\n", path);
    else if (zp_report_sweep_write(path, s->run_name, runs, s->done, err, sizeof err))
        fprintf(stderr, "zeus-pipe: sweep: cannot write %s\n", err);
    else
        printf("(compared in %s)\n", path);
    free(runs);
}

/* The runs that ran, best first, on stdout and in <run.dir>/<run.name>-sweep.txt. */
static void print_results(zp_sweep_t *s)
{
    zp_sweep_rank(s->point, s->done);
    printf("\nsweep of %d run(s), best first:\n", s->done);
    table(s->point, s->done, stdout);
    char path[PATH_MAX + 128];
    snprintf(path, sizeof path, "%s/%s-sweep.txt", s->run_dir, s->run_name);
    FILE *f = fopen(path, "w");
    if (f) {
        table(s->point, s->done, f);
        fclose(f);
        printf("(also in %s)\n", path);
    }
    write_page(s);
}

int cmd_sweep(int argc, char **argv)
{
    if (zp_cmd_wants_help(argc, argv))
        return usage(stdout, 0);
    zp_sweep_t *s;
    if (zp_sweep_create(&s)) {
        fprintf(stderr, "zeus-pipe: sweep: out of memory\n");
        return 1;
    }
    if (parse(s, argc, argv)) {
        zp_sweep_destroy(&s);
        return usage(stderr, 2);
    }
    int status = zp_sweep_plan(s);
    if (!status)
        status = zp_sweep_run(s, announce, NULL);
    if (s->done)
        print_results(s);
    zp_sweep_destroy(&s);
    return status;
}

/* cmd_sweep.c — `zeus-pipe sweep CONFIG -m KEY=A,B KEY2=C,D ...`: one run per
 * point of the grid, one after another, each named after its swept values,
 * then a table of every run's final metrics, best first. Every point is
 * validated before the first run starts. */
#define _GNU_SOURCE
#include "pipeline/cli/cmd.h"
#include "pipeline/report.h"
#include "pipeline/stage.h"
#include "pipeline/supervisor/supervisor.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AXES_MAX 8
#define VALUES_MAX 32
#define ARGS_MAX 200

typedef struct {
    char key[128];
    char *value[VALUES_MAX]; /* into the argument; owned by the axis' copy */
    int n;
    char buf[1024];
} axis_t;

typedef struct {
    char name[64], dir[PATH_MAX], values[256];
    int status;
    zp_run_summary_t sum;
} point_t;

static int usage(FILE *out, int status)
{
    fprintf(out,
            "usage: zeus-pipe sweep CONFIG [-m] KEY=A,B[,...] [KEY2=C,D ...] [KEY=VALUE ...]\n\n"
            "Runs CONFIG once per point of the grid of the comma-separated values (a list\n"
            "value in brackets is one value), one run after another, each named\n"
            "<run.name>-<key>=<value>-..., then prints a table of every run's final metrics,\n"
            "best test accuracy first (also written to <run.dir>/<run.name>-sweep.txt).\n"
            "KEY=VALUE without a comma applies to every run. Every point is validated\n"
            "before the first run starts. -m (multirun) is accepted for familiarity.\n"
            "Exit: 0 when every run finished, 1 when one failed, 128+N when stopped.\n");
    return status;
}

/* Splits KEY=A,B,... at the commas outside brackets; 0 when it has one value. */
static int split_axis(const char *arg, axis_t *a)
{
    const char *eq = strchr(arg, '=');
    snprintf(a->key, sizeof a->key, "%.*s", (int)(eq - arg), arg);
    snprintf(a->buf, sizeof a->buf, "%s", eq + 1);
    a->n = 0;
    int depth = 0;
    char *start = a->buf;
    for (char *p = a->buf;; p++) {
        depth += (*p == '[') - (*p == ']');
        if ((*p == ',' && depth == 0) || !*p) {
            int end = !*p;
            *p = 0;
            if (a->n < VALUES_MAX)
                a->value[a->n++] = start;
            start = p + 1;
            if (end)
                break;
        }
    }
    return a->n > 1;
}

/* "<base>-lr=0.1-batch_size=128": leaf key names, unsafe characters as '_'. */
static int point_name(const char *base, axis_t *ax, int nax, const int *pick, point_t *pt)
{
    char name[512];
    int len = snprintf(name, sizeof name, "%s", base);
    pt->values[0] = 0;
    for (int i = 0; i < nax; i++) {
        const char *leaf = strrchr(ax[i].key, '.');
        leaf = leaf ? leaf + 1 : ax[i].key;
        char parent[64];
        if (!strcmp(leaf, "name") && leaf > ax[i].key + 1) { /* schedule.name=cosine: "schedule" */
            const char *p = leaf - 1;
            while (p > ax[i].key && p[-1] != '.')
                p--;
            snprintf(parent, sizeof parent, "%.*s", (int)(leaf - 1 - p), p);
            leaf = parent;
        }
        if (len >= (int)sizeof pt->name)
            break; /* too long already: refused below */
        len += snprintf(name + len, sizeof name - (size_t)len, "-%s=%s", leaf, ax[i].value[pick[i]]);
        size_t vl = strlen(pt->values);
        snprintf(pt->values + vl, sizeof pt->values - vl, "%s%s=%s", i ? " " : "", leaf,
                 ax[i].value[pick[i]]);
    }
    for (char *p = name; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._=-", *p))
            *p = '_';
    if (len >= (int)sizeof pt->name) {
        fprintf(stderr, "zeus-pipe: sweep: the run name %s is longer than 63 bytes; set a shorter "
                        "run.name\n", name);
        return 2;
    }
    memcpy(pt->name, name, (size_t)len + 1);
    return 0;
}

/* The argv of `up` for one point: CONFIG, fixed overrides, the point's values, run.name. */
static int point_args(char **args, char *const *fixed, int nfixed, const char *config,
                      axis_t *ax, int nax, const int *pick, char storage[][1200], const char *name)
{
    int n = 0;
    args[n++] = "sweep";
    args[n++] = (char *)config;
    for (int i = 0; i < nfixed; i++)
        args[n++] = fixed[i];
    for (int i = 0; i < nax; i++) { /* key < 128 and value < 1024 bytes: always fits */
        if (snprintf(storage[i], 1200, "%s=%s", ax[i].key, ax[i].value[pick[i]]) >= 1200)
            storage[i][0] = 0;
        args[n++] = storage[i];
    }
    snprintf(storage[nax], 1200, "run.name=%s", name);
    args[n++] = storage[nax];
    return n;
}

static int cmp_points(const void *a, const void *b)
{
    const point_t *x = a, *y = b;
    if ((x->status == 0) != (y->status == 0))
        return x->status == 0 ? -1 : 1;
    if (x->sum.test_acc != y->sum.test_acc)
        return x->sum.test_acc > y->sum.test_acc ? -1 : 1;
    return (x->sum.test_loss > y->sum.test_loss) - (x->sum.test_loss < y->sum.test_loss);
}

static void table(point_t *pts, int n, FILE *out)
{
    fprintf(out, "%-40s %-30s %8s %9s %9s %10s %6s %8s\n", "run", "values", "test_acc",
            "test_loss", "best_acc", "train_loss", "epochs", "time");
    for (int i = 0; i < n; i++) {
        const point_t *p = &pts[i];
        if (p->status) {
            fprintf(out, "%-40s %-30s %s exit %d\n", p->name, p->values, "failed:", p->status);
            continue;
        }
        fprintf(out, "%-40s %-30s %8.4f %9.4f %9.4f %10.4f %6d %7.1fs\n", p->name, p->values,
                p->sum.test_acc, p->sum.test_loss, p->sum.best_test_acc, p->sum.train_loss,
                p->sum.epochs, p->sum.seconds);
    }
}

/* Validates every point (config and dataset); 0 when all are good. */
static int check_all(char *const *fixed, int nfixed, const char *config, const char *base,
                     axis_t *ax, int nax, point_t *pts, int npts)
{
    static char storage[AXES_MAX + 1][1200];
    char *args[ARGS_MAX + AXES_MAX + 4];
    zp_config_t cfg;
    zp_dataset_t *ds;
    int rc;
    for (int k = 0; k < npts; k++) {
        int pick[AXES_MAX], rest = k;
        for (int i = nax - 1; i >= 0; i--)
            pick[i] = rest % ax[i].n, rest /= ax[i].n;
        if ((rc = point_name(base, ax, nax, pick, &pts[k])))
            return rc;
        int n = point_args(args, fixed, nfixed, config, ax, nax, pick, storage, pts[k].name);
        if ((rc = zp_sup_load(n, args, NULL, &cfg, &ds)))
            return rc < 0 ? 2 : rc;
        zp_dataset_destroy(&ds);
    }
    return 0;
}

static int run_point(char *const *fixed, int nfixed, const char *config, axis_t *ax, int nax,
                     int k, point_t *pt)
{
    static char storage[AXES_MAX + 1][1200];
    char *args[ARGS_MAX + AXES_MAX + 4];
    int pick[AXES_MAX], rest = k;
    for (int i = nax - 1; i >= 0; i--)
        pick[i] = rest % ax[i].n, rest /= ax[i].n;
    int n = point_args(args, fixed, nfixed, config, ax, nax, pick, storage, pt->name);
    zp_config_t cfg;
    zp_dataset_t *ds;
    int rc = zp_sup_load(n, args, NULL, &cfg, &ds);
    if (!rc && cfg.cache_enabled && zp_cache_prepare(&cfg, &ds->meta))
        rc = 2;
    if (!rc)
        rc = zp_rundir_start(&cfg, cfg.run_name, pt->dir, sizeof pt->dir) ? 2 : 0;
    if (!rc)
        rc = zp_pipeline_run(&cfg, ds, pt->dir, ZP_MODE_TRAIN, NULL);
    zp_dataset_destroy(&ds);
    char err[PATH_MAX + 128];
    if (!rc && zp_run_summary(pt->dir, &pt->sum, err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: sweep: %s\n", err);
        rc = 1;
    }
    return rc;
}

int cmd_sweep(int argc, char **argv)
{
    if (zp_wants_help(argc, argv))
        return usage(stdout, 0);
    static axis_t ax[AXES_MAX];
    char *fixed[ARGS_MAX];
    const char *config = NULL;
    int nax = 0, nfixed = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--multirun"))
            continue;
        if (!strchr(argv[i], '=')) {
            if (config || argv[i][0] == '-')
                return usage(stderr, 2);
            config = argv[i];
        } else if (nax < AXES_MAX && split_axis(argv[i], &ax[nax])) {
            nax++;
        } else if (nfixed < ARGS_MAX) {
            fixed[nfixed++] = argv[i];
        } else {
            return usage(stderr, 2);
        }
    }
    if (!config || !nax)
        return usage(stderr, 2);
    /* zp_sup_load reads CONFIG then the fixed overrides: keep them next to each other */
    char *base_args[ARGS_MAX + 2] = {"sweep", (char *)config};
    memcpy(base_args + 2, fixed, (size_t)nfixed * sizeof *fixed);
    int npts = 1;
    for (int i = 0; i < nax; i++)
        npts *= ax[i].n;
    if (npts > 10000) {
        fprintf(stderr, "zeus-pipe: sweep: %d points; at most 10000\n", npts);
        return 2;
    }
    point_t *pts = calloc((size_t)npts, sizeof *pts);
    if (!pts)
        return 1;
    zp_config_t cfg;
    zp_dataset_t *ds;
    int rc = zp_sup_load(nfixed + 2, base_args, NULL, &cfg, &ds);
    zp_dataset_destroy(&ds);
    if (!rc)
        rc = check_all(fixed, nfixed, config, cfg.run_name, ax, nax, pts, npts);
    int status = rc ? (rc < 0 ? 2 : rc) : 0, done = 0;
    for (int k = 0; !status && k < npts; k++, done++) {
        fprintf(stderr, "zeus-pipe: sweep run %d/%d: %s (%s)\n", k + 1, npts, pts[k].name,
                pts[k].values);
        pts[k].status = run_point(fixed, nfixed, config, ax, nax, k, &pts[k]);
        if (pts[k].status >= 128 || pts[k].status == 2)
            status = pts[k].status; /* stopped, or a point that cannot start: stop the sweep */
    }
    if (done) {
        qsort(pts, (size_t)done, sizeof *pts, cmp_points);
        printf("\nsweep of %d run(s), best first:\n", done);
        table(pts, done, stdout);
        char path[PATH_MAX + 128];
        snprintf(path, sizeof path, "%s/%s-sweep.txt", cfg.run_dir, cfg.run_name);
        FILE *f = fopen(path, "w");
        if (f) {
            table(pts, done, f);
            fclose(f);
            printf("(also in %s)\n", path);
        }
        for (int k = 0; k < done && !status; k++)
            if (pts[k].status)
                status = 1;
    }
    free(pts);
    return status;
}

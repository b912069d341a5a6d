/* sweep.c — `zeus-pipe sweep`: the grid of config values, its points' names
 * and arguments, one run per point, and their ranking (supervisor.h). */
#define _GNU_SOURCE
#include "pipeline/report/report.h"
#include "pipeline/stage/stage.h"
#include "pipeline/supervisor/supervisor.h"
#include "schemas/errors.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARG_BYTES 1200 /* KEY=VALUE of an axis: key < 128, value < 1024 bytes */

int zp_sweep_create(zp_sweep_t **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? 0 : ZP_ENOMEM;
}

void zp_sweep_destroy(zp_sweep_t **s)
{
    if (!*s)
        return;
    free((*s)->point);
    free(*s);
    *s = NULL;
}

int zp_sweep_axis(zp_sweep_axis_t *a, const char *arg)
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
            if (a->n < ZP_SWEEP_VALUES_MAX)
                a->value[a->n++] = start;
            start = p + 1;
            if (end)
                break;
        }
    }
    return a->n;
}

void zp_sweep_pick(const zp_sweep_t *s, int k, int pick[ZP_SWEEP_AXES_MAX])
{
    for (int i = s->naxes - 1; i >= 0; i--)
        pick[i] = k % s->axis[i].n, k /= s->axis[i].n;
}

/* The name a key goes by in a point's name: its last component, or its
 * parent's when that is "name" (schedule.name: "schedule"). */
static const char *leaf_of(const char *key, char parent[64])
{
    const char *leaf = strrchr(key, '.');
    leaf = leaf ? leaf + 1 : key;
    if (!strcmp(leaf, "name") && leaf > key + 1) {
        const char *p = leaf - 1;
        while (p > key && p[-1] != '.')
            p--;
        snprintf(parent, 64, "%.*s", (int)(leaf - 1 - p), p);
        leaf = parent;
    }
    return leaf;
}

int zp_sweep_point_name(const char *base, const zp_sweep_axis_t *ax, int nax, const int *pick,
                        zp_sweep_point_t *pt)
{
    char name[512];
    int len = snprintf(name, sizeof name, "%s", base);
    pt->values[0] = 0;
    for (int i = 0; i < nax; i++) {
        char parent[64];
        const char *leaf = leaf_of(ax[i].key, parent);
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

/* The arguments of `up` for one point: CONFIG, the fixed overrides, the
 * point's values, run.name (zp_sup_load reads CONFIG then the overrides in
 * order). Their count; args point into s and storage. */
static int point_args(const zp_sweep_t *s, const int *pick, const char *name, char **args,
                      char storage[][ARG_BYTES])
{
    int n = 0;
    args[n++] = "sweep";
    args[n++] = (char *)s->config;
    for (int i = 0; i < s->nfixed; i++)
        args[n++] = s->fixed[i];
    for (int i = 0; i < s->naxes; i++) {
        const zp_sweep_axis_t *a = &s->axis[i];
        if (snprintf(storage[i], ARG_BYTES, "%s=%s", a->key, a->value[pick[i]]) >= ARG_BYTES)
            storage[i][0] = 0;
        args[n++] = storage[i];
    }
    snprintf(storage[s->naxes], ARG_BYTES, "run.name=%s", name);
    args[n++] = storage[s->naxes];
    return n;
}

/* Loads point k's config into cfg and its dataset into *ds (zp_sup_load's result). */
static int load_point(const zp_sweep_t *s, int k, zp_config_t *cfg, zp_dataset_t **ds)
{
    static char storage[ZP_SWEEP_AXES_MAX + 1][ARG_BYTES];
    char *args[ZP_SWEEP_FIXED_MAX + ZP_SWEEP_AXES_MAX + 4];
    int pick[ZP_SWEEP_AXES_MAX];
    zp_sweep_pick(s, k, pick);
    int n = point_args(s, pick, s->point[k].name, args, storage);
    return zp_sup_load(n, args, NULL, cfg, ds);
}

/* The base config (CONFIG and the fixed overrides): its run.dir and run.name. */
static int load_base(zp_sweep_t *s)
{
    char *args[ZP_SWEEP_FIXED_MAX + 2] = {"sweep", (char *)s->config};
    memcpy(args + 2, s->fixed, (size_t)s->nfixed * sizeof *s->fixed);
    zp_config_t cfg;
    zp_dataset_t *ds = NULL;
    int rc = zp_sup_load(s->nfixed + 2, args, NULL, &cfg, &ds);
    zp_dataset_destroy(&ds);
    if (rc)
        return rc < 0 ? 2 : rc;
    memcpy(s->run_dir, cfg.run_dir, sizeof s->run_dir);
    memcpy(s->run_name, cfg.run_name, sizeof s->run_name);
    return 0;
}

int zp_sweep_plan(zp_sweep_t *s)
{
    int npts = 1;
    for (int i = 0; i < s->naxes; i++)
        npts *= s->axis[i].n;
    if (npts > ZP_SWEEP_POINTS_MAX) {
        fprintf(stderr, "zeus-pipe: sweep: %d points; at most %d\n", npts, ZP_SWEEP_POINTS_MAX);
        return 2;
    }
    free(s->point);
    s->npoints = s->done = 0;
    if (!(s->point = calloc((size_t)npts, sizeof *s->point)))
        return 1;
    s->npoints = npts;
    int rc = load_base(s);
    for (int k = 0; !rc && k < npts; k++) { /* every point is good before the first runs */
        int pick[ZP_SWEEP_AXES_MAX];
        zp_config_t cfg;
        zp_dataset_t *ds = NULL;
        zp_sweep_pick(s, k, pick);
        if ((rc = zp_sweep_point_name(s->run_name, s->axis, s->naxes, pick, &s->point[k])))
            break;
        rc = load_point(s, k, &cfg, &ds);
        rc = rc < 0 ? 2 : rc;
        zp_dataset_destroy(&ds);
    }
    return rc;
}

/* Point k as `up` runs a config: its exit status. */
static int run_point(zp_sweep_t *s, int k)
{
    zp_sweep_point_t *pt = &s->point[k];
    zp_config_t cfg;
    zp_dataset_t *ds = NULL;
    int rc = load_point(s, k, &cfg, &ds);
    if (!rc && cfg.cache_enabled && zp_sup_prepare_cache(&cfg, &ds->meta))
        rc = 2;
    if (!rc)
        rc = zp_rundir_start(&cfg, cfg.run_name, pt->dir, sizeof pt->dir) ? 2 : 0;
    if (!rc)
        rc = zp_pipeline_run(&cfg, ds, pt->dir, ZP_MODE_TRAIN, NULL);
    zp_dataset_destroy(&ds);
    char err[PATH_MAX + 128];
    if (!rc && zp_report_summary(pt->dir, &pt->sum, err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: sweep: %s\n", err);
        rc = 1;
    }
    return rc;
}

int zp_sweep_run(zp_sweep_t *s, zp_sweep_start_fn *starting, void *arg)
{
    int status = 0;
    for (s->done = 0; !status && s->done < s->npoints; s->done++) {
        zp_sweep_point_t *pt = &s->point[s->done];
        if (starting)
            starting(s, s->done, arg);
        pt->status = run_point(s, s->done);
        if (pt->status >= 128 || pt->status == ZP_EXIT_DOWN || pt->status == ZP_EXIT_SAVED ||
            pt->status == 2)
            status = pt->status; /* stopped, or a point that cannot start: stop the sweep */
    }
    for (int k = 0; k < s->done && !status; k++)
        if (s->point[k].status)
            status = 1;
    return status;
}

static int cmp_points(const void *a, const void *b)
{
    const zp_sweep_point_t *x = a, *y = b;
    if ((x->status == 0) != (y->status == 0))
        return x->status == 0 ? -1 : 1;
    if (x->sum.test_acc != y->sum.test_acc)
        return x->sum.test_acc > y->sum.test_acc ? -1 : 1;
    return (x->sum.test_loss > y->sum.test_loss) - (x->sum.test_loss < y->sum.test_loss);
}

void zp_sweep_rank(zp_sweep_point_t *pt, int n)
{
    if (n > 0)
        qsort(pt, (size_t)n, sizeof *pt, cmp_points);
}

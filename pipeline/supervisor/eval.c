/* eval.c — runs of the pipeline in the modes that are not training:
 * `zeus-pipe eval` (checkpoints listed, chosen and evaluated on the test
 * split) and `zeus-pipe overfit` (one batch, again and again). supervisor.h
 * states the contract. */
#define _GNU_SOURCE
#include "pipeline/stage/ckpt.h"
#include "pipeline/source/source.h"
#include "pipeline/stage/stage.h"
#include "pipeline/supervisor/supervisor.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Orders checkpoint names: last, best, then epoch-N by N. */
static int rank(const char *name)
{
    if (!strcmp(name, "last"))
        return -2;
    if (!strcmp(name, "best"))
        return -1;
    return !strncmp(name, "epoch-", 6) ? atoi(name + 6) : INT_MAX;
}

static int cmp_names(const void *a, const void *b)
{
    const char *x = a, *y = b;
    int rx = rank(x), ry = rank(y);
    return rx != ry ? (rx > ry) - (rx < ry) : strcmp(x, y);
}

void zp_eval_sort(char names[][64], int n)
{
    if (n > 0)
        qsort(names, (size_t)n, 64, cmp_names);
}

int zp_eval_list(const char *run_dir, char names[][64], int max)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/checkpoints", run_dir);
    DIR *d = opendir(path);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) && n < max;) {
        size_t len = strlen(e->d_name);
        if (len > 5 && len < 64 && !strcmp(e->d_name + len - 5, ".ckpt"))
            snprintf(names[n++], 64, "%.*s", (int)len - 5, e->d_name);
    }
    if (d)
        closedir(d);
    zp_eval_sort(names, n);
    return n;
}

static int has(char names[][64], int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], name))
            return 1;
    return 0;
}

int zp_eval_pick(char names[][64], int n, const char *which, char *want, size_t wlen, char *out,
                 size_t len)
{
    int chosen = 0;
    out[0] = 0;
    if (!which)
        which = has(names, n, "best") ? "best" : "last";
    char *end;
    long epoch = strtol(which, &end, 10);
    if (!*end && epoch > 0)
        snprintf(want, wlen, "epoch-%ld", epoch);
    else
        snprintf(want, wlen, "%s", which);
    for (int i = 0; i < n; i++) {
        size_t used = strlen(out), add = strlen(names[i]);
        if ((strcmp(want, "all") && strcmp(want, names[i])) || used + add + 2 > len)
            continue; /* 64 names of < 64 bytes fit in 1024 only when short: a cap, not an error */
        if (used)
            out[used++] = ',';
        memcpy(out + used, names[i], add + 1);
        chosen++;
    }
    return chosen;
}

/* Reads back each checkpoint of the list whole (the checksum covers the
 * payload); 0, or 2 after printing why one cannot be evaluated. */
static int readable(const char *run_dir, const char *ckpts)
{
    for (const char *p = ckpts; *p;) {
        size_t l = strcspn(p, ",");
        char path[PATH_MAX + 80], err[600], name[64];
        snprintf(name, sizeof name, "%.*s", (int)l, p);
        zp_ckpt_path(path, sizeof path, run_dir, name);
        zp_ckpt_pos_t pos;
        void *payload = NULL;
        int rc = zp_ckpt_read(path, &pos, &payload, NULL, err, sizeof err);
        free(payload);
        if (rc) {
            fprintf(stderr, "zeus-pipe: cannot evaluate: %s\n", err);
            return 2;
        }
        p += l + (p[l] == ',');
    }
    return 0;
}

int zp_eval_choose(const char *run_dir, const char *which, char *out, size_t len)
{
    static char names[ZP_EVAL_CKPTS_MAX][64];
    char want[64];
    int n = zp_eval_list(run_dir, names, ZP_EVAL_CKPTS_MAX);
    if (!zp_eval_pick(names, n, which, want, sizeof want, out, len)) {
        fprintf(stderr, "zeus-pipe: %s has no checkpoint %s (it has:", run_dir, want);
        for (int i = 0; i < n; i++)
            fprintf(stderr, " %s", names[i]);
        fprintf(stderr, "%s)\n", n ? "" : " none");
        return 2;
    }
    return readable(run_dir, out);
}

/* The eval run: one pass over the test split, in <run>/eval*. The exit status. */
static int eval_run(const zp_config_t *cfg_in, const zp_dataset_t *ds, const char *dir,
                    const char *ckpts)
{
    static zp_config_t cfg;
    char edir[PATH_MAX];
    cfg = *cfg_in;
    if (ds->meta.n[ZP_SPLIT_TEST] == 0) {
        fprintf(stderr, "zeus-pipe: %s: the dataset has no test split to evaluate on\n", dir);
        return 2;
    }
    cfg.epochs = 1;
    cfg.ckpt_every_epochs = cfg.ckpt_every_steps = 0;
    cfg.log_batches = false;
    if (strlen(dir) >= sizeof cfg.run_dir) {
        fprintf(stderr, "zeus-pipe: %s: path too long for an eval run (at most %zu bytes)\n", dir,
                sizeof cfg.run_dir - 1);
        return 2;
    }
    memcpy(cfg.run_dir, dir, strlen(dir) + 1);
    if ((cfg.cache_enabled && zp_sup_prepare_cache(&cfg, &ds->meta)) ||
        zp_rundir_start(&cfg, "eval", edir, sizeof edir))
        return 2;
    return zp_pipeline_run(&cfg, ds, edir, ZP_MODE_EVAL, ckpts);
}

int zp_eval(const char *run_dir, const char *ckpts)
{
    static zp_config_t cfg;
    zp_dataset_t *ds;
    char path[PATH_MAX + 32], err[1024];
    snprintf(path, sizeof path, "%s/config.yaml", run_dir);
    if (zp_config_load_run(&cfg, path, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    if (zp_source_probe(&ds, &cfg, err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: %s\n", err);
        return 2;
    }
    int status = eval_run(&cfg, ds, run_dir, ckpts);
    zp_dataset_destroy(&ds);
    return status;
}

int zp_eval_overfit(zp_config_t *cfg, const zp_dataset_t *ds, long steps, zp_overfit_t *out)
{
    cfg->epochs = 1;
    cfg->limit_train_batches = steps;
    cfg->ckpt_every_epochs = cfg->ckpt_every_steps = 0;
    cfg->fast_dev_run = false;
    cfg->log_every_steps = steps >= 10 ? steps / 10 : 1;
    char name[80], dir[PATH_MAX];
    snprintf(name, sizeof name, "%s-overfit", cfg->run_name);
    int status = (cfg->cache_enabled && zp_sup_prepare_cache(cfg, &ds->meta)) ||
                         zp_rundir_start(cfg, name, dir, sizeof dir)
                     ? 2
                     : zp_pipeline_run(cfg, ds, dir, ZP_MODE_OVERFIT, NULL);
    if (status)
        return status;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/overfit.txt", dir);
    FILE *f = fopen(path, "r");
    int ok = f && fscanf(f, "%lld %lf %lf", &out->steps, &out->first, &out->last) == 3;
    if (f)
        fclose(f);
    if (!ok) {
        fprintf(stderr, "zeus-pipe: %s: missing or unreadable; did the trainer train?\n", path);
        return 1;
    }
    return 0;
}

/* cmd_eval.c — `zeus-pipe eval RUN [--ckpt last|best|N|all]`: the test split
 * through the pipeline and one or more checkpoints of a run. The pipeline
 * runs in <run>/eval (eval-2, ... when taken); the results are written to
 * <run>/eval-<checkpoint>.json and .txt and printed. */
#define _GNU_SOURCE
#include "pipeline/cachedb.h"
#include "pipeline/ckpt.h"
#include "pipeline/cli/cmd.h"
#include "pipeline/stage.h"
#include "pipeline/supervisor/supervisor.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CKPTS_MAX 1024

static int usage(FILE *out, int status)
{
    fprintf(out,
            "usage: zeus-pipe eval RUN [--ckpt last|best|N|all]\n\n"
            "Runs the test split of RUN's dataset through the pipeline and the chosen\n"
            "checkpoints of RUN (default: best, else last; N: the one of epoch N; all:\n"
            "every one, the data read once) and prints loss, accuracy, per-class accuracy\n"
            "and the confusion matrix of each; also written to RUN/eval-<checkpoint>.json\n"
            "and .txt. RUN is a run directory or a name under runs/.\n");
    return status;
}

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
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    int rx = rank(x), ry = rank(y);
    return rx != ry ? (rx > ry) - (rx < ry) : strcmp(x, y);
}

/* The run's checkpoint names, sorted; their count. */
static int list_ckpts(const char *dir, char names[][64])
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/checkpoints", dir);
    DIR *d = opendir(path);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) && n < CKPTS_MAX;) {
        size_t len = strlen(e->d_name);
        if (len > 5 && len < 64 && !strcmp(e->d_name + len - 5, ".ckpt"))
            snprintf(names[n++], 64, "%.*s", (int)len - 5, e->d_name);
    }
    if (d)
        closedir(d);
    char *p[CKPTS_MAX];
    static char sorted[CKPTS_MAX][64];
    for (int i = 0; i < n; i++)
        p[i] = names[i];
    qsort(p, (size_t)n, sizeof *p, cmp_names);
    for (int i = 0; i < n; i++)
        memcpy(sorted[i], p[i], 64);
    memcpy(names, sorted, (size_t)n * 64);
    return n;
}

static int has(char names[][64], int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], name))
            return 1;
    return 0;
}

/* `which` into a comma-separated list of existing checkpoints that read back. */
static int choose(const char *dir, const char *which, char *out, size_t len)
{
    static char names[CKPTS_MAX][64];
    char want[64];
    int n = list_ckpts(dir, names);
    out[0] = 0;
    if (!which)
        which = has(names, n, "best") ? "best" : "last";
    char *end;
    long epoch = strtol(which, &end, 10);
    if (!*end && epoch > 0)
        snprintf(want, sizeof want, "epoch-%ld", epoch);
    else
        snprintf(want, sizeof want, "%s", which);
    for (int i = 0; i < n; i++) {
        size_t used = strlen(out), add = strlen(names[i]);
        if ((strcmp(want, "all") && strcmp(want, names[i])) || used + add + 2 > len)
            continue; /* 64 names of < 64 bytes fit in 1024 only when short: a cap, not an error */
        if (used)
            out[used++] = ',';
        memcpy(out + used, names[i], add + 1);
    }
    if (!out[0]) {
        fprintf(stderr, "zeus-pipe: %s has no checkpoint %s (it has:", dir, want);
        for (int i = 0; i < n; i++)
            fprintf(stderr, " %s", names[i]);
        fprintf(stderr, "%s)\n", n ? "" : " none");
        return 2;
    }
    for (const char *p = out; *p;) { /* refuse a damaged file before anything starts */
        size_t l = strcspn(p, ",");
        char path[PATH_MAX + 80], err[600], name[64];
        snprintf(name, sizeof name, "%.*s", (int)l, p);
        zp_ckpt_path(path, sizeof path, dir, name);
        zp_ckpt_pos_t pos;
        void *payload = NULL; /* read whole: the checksum covers the payload */
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

static void print_results(const char *dir, const char *ckpts)
{
    for (const char *p = ckpts; *p;) {
        size_t l = strcspn(p, ",");
        char path[PATH_MAX + 96], buf[4096];
        snprintf(path, sizeof path, "%s/eval-%.*s.txt", dir, (int)l, p);
        FILE *f = fopen(path, "r");
        size_t got;
        printf("\n");
        while (f && (got = fread(buf, 1, sizeof buf, f)) > 0)
            fwrite(buf, 1, got, stdout);
        if (f)
            fclose(f);
        p += l + (p[l] == ',');
    }
}

/* The eval run: one pass over the test split, in <run>/eval*. The exit status. */
static int eval_run(const zp_config_t *cfg_in, const zp_dataset_t *ds, const char *dir, const char *ckpts)
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
    if ((cfg.cache_enabled && zp_cache_prepare(&cfg, &ds->meta)) ||
        zp_rundir_start(&cfg, "eval", edir, sizeof edir))
        return 2;
    return zp_pipeline_run(&cfg, ds, edir, ZP_MODE_EVAL, ckpts);
}

int cmd_eval(int argc, char **argv)
{
    if (zp_wants_help(argc, argv))
        return usage(stdout, 0);
    const char *run = NULL, *which = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ckpt") && i + 1 < argc)
            which = argv[++i];
        else if (argv[i][0] != '-' && !run)
            run = argv[i];
        else
            return usage(stderr, 2);
    }
    if (!run)
        return usage(stderr, 2);
    char dir[PATH_MAX], path[PATH_MAX + 32], err[1024], ckpts[1024];
    if (zp_find_run(run, dir, sizeof dir) || choose(dir, which, ckpts, sizeof ckpts))
        return 2;
    zp_config_t cfg;
    zp_dataset_t *ds;
    snprintf(path, sizeof path, "%s/config.yaml", dir);
    if (zp_config_load(&cfg, path, NULL, 0, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    if (zp_dataset_open(&ds, &cfg, err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: %s\n", err);
        return 2;
    }
    int status = eval_run(&cfg, ds, dir, ckpts);
    zp_dataset_destroy(&ds);
    if (status == 0)
        print_results(dir, ckpts);
    return status;
}

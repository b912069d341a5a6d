/* cmd_warm.c — `zeus-pipe warm CONFIG [KEY=VALUE ...]`: fills the LMDB cache
 * (zp_warm_* in pipeline/supervisor/supervisor.h); prints the plan, a
 * progress line (with the cache's size and its estimate once whole) and what
 * the cache holds at the end. */
#define _GNU_SOURCE
#include "pipeline/cli/cmd.h"
#include "pipeline/cachedb/cachedb_admin.h"
#include "pipeline/base/log.h"
#include "pipeline/supervisor/supervisor.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int usage(FILE *out, int status)
{
    fprintf(out, "usage: zeus-pipe warm CONFIG [KEY=VALUE ...]\n\n"
                 "Fills the LMDB cache (cache.path) with the preprocessed samples of every split,\n"
                 "running the cache stage and loader.workers loaders. Keys already cached are\n"
                 "skipped, so an interrupted warm resumes where it stopped.\n");
    return status;
}

static void print_plan(const zp_warm_progress_t *p)
{
    for (int s = 0; s < ZP_SPLITS; s++)
        fprintf(stderr, "zeus-pipe: %s: %lld of %lld samples cached; loading %lld\n", p->db[s],
                (long long)p->cached[s], (long long)p->n[s], (long long)p->todo[s]);
}

/* The cache's size so far and, from its bytes a sample, once it holds every
 * sample of the splits being warmed ("" while nothing is committed): what a
 * user needs to know before cache.max_bytes or the disk runs out. */
static void size_estimate(const zp_warm_progress_t *p, char *buf, size_t len)
{
    static zp_cachedb_admin_stat_t st; /* large */
    char err[512];
    size_t bytes = 0, whole = 0;
    buf[0] = 0;
    if (zp_cachedb_admin_stat(p->cache_path, &st, err, sizeof err))
        return;
    for (int i = 0; i < st.n; i++)
        for (int s = 0; s < ZP_SPLITS; s++)
            if (!strcmp(st.db[i].name, p->db[s]) && st.db[i].per_sample) {
                bytes += st.db[i].bytes;
                whole += st.db[i].per_sample * (size_t)p->n[s];
            }
    if (whole)
        snprintf(buf, len, "  cache %.1f MiB, about %.1f MiB whole", bytes / 1048576.0,
                 whole / 1048576.0);
}

/* The progress line: redrawn every 0.2 s on a terminal, else a line every 5 s. */
static void print_progress(const zp_warm_progress_t *p, int final, void *arg)
{
    double *last = arg, now = zp_wall_s();
    int tty = isatty(STDERR_FILENO);
    if (!final && now - *last < (tty ? 0.2 : 5))
        return;
    *last = now;
    double dt = (zp_now_ns() - p->start_ns) / 1e9, rate = dt > 0 ? p->done / dt : 0;
    double eta = rate > 0 ? (p->total - p->done) / rate : 0;
    char bar[31];
    int fill = p->total ? (int)(30 * p->done / p->total) : 30;
    for (int i = 0; i < 30; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[30] = 0;
    char size[96];
    size_estimate(p, size, sizeof size);
    fprintf(stderr, "%swarm [%s] %lld/%lld samples  %.0f samples/s  ETA %dm%02ds%s%s",
            tty ? "\r\033[K" : "", bar, (long long)p->done, (long long)p->total, rate,
            (int)eta / 60, (int)eta % 60, size, tty && !final ? "" : "\n");
}

/* The cache stage's word on why caching stopped (its log's last "caching
 * stops" line, from the path on), into buf; "" when it said none. */
static void why_caching_stopped(const char *run_dir, char *buf, size_t len)
{
    char path[PATH_MAX + 32], line[1024];
    snprintf(path, sizeof path, "%s/logs/cache-0.log", run_dir);
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f)) {
        const char *at = strstr(line, " warn ");
        if (at && strstr(line, "caching stops"))
            snprintf(buf, len, "%.*s", (int)strcspn(at + 6, "\n"), at + 6);
    }
    if (f)
        fclose(f);
}

/* What is in the cache after the warm; 1 when it could not take every sample. */
static int print_report(const zp_warm_progress_t *p)
{
    printf("loaded %lld samples; %s now holds %lld of %lld\n", (long long)p->done, p->cache_path,
           (long long)p->have, (long long)p->want);
    if (p->have < p->want) {
        char why[1024];
        why_caching_stopped(p->run_dir, why, sizeof why);
        if (why[0])
            fprintf(stderr, "zeus-pipe: the cache could not take every sample: %s\n", why);
        else
            fprintf(stderr, "zeus-pipe: the cache could not take every sample (see "
                            "%s/logs/cache-0.log)\n", p->run_dir);
        return 1;
    }
    return 0;
}

int cmd_warm(int argc, char **argv)
{
    if (zp_cmd_wants_help(argc, argv))
        return usage(stdout, 0);
    zp_warm_t *w;
    int status = zp_warm_create(&w, argc, argv);
    if (status)
        return status < 0 ? usage(stderr, 2) : status;
    const zp_warm_progress_t *p = zp_warm_progress(w);
    print_plan(p);
    if (p->total == 0) {
        printf("%s already holds every sample: nothing to load\n", p->cache_path);
        zp_warm_destroy(&w);
        return 0;
    }
    double last = 0;
    status = zp_warm_run(w, print_progress, &last);
    if (status == 0)
        status = print_report(p);
    zp_warm_destroy(&w);
    return status;
}

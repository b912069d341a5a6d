/* cmd_warm.c — `zeus-pipe warm CONFIG [KEY=VALUE ...]`: fills the LMDB cache.
 *
 * Runs the cache stage and the loaders only, and asks the cache stage, like a
 * prefetcher would, for every sample the cache lacks; the cache stage writes
 * them. Resumable: what an earlier (even killed) warm committed is skipped. */
#define _GNU_SOURCE
#include "pipeline/cachedb.h"
#include "pipeline/cli/cmd.h"
#include "pipeline/config.h"
#include "pipeline/dataset.h"
#include "pipeline/log.h"
#include "pipeline/names.h"
#include "pipeline/sock.h"
#include "pipeline/supervisor/supervisor.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WINDOW 8

typedef struct {
    zp_config_t cfg;
    zp_dataset_t *ds;         /* probed once; owned */
    zp_dataset_meta_t meta;   /* ds->meta */
    char run_dir[PATH_MAX];
    zp_procs_t procs;
    uint32_t *todo[ZP_SPLITS]; /* missing indices per split; owned */
    int64_t ntodo[ZP_SPLITS], cached[ZP_SPLITS];
    int64_t sent, done, total, chunk;
    uint64_t inflight[WINDOW]; /* fetch ids, 0 = free */
    int64_t inflight_n[WINDOW];
    void *zctx, *fetch;
} warm_t;

static volatile sig_atomic_t g_signal;
static void on_signal(int sig) { g_signal = sig; }

static int usage(FILE *out, int status)
{
    fprintf(out, "usage: zeus-pipe warm CONFIG [KEY=VALUE ...]\n\n"
                 "Fills the LMDB cache (cache.path) with the preprocessed samples of every split,\n"
                 "running the cache stage and loader.workers loaders. Keys already cached are\n"
                 "skipped, so an interrupted warm resumes where it stopped.\n");
    return status;
}

/* What the cache lacks, per split. */
static int plan(warm_t *w)
{
    zp_cachedb_t db;
    char err[1024];
    int rc = zp_cachedb_open(&db, &w->cfg, &w->meta, 1, err, sizeof err);
    if (rc) {
        fprintf(stderr, "zeus-pipe: %s\n", err);
        return 1;
    }
    for (int s = 0; s < ZP_SPLITS; s++) {
        int64_t n = w->meta.n[s];
        uint8_t *present = malloc((size_t)(n + 8) / 8);
        w->todo[s] = malloc(sizeof(uint32_t) * (size_t)(n ? n : 1));
        if (!present || !w->todo[s]) {
            free(present);
            zp_cachedb_close(&db);
            return 1;
        }
        w->cached[s] = zp_cachedb_present(&db, s, n, present);
        for (int64_t i = 0; i < n; i++)
            if (!(present[i >> 3] >> (i & 7) & 1))
                w->todo[s][w->ntodo[s]++] = (uint32_t)i;
        free(present);
        w->total += w->ntodo[s];
        fprintf(stderr, "zeus-pipe: %s: %lld of %lld samples cached; loading %lld\n", db.name[s],
                (long long)w->cached[s], (long long)n, (long long)w->ntodo[s]);
    }
    zp_cachedb_close(&db);
    return 0;
}

static void progress(warm_t *w, int64_t start, int final)
{
    static double last;
    double now = zp_wall_s();
    int tty = isatty(STDERR_FILENO);
    if (!final && now - last < (tty ? 0.2 : 5))
        return;
    last = now;
    double dt = (zp_now_ns() - start) / 1e9, rate = dt > 0 ? w->done / dt : 0;
    double eta = rate > 0 ? (w->total - w->done) / rate : 0;
    char bar[31];
    int fill = w->total ? (int)(30 * w->done / w->total) : 30;
    for (int i = 0; i < 30; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[30] = 0;
    fprintf(stderr, "%swarm [%s] %lld/%lld samples  %.0f samples/s  ETA %dm%02ds%s",
            tty ? "\r\033[K" : "", bar, (long long)w->done, (long long)w->total, rate,
            (int)eta / 60, (int)eta % 60, tty && !final ? "" : "\n");
}

/* Sends the next chunk of missing indices when a window slot is free. */
static int send_next(warm_t *w, int slot)
{
    int64_t left = w->sent, split = 0;
    while (split < ZP_SPLITS && left >= w->ntodo[split])
        left -= w->ntodo[split++];
    if (split == ZP_SPLITS)
        return 0;
    int64_t n = w->ntodo[split] - left < w->chunk ? w->ntodo[split] - left : w->chunk;
    static uint64_t seq;
    zp_msg_t m = {.type = ZP_MSG_FETCH, .id = ++seq, .split = (uint64_t)split, .n = (uint64_t)n};
    const void *parts[1] = {w->todo[split] + left};
    size_t sizes[1] = {(size_t)n * 4};
    w->inflight[slot] = m.id;
    w->inflight_n[slot] = n;
    w->sent += n;
    return zp_send(w->fetch, NULL, &m, parts, sizes, 1, 0);
}

/* One reply from the cache stage; returns 1 on a FAIL. */
static int on_reply(warm_t *w, zp_frames_t *f)
{
    zp_msg_t m;
    char why[256];
    int rc = 0;
    if (zp_frames_decode(f, 0, &m, why, sizeof why) == 0) {
        if (m.type == ZP_MSG_FAIL) {
            fprintf(stderr, "\nzeus-pipe: a loader failed: %s\n", m.error);
            rc = 1;
        }
        for (int i = 0; m.type == ZP_MSG_RESULT && i < WINDOW; i++)
            if (w->inflight[i] == m.id) {
                w->done += (int64_t)m.n;
                if ((w->inflight_n[i] -= (int64_t)m.n) == 0)
                    w->inflight[i] = 0;
            }
    }
    zp_msg_release(&m);
    return rc;
}

static int drive(warm_t *w)
{
    zp_frames_t f;
    zp_frames_init(&f);
    int64_t start = zp_now_ns();
    int status = 0, dummy;
    while (!status && w->done < w->total) {
        for (int i = 0; i < WINDOW && !status; i++)
            if (!w->inflight[i] && w->sent < w->total && send_next(w, i))
                status = 1;
        zmq_pollitem_t it = {w->fetch, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) > 0 && zp_frames_recv(&f, w->fetch, ZMQ_DONTWAIT) == 0)
            status = on_reply(w, &f);
        if (g_signal)
            status = 128 + g_signal;
        zp_child_t *bad = zp_procs_reap(&w->procs, &dummy);
        if (bad && !status) {
            char how[128];
            zp_procs_describe(bad, how, sizeof how);
            fprintf(stderr, "\nzeus-pipe: %s[%d] %s\n", zp_stage_name(bad->stage), bad->instance, how);
            zp_procs_log_tail(&w->procs, bad);
            status = 1;
        }
        progress(w, start, 0);
    }
    progress(w, start, 1);
    zp_frames_close(&f);
    return status;
}

static int prepare(warm_t *w, int argc, char **argv)
{
    int rc = zp_sup_load(argc, argv, "cache.enabled=true", &w->cfg, &w->ds);
    if (rc)
        return rc < 0 ? usage(stderr, 2) : rc;
    w->meta = w->ds->meta;
    if (zp_cache_prepare(&w->cfg, &w->meta))
        return 2;
    return plan(w);
}

static int start(warm_t *w)
{
    char name[80], ep[ZP_ENDPOINT_MAX + 16];
    snprintf(name, sizeof name, "%.60s-warm", w->cfg.run_name);
    int rc = zp_rundir_start(&w->cfg, name, w->run_dir, sizeof w->run_dir);
    if (rc)
        return rc;
    char err[PATH_MAX + 200];
    if (zp_dataset_write(w->ds, w->run_dir, err, sizeof err)) { /* what the stages read */
        fprintf(stderr, "zeus-pipe: %s\n", err);
        return 1;
    }
    zp_procs_init(&w->procs, w->run_dir);
    if (zp_endpoint(ep, sizeof ep, w->run_dir, zp_sock_name(ZP_SOCK_FETCH))) {
        fprintf(stderr, "zeus-pipe: %s: path too long for UNIX sockets\n", w->run_dir);
        return 2;
    }
    w->zctx = zmq_ctx_new();
    if (!(w->fetch = zp_sock_open(w->zctx, ZMQ_DEALER, ep, 0, 0)))
        return 1;
    rc = zp_procs_spawn(&w->procs, ZP_STAGE_CACHE, 0, 0);
    for (int i = 0; !rc && i < w->cfg.loader_workers; i++)
        rc = zp_procs_spawn(&w->procs, ZP_STAGE_LOADER, i, 0);
    return rc ? 1 : 0;
}

/* What is in the cache now, after the cache stage committed and exited. */
static int report(warm_t *w)
{
    zp_cachedb_t db;
    char err[1024];
    if (zp_cachedb_open(&db, &w->cfg, &w->meta, 1, err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: %s\n", err);
        return 1;
    }
    int64_t have = 0, want = 0;
    for (int s = 0; s < ZP_SPLITS; s++) {
        MDB_txn *txn;
        MDB_stat st = {0};
        if (zp_cachedb_read_begin(&db, &txn) == 0) {
            mdb_stat(txn, db.dbi[s], &st);
            mdb_txn_abort(txn);
        }
        have += (int64_t)st.ms_entries;
        want += w->meta.n[s];
    }
    zp_cachedb_close(&db);
    printf("loaded %lld samples; %s now holds %lld of %lld\n", (long long)w->done,
           w->cfg.cache_path, (long long)have, (long long)want);
    if (have < want) {
        fprintf(stderr, "zeus-pipe: the cache could not take every sample (see %s/logs/cache-0.log; "
                        "raise cache.max_bytes?)\n", w->run_dir);
        return 1;
    }
    return 0;
}

int cmd_warm(int argc, char **argv)
{
    if (zp_wants_help(argc, argv))
        return usage(stdout, 0);
    static warm_t w;
    int status = prepare(&w, argc, argv);
    if (status || w.total == 0) {
        if (!status)
            printf("%s already holds every sample: nothing to load\n", w.cfg.cache_path);
        zp_dataset_destroy(&w.ds);
        return status;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    w.chunk = w.cfg.task_size * 4;
    status = start(&w);
    if (!status)
        status = drive(&w);
    zp_procs_stop(&w.procs, 0, status >= 128 ? 1000 : 10000); /* the cache stage commits on TERM */
    zp_sock_close(&w.fetch);
    if (w.zctx)
        zmq_ctx_term(w.zctx);
    zp_rundir_cleanup(w.run_dir);
    for (int s = 0; s < ZP_SPLITS; s++)
        free(w.todo[s]);
    if (status == 0)
        status = report(&w);
    zp_dataset_destroy(&w.ds);
    return status;
}

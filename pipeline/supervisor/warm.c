/* warm.c — `zeus-pipe warm`: fills the LMDB cache (supervisor.h).
 *
 * Runs the cache stage and the loaders only, and asks the cache stage, like a
 * prefetcher would, for every sample the cache lacks; the cache stage writes
 * them. Resumable: what an earlier (even killed) warm committed is skipped. */
#define _GNU_SOURCE
#include "pipeline/cachedb/cachedb.h"
#include "pipeline/config/config.h"
#include "pipeline/dataset/dataset.h"
#include "pipeline/base/log.h"
#include "pipeline/base/names.h"
#include "pipeline/net/inbox.h"
#include "pipeline/net/sock.h"
#include "pipeline/supervisor/supervisor.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WINDOW 8

struct zp_warm {
    zp_warm_progress_t p;     /* what the caller reads */
    zp_config_t cfg;
    zp_dataset_t *ds;         /* probed once; owned */
    zp_dataset_meta_t meta;   /* ds->meta */
    char run_dir[PATH_MAX];
    zp_procs_t procs;
    uint32_t *todo[ZP_SPLITS]; /* missing indices per split; owned */
    int64_t sent, chunk;
    uint64_t seq;              /* the last fetch id */
    uint64_t inflight[WINDOW]; /* fetch ids, 0 = free */
    int64_t inflight_n[WINDOW];
    void *zctx, *fetch;
    int size_said;             /* zp_sup_cache_size has spoken: not again */
};

static volatile sig_atomic_t g_signal;
static void on_signal(int sig) { g_signal = sig; }

/* What the cache lacks, per split. */
static int plan(zp_warm_t *w)
{
    zp_cachedb_t db;
    char err[1024];
    int rc = zp_cachedb_open(&db, &w->cfg, &w->meta, 1, err, sizeof err);
    if (rc) {
        fprintf(stderr, "zeus-pipe: %s\n", err);
        return 1;
    }
    zp_warm_progress_t *p = &w->p;
    for (int s = 0; s < ZP_SPLITS; s++) {
        int64_t n = p->n[s] = w->meta.n[s];
        uint8_t *present = malloc((size_t)(n + 8) / 8);
        w->todo[s] = malloc(sizeof(uint32_t) * (size_t)(n ? n : 1));
        if (!present || !w->todo[s]) {
            free(present);
            zp_cachedb_close(&db);
            fprintf(stderr, "zeus-pipe: warm: out of memory for the plan of %lld samples\n",
                    (long long)n);
            return 1;
        }
        p->cached[s] = zp_cachedb_present(&db, s, n, present);
        for (int64_t i = 0; i < n; i++)
            if (!(present[i >> 3] >> (i & 7) & 1))
                w->todo[s][p->todo[s]++] = (uint32_t)i;
        free(present);
        p->total += p->todo[s];
        memcpy(p->db[s], db.name[s], sizeof p->db[s]);
    }
    zp_cachedb_close(&db);
    return 0;
}

/* Under Slurm across nodes (`srun --ntasks-per-node=1 zeus-pipe warm`): a
 * cache.path on a filesystem the nodes share is refused before anything is
 * made there. 0, or 1 after saying why. */
static int node_local(const zp_warm_t *w)
{
    zp_slurm_t sl;
    char why[600];
    if (zp_slurm_detect(&sl, why, sizeof why) != 1 || !zp_slurm_cache_local(w->cfg.cache_path, why, sizeof why))
        return 0;
    fprintf(stderr, "zeus-pipe: warm on node %s: %s\n", sl.node, why);
    return 1;
}

int zp_warm_create(zp_warm_t **out, int nargs, char **args)
{
    zp_warm_t *w = calloc(1, sizeof *w);
    *out = NULL;
    if (!w) {
        fprintf(stderr, "zeus-pipe: warm: out of memory\n");
        return 1;
    }
    int rc = zp_sup_load(nargs, args, "cache.enabled=true", &w->cfg, &w->ds);
    if (!rc) {
        w->meta = w->ds->meta;
        w->p.cache_path = w->cfg.cache_path;
        w->p.run_dir = w->run_dir;
        w->size_said = zp_sup_say_cache(&w->cfg, &w->meta);
        rc = node_local(w) || zp_sup_prepare_cache(&w->cfg, &w->meta) ? 2 : plan(w);
    }
    if (rc)
        zp_warm_destroy(&w);
    *out = w;
    return rc;
}

const zp_warm_progress_t *zp_warm_progress(const zp_warm_t *w) { return &w->p; }

void zp_warm_destroy(zp_warm_t **w)
{
    if (!*w)
        return;
    for (int s = 0; s < ZP_SPLITS; s++)
        free((*w)->todo[s]);
    zp_dataset_destroy(&(*w)->ds);
    free(*w);
    *w = NULL;
}

/* Sends the next chunk of missing indices into window slot `slot`. */
static int send_next(zp_warm_t *w, int slot)
{
    int64_t left = w->sent, split = 0;
    while (split < ZP_SPLITS && left >= w->p.todo[split])
        left -= w->p.todo[split++];
    if (split == ZP_SPLITS)
        return 0;
    int64_t n = w->p.todo[split] - left < w->chunk ? w->p.todo[split] - left : w->chunk;
    zp_msg_t m = {.type = ZP_MSG_FETCH, .id = ++w->seq, .split = (uint64_t)split, .n = (uint64_t)n};
    const void *parts[1] = {w->todo[split] + left};
    size_t sizes[1] = {(size_t)n * 4};
    w->inflight[slot] = m.id;
    w->inflight_n[slot] = n;
    w->sent += n;
    return zp_sock_send(w->fetch, NULL, &m, parts, sizes, 1, 0);
}

/* The cache stage's replies: RESULTs count as done, a FAIL ends the warm. */
static int on_result(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    (void)f;
    zp_warm_t *w = ctx;
    for (int i = 0; i < WINDOW; i++)
        if (w->inflight[i] == m->id) {
            w->p.done += (int64_t)m->n;
            if ((w->inflight_n[i] -= (int64_t)m->n) == 0)
                w->inflight[i] = 0;
        }
    return 0;
}

static int on_fail(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    (void)ctx, (void)f;
    fprintf(stderr, "\nzeus-pipe: a loader failed: %s\n", m->error);
    return 1;
}

static const zp_route_t REPLIES[] = {{ZP_MSG_RESULT, on_result}, {ZP_MSG_FAIL, on_fail}};

/* 1 after printing which stage ended when it should not have, else 0. */
static int stage_failed(zp_warm_t *w)
{
    int dummy;
    zp_child_t *bad = zp_procs_reap(&w->procs, &dummy);
    if (!bad)
        return 0;
    char how[128];
    zp_procs_describe(bad, how, sizeof how);
    fprintf(stderr, "\nzeus-pipe: %s[%d] %s\n", zp_names_stage(bad->stage), bad->instance, how);
    zp_procs_log_tail(&w->procs, bad);
    return 1;
}

static int drive(zp_warm_t *w, zp_warm_progress_fn *progress, void *arg)
{
    static int64_t dropped;
    const zp_inbox_t in = {.routes = REPLIES, .nroutes = ZP_COUNT(REPLIES),
                           .from = "the cache stage", .dropped = &dropped};
    zp_frames_t f;
    zp_frames_init(&f);
    w->p.start_ns = zp_now_ns();
    int status = 0;
    while (!status && w->p.done < w->p.total) {
        for (int i = 0; i < WINDOW && !status; i++)
            if (!w->inflight[i] && w->sent < w->p.total && send_next(w, i))
                status = 1;
        zmq_pollitem_t it = {w->fetch, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) > 0)
            status = zp_inbox_recv(&in, w->fetch, ZMQ_DONTWAIT, &f, w) ? 1 : 0;
        if (g_signal)
            status = 128 + g_signal;
        if (!status)
            status = stage_failed(w);
        else
            zp_procs_reap(&w->procs, &(int){0});
        progress(&w->p, 0, arg);
    }
    progress(&w->p, 1, arg);
    zp_frames_free(&f);
    return status;
}

static int start(zp_warm_t *w)
{
    char name[128], ep[ZP_ENDPOINT_MAX + 16], why[512];
    snprintf(name, sizeof name, "%.60s-warm", w->cfg.run_name);
    /* `srun --ntasks-per-node=1 zeus-pipe warm`: each node warms its own
     * cache, in a run directory of its own on the shared run.dir */
    zp_slurm_t sl;
    if (zp_slurm_detect(&sl, why, sizeof why) == 1) {
        size_t n = strlen(name);
        snprintf(name + n, sizeof name - n, "-%.40s", sl.node);
        for (char *p = name + n; *p; p++)
            if (*p == '/')
                *p = '_';
    }
    int rc = zp_rundir_start(&w->cfg, name, w->run_dir, sizeof w->run_dir);
    if (rc)
        return rc;
    char err[PATH_MAX + 200];
    if (zp_dataset_write(w->ds, w->run_dir, err, sizeof err)) { /* what the stages read */
        fprintf(stderr, "zeus-pipe: %s\n", err);
        return 1;
    }
    zp_procs_init(&w->procs, w->run_dir, &w->cfg);
    if (zp_sock_endpoint(ep, sizeof ep, w->run_dir, zp_names_sock(ZP_SOCK_FETCH))) {
        fprintf(stderr, "zeus-pipe: %s: path too long for UNIX sockets\n", w->run_dir);
        return 2;
    }
    w->zctx = zmq_ctx_new();
    if (zp_sock_create(&w->fetch, w->zctx, ZMQ_DEALER, ep, 0, 0))
        return 1;
    rc = zp_procs_spawn(&w->procs, ZP_STAGE_CACHE, 0, 0);
    for (int i = 0; !rc && i < w->cfg.loader_workers; i++)
        rc = zp_procs_spawn(&w->procs, ZP_STAGE_LOADER, i, 0);
    return rc ? 1 : 0;
}

/* What is in the cache now, after the cache stage committed and exited. */
static int count(zp_warm_t *w)
{
    zp_cachedb_t db;
    char err[1024];
    if (zp_cachedb_open(&db, &w->cfg, &w->meta, 1, err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: %s\n", err);
        return 1;
    }
    w->p.have = w->p.want = 0;
    for (int s = 0; s < ZP_SPLITS; s++) {
        MDB_txn *txn;
        MDB_stat st = {0};
        if (zp_cachedb_read_begin(&db, &txn) == 0) {
            mdb_stat(txn, db.dbi[s], &st);
            mdb_txn_abort(txn);
        }
        w->p.have += (int64_t)st.ms_entries;
        w->p.want += w->meta.n[s];
    }
    zp_cachedb_close(&db);
    return 0;
}

int zp_warm_run(zp_warm_t *w, zp_warm_progress_fn *progress, void *arg)
{
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    w->chunk = w->cfg.task_size * 4;
    int status = start(w);
    if (!status)
        status = drive(w, progress, arg);
    zp_procs_stop(&w->procs, 0, status >= 128 ? 1000 : 10000); /* the cache stage commits on TERM */
    zp_sock_destroy(&w->fetch);
    if (w->zctx)
        zmq_ctx_term(w->zctx);
    w->zctx = NULL;
    zp_rundir_cleanup(w->run_dir);
    if (!w->size_said)
        w->size_said = zp_sup_cache_size(&w->cfg, &w->meta);
    return status ? status : count(w);
}

/* autoscale_run.c — loader.autoscale in the supervisor: every
 * loader.autoscale_interval_s it reads the counters the logger keeps for
 * `zeus-pipe stat` (a STAT_REQ on the logger's stat socket), makes one
 * window of this node's figures from them (its trainers' wait for data and
 * its loaders' busy share, from the totals' growth since the last look),
 * asks the policy (autoscale.h), applies the decision as `zeus-pipe scale`
 * does, and sends each decision worth a record to the logger as an
 * "autoscale" metric (stage "supervisor"), which lands in metrics.jsonl and
 * the report. Under Slurm each node's first task runs it for the node's
 * loaders: it talks to rank 0's logger as a stage of its rank does (tcp
 * with CURVE from another node), and its own trainer's wait stands for the
 * node's (the ranks of a data-parallel job step together).
 * The contract: supervisor.h. */
#define _GNU_SOURCE
#include "pipeline/stage/event.h"
#include "pipeline/base/log.h"
#include "pipeline/base/names.h"
#include "pipeline/net/sock.h"
#include "pipeline/stage/stage.h"
#include "pipeline/supervisor/autoscale.h"
#include "pipeline/supervisor/supervisor.h"
#include "schemas/records.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEEN_MAX 600 /* instances remembered between two looks */

typedef struct { /* one instance's totals at the last look */
    int stage;
    int64_t instance, pid;
    double uptime, busy, wait;
} seen_t;

struct zp_autoscaler {
    zp_autoscale_t policy;
    zp_stage_t st; /* "supervisor": the events socket and the record's head */
    int64_t next_ns, interval_ns, last_ns;
    seen_t seen[SEEN_MAX];
    int nseen;
    int added[256];      /* loader instances autoscale started (a failed one is withdrawn) */
    int nadded;
    int failed_reported; /* a failed start was handed to the policy */
    int unanswered;      /* the logger did not answer: said once */
};

/* The online cores less one for the cache stage and two for each rank (its
 * prefetch and its trainer); at least 1. */
static int free_cores(int ranks, long *cores)
{
    *cores = sysconf(_SC_NPROCESSORS_ONLN);
    long left = (*cores > 0 ? *cores : 1) - 1 - 2L * ranks;
    return left < 1 ? 1 : left > 256 ? 256 : (int)left;
}

/* Resolves loader.max_workers (0: the free cores) and clamps loader.workers
 * into min..max: the count the loaders start with. Says so on stderr. */
static void resolve(zp_sup_t *s, int *min, int *max)
{
    int ranks = s->slurm.world > 1 ? 1 : (int)s->cfg.gpus;
    long cores;
    int spare = free_cores(ranks, &cores);
    *min = (int)s->cfg.min_workers;
    *max = s->cfg.max_workers ? (int)s->cfg.max_workers : spare;
    if (*max < *min)
        *max = *min;
    int64_t start = s->cfg.loader_workers;
    start = start < *min ? *min : start > *max ? *max : start;
    char why[160] = "";
    if (!s->cfg.max_workers)
        snprintf(why, sizeof why, " (loader.max_workers 0: of %ld core(s), what the cache stage "
                 "and %d prefetch and trainer pair(s) leave)", cores, ranks);
    fprintf(stderr, "zeus-pipe: loader.autoscale: %d..%d loader(s)%s, starting with %lld; every "
                    "%lld s one is added while the trainer waits for data over %.0f%% of the time\n",
            *min, *max, why, (long long)start, (long long)s->cfg.autoscale_interval_s,
            100 * s->cfg.autoscale_wait);
    s->cfg.loader_workers = start;
}

int zp_sup_autoscale_open(zp_sup_t *s)
{
    s->autoscale = NULL;
    if (!s->cfg.autoscale)
        return 0;
    if (s->slurm.world > 1 && s->slurm.local > 0)
        return 0; /* the node's first task scales the node's loaders */
    struct zp_autoscaler *a = calloc(1, sizeof *a);
    if (!a) {
        fprintf(stderr, "zeus-pipe: loader.autoscale: out of memory\n");
        return 1;
    }
    int min, max;
    resolve(s, &min, &max);
    zp_autoscale_init(&a->policy, min, max, s->cfg.autoscale_wait);
    /* a stage of this rank as far as sockets go: ipc here, tcp to rank 0 from another node */
    a->st.name = "supervisor";
    a->st.instance = s->slurm.world > 1 ? s->slurm.rank : 0;
    a->st.cfg = s->cfg;
    a->st.zctx = s->zctx;
    a->st.slurm = s->slurm;
    snprintf(a->st.run_dir, sizeof a->st.run_dir, "%s", s->run_dir);
    snprintf(a->st.run0, sizeof a->st.run0, "%s", s->slurm.world > 1 ? s->run0 : s->run_dir);
    zp_stage_socket(&a->st, &a->st.events, ZMQ_PUSH, zp_names_sock(ZP_SOCK_EVENTS), 0, 200); /* NULL: dropped */
    a->interval_ns = s->cfg.autoscale_interval_s * 1000000000ll;
    a->last_ns = zp_now_ns();
    a->next_ns = a->last_ns + a->interval_ns;
    s->autoscale = a;
    return 0;
}

void zp_sup_autoscale_close(zp_sup_t *s)
{
    if (!s->autoscale)
        return;
    zp_sock_destroy(&s->autoscale->st.events);
    free(s->autoscale);
    s->autoscale = NULL;
}

/* Keeps an instance's totals for the next look and puts the previous ones
 * in *prev: 1 when there were some (the same process), 0 for a process
 * first seen (its totals since it started count), -1 when its record has
 * not changed since the last look (nothing new to count). */
static int remember(struct zp_autoscaler *a, int stage, const zp_rec_head_t *h,
                    const zp_rec_stats_t *x, seen_t *prev)
{
    seen_t *e = NULL;
    for (int i = 0; i < a->nseen && !e; i++)
        if (a->seen[i].stage == stage && a->seen[i].instance == h->instance)
            e = &a->seen[i];
    if (!e && a->nseen < SEEN_MAX)
        e = &a->seen[a->nseen++];
    if (!e)
        return 0;
    int same = e->stage == stage && e->instance == h->instance && e->pid == h->pid;
    if (same && x->uptime_s <= e->uptime)
        return -1;
    *prev = same ? *e : (seen_t){0};
    *e = (seen_t){stage, h->instance, h->pid, x->uptime_s, x->total_busy_s, x->total_wait_in_s};
    return same;
}

/* Sums over the window of this node's trainers (wait) and loaders (busy). */
typedef struct {
    double wait, wait_time, busy, busy_time;
} sums_t;

static void add_row(struct zp_autoscaler *a, const zp_sup_t *s, const msgpack_object *o, sums_t *sum)
{
    zp_rec_head_t h;
    zp_rec_stats_t x;
    if (zp_records_head(o, &h) != ZP_REC_STATS)
        return;
    zp_records_decode(ZP_REC_STATS, o, &x);
    int stage = zp_names_stage_of(h.stage);
    int first = s->slurm.world > 1 ? s->slurm.rank : 0;
    int mine = stage == ZP_STAGE_LOADER
                   ? h.instance >= s->loader_base && h.instance < s->loader_base + 256
                   : stage == ZP_STAGE_TRAINER && h.instance >= first && h.instance < first + s->trainers;
    seen_t p = {0};
    if (!mine || x.uptime_s <= 0 || remember(a, stage, &h, &x, &p) < 0)
        return; /* another node's, or nothing new */
    double dt = x.uptime_s - p.uptime;
    double busy = x.total_busy_s - p.busy, wait = x.total_wait_in_s - p.wait;
    if (stage == ZP_STAGE_TRAINER)
        sum->wait += wait, sum->wait_time += dt;
    else
        sum->busy += busy, sum->busy_time += dt;
}

/* A STAT_REQ to the logger (rank 0's under Slurm), its STAT_REP in *m
 * (release it); 0, or an error with why for a reply that is none. */
static int ask_logger(struct zp_autoscaler *a, zp_frames_t *f, zp_msg_t *m, char *why, size_t len)
{
    memset(m, 0, sizeof *m);
    snprintf(why, len, "no reply");
    zp_msg_t req = {.type = ZP_MSG_STAT_REQ};
    void *sock;
    int rc = zp_stage_socket(&a->st, &sock, ZMQ_REQ, zp_names_sock(ZP_SOCK_STAT), 0, 0);
    if (!rc)
        rc = zp_sock_send(sock, NULL, &req, NULL, NULL, 0, 0);
    if (!rc) {
        zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
        rc = zmq_poll(&it, 1, 500) > 0 ? zp_frames_recv(f, sock, 0) : ZP_ETIMEOUT; /* the loop waits */
    }
    zp_sock_destroy(&sock);
    if (!rc && zp_frames_decode(f, 0, m, why, len))
        rc = ZP_EPROTO;
    if (!rc && (m->type != ZP_MSG_STAT_REP || m->body.type != MSGPACK_OBJECT_ARRAY)) {
        snprintf(why, len, "a %s, not a stat reply", zp_msg_name(m->type));
        zp_msg_release(m);
        rc = ZP_EPROTO;
    }
    return rc;
}

/* The window's wait and busy shares from the logger's latest counters; 0,
 * or non-zero when the logger did not answer. */
static int read_window(struct zp_autoscaler *a, const zp_sup_t *s, zp_autoscale_window_t *w)
{
    zp_msg_t m;
    zp_frames_t f;
    zp_frames_init(&f);
    char why[256];
    int rc = ask_logger(a, &f, &m, why, sizeof why);
    if (rc) {
        if (!a->unanswered++)
            fprintf(stderr, "zeus-pipe: loader.autoscale: the logger did not answer (%s); trying "
                            "again every interval\n", rc == ZP_EPROTO ? why : zp_strerror(rc));
        zp_frames_free(&f);
        return rc;
    }
    sums_t sum = {0};
    for (uint32_t i = 0; i < m.body.via.array.size; i++)
        add_row(a, s, &m.body.via.array.ptr[i], &sum);
    zp_msg_release(&m);
    zp_frames_free(&f);
    w->wait = sum.wait_time > 0 ? sum.wait / sum.wait_time : -1;
    w->busy = sum.busy_time > 0 ? sum.busy / sum.busy_time : -1;
    return 0;
}

/* MemAvailable in bytes; -1 when unknown. */
static int64_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

/* The resident size of the largest loader of this node, bytes; 0 when unknown. */
static int64_t loader_rss(const zp_sup_t *s)
{
    int64_t most = 0, page = sysconf(_SC_PAGESIZE);
    for (int i = 0; i < s->procs.nchild; i++) {
        const zp_child_t *c = &s->procs.child[i];
        if (c->stage != ZP_STAGE_LOADER || c->pid <= 0)
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/statm", (int)c->pid);
        FILE *f = fopen(path, "r");
        long long size, resident = 0;
        if (f && fscanf(f, "%lld %lld", &size, &resident) == 2 && resident * page > most)
            most = resident * page;
        if (f)
            fclose(f);
    }
    return most;
}

/* The decision as an "autoscale" metric to the logger, and a line on stderr. */
static void record(struct zp_autoscaler *a, const zp_autoscale_window_t *w,
                   const zp_autoscale_decision_t *d, int after, double window_s)
{
    fprintf(stderr, "zeus-pipe: loader.autoscale: %s (%d -> %d loader(s))\n", d->reason,
            w->workers, after);
    zp_event_t ev;
    zp_event_record(&a->st, &ev, ZP_REC_AUTOSCALE);
    zp_event_int(&ev, ZP_KEY(AUTOSCALE, change), d->change);
    zp_event_int(&ev, ZP_KEY(AUTOSCALE, workers_before), w->workers);
    zp_event_int(&ev, ZP_KEY(AUTOSCALE, workers_after), after);
    zp_event_int(&ev, ZP_KEY(AUTOSCALE, min_workers), a->policy.min);
    zp_event_int(&ev, ZP_KEY(AUTOSCALE, max_workers), a->policy.max);
    zp_event_num(&ev, ZP_KEY(AUTOSCALE, wait), w->wait);
    zp_event_num(&ev, ZP_KEY(AUTOSCALE, wait_threshold), a->policy.wait);
    zp_event_num(&ev, ZP_KEY(AUTOSCALE, busy), w->busy);
    zp_event_num(&ev, ZP_KEY(AUTOSCALE, window_s), window_s);
    zp_event_int(&ev, ZP_KEY(AUTOSCALE, mem_available), w->mem_available);
    zp_event_int(&ev, ZP_KEY(AUTOSCALE, loader_rss), w->loader_rss);
    zp_event_str(&ev, ZP_KEY(AUTOSCALE, reason), d->reason);
    zp_event_send(&a->st, &ev);
}

/* A loader autoscale started that failed: retired when it runs again, its
 * restart called off when one is pending, so that it is not retried. */
static void withdraw(struct zp_autoscaler *a, zp_child_t *c)
{
    for (int i = 0; i < a->nadded; i++)
        if (a->added[i] == c->instance) {
            if (c->pid > 0 && !c->retiring)
                kill(c->pid, ZP_SIG_RETIRE), c->retiring = 1;
            else if (!c->pid)
                c->restart_at = 0;
            a->added[i] = a->added[--a->nadded];
            return;
        }
}

/* A loader of this node that died by itself before it ever delivered (a
 * crash on start; not one killed from outside) and is not running now: it died since `since` (ns) and waits for
 * its restart, or it was given up on. One that crashed once and runs again
 * is none. Described into why; 0 when none. One that autoscale started is
 * withdrawn. */
static int start_failure(struct zp_autoscaler *a, zp_sup_t *s, int64_t since, char *why, size_t len)
{
    for (int i = 0; i < s->procs.nchild; i++) {
        zp_child_t *c = &s->procs.child[i];
        if (c->stage == ZP_STAGE_LOADER && c->deaths > 0 && !c->delivered && c->pid <= 0 &&
            !c->retiring && !zp_procs_killed(c) && (c->last_death > since || !c->restart_at)) {
            snprintf(why, len, "loader[%d] exited before delivering a sample", c->instance);
            withdraw(a, c);
            return 1;
        }
    }
    return 0;
}

/* Notes the loaders running now that `before` (a bitmap by child slot) did
 * not have: the ones autoscale just started. */
static void note_added(struct zp_autoscaler *a, const zp_sup_t *s, const unsigned char *before)
{
    for (int i = 0; i < s->procs.nchild && a->nadded < 256; i++) {
        const zp_child_t *c = &s->procs.child[i];
        if (c->stage == ZP_STAGE_LOADER && c->pid > 0 && !before[i])
            a->added[a->nadded++] = c->instance;
    }
}

/* Applies d: `scale loader=+1` or `-1`; a loader that could not be forked
 * turns into a failed start. Returns the loaders after it. */
static int apply(struct zp_autoscaler *a, zp_sup_t *s, zp_autoscale_window_t *w,
                 zp_autoscale_decision_t *d)
{
    char err[256] = "";
    unsigned char before[ZP_CHILDREN_MAX] = {0};
    for (int i = 0; i < s->procs.nchild; i++)
        before[i] = s->procs.child[i].pid > 0;
    int rc = zp_sup_scale(s, d->change > 0 ? "loader=+1" : "loader=-1", err, sizeof err);
    if (d->change > 0)
        note_added(a, s, before);
    if (!rc && zp_sup_loaders(s) == w->workers + d->change)
        return w->workers + d->change;
    if (d->change < 0)
        return zp_sup_loaders(s);
    char why[300];
    snprintf(why, sizeof why, "a new loader could not be started%s%s", err[0] ? ": " : "", err);
    zp_autoscale_start_failed(&a->policy, why, d);
    d->report = 1;
    return zp_sup_loaders(s);
}

void zp_sup_autoscale_tick(zp_sup_t *s)
{
    struct zp_autoscaler *a = s->autoscale;
    int64_t now = zp_now_ns();
    if (!a || now < a->next_ns)
        return;
    a->next_ns = now + a->interval_ns;
    double window_s = (double)(now - a->last_ns) / 1e9;
    int64_t since = a->last_ns;
    a->last_ns = now;
    zp_autoscale_window_t w = {.workers = zp_sup_loaders(s), .mem_available = mem_available(),
                               .loader_rss = loader_rss(s)};
    zp_autoscale_decision_t d;
    char why[128];
    if (!a->failed_reported && start_failure(a, s, since, why, sizeof why)) {
        a->failed_reported = 1;
        zp_autoscale_start_failed(&a->policy, why, &d);
        w.wait = w.busy = -1;
        int after = zp_sup_loaders(s); /* less the one withdrawn, when autoscale had added it */
        d.change = after - w.workers;
        record(a, &w, &d, after, window_s);
        w.workers = after;
    }
    if (read_window(a, s, &w))
        return;
    zp_autoscale_decide(&a->policy, &w, &d);
    int after = d.change ? apply(a, s, &w, &d) : w.workers;
    if (d.report)
        record(a, &w, &d, after, window_s);
}

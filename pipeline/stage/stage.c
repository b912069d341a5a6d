/* stage.c — a stage process: its sockets under the run (ipc, or tcp with CURVE
 * under Slurm), its counters and their stats records, its timer samples, and
 * the events it sends the logger. */
#define _GNU_SOURCE
#include "pipeline/stage/stage.h"
#include "pipeline/stage/event.h"
#include "pipeline/base/hash.h"
#include "pipeline/base/log.h"
#include "pipeline/base/names.h"
#include "pipeline/net/keys.h"
#include "pipeline/base/resources.h"
#include "pipeline/net/inbox.h"
#include "pipeline/net/sock.h"
#include "pipeline/stage/zap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

volatile sig_atomic_t zp_stop;
volatile sig_atomic_t zp_retire;
volatile sig_atomic_t zp_save;

int zp_stage_world(const zp_stage_t *st)
{
    if (st->mode != ZP_MODE_TRAIN && st->mode != ZP_MODE_RESUME)
        return 1;
    return st->slurm.world > 1 ? st->slurm.world : (int)st->cfg.gpus;
}

/* A client's CURVE keys under Slurm: its rank's pair and the run's server key. */
static int ranks_keys(const zp_stage_t *st, char pub[ZP_Z85_KEY], char sec[ZP_Z85_KEY],
                      char server_pub[ZP_Z85_KEY])
{
    char path[PATH_MAX + 16], err[PATH_MAX + 200];
    snprintf(path, sizeof path, "%s/ranks.key", st->run0);
    int rc = zp_keys_read_rank(path, st->slurm.rank, pub, sec, err, sizeof err);
    snprintf(path, sizeof path, "%s/server.pub", st->run0);
    if (!rc)
        rc = zp_keys_read_public(path, server_pub, err, sizeof err);
    if (rc)
        zp_error("%s", err);
    return rc;
}

const char *zp_stage_run0(const zp_stage_t *st) { return st->run0[0] ? st->run0 : st->run_dir; }

int zp_stage_slurm(zp_stage_t *st)
{
    char why[512];
    const char *rank0 = getenv(ZP_SLURM_ENV);
    int rc = rank0 ? zp_slurm_detect(&st->slurm, why, sizeof why) : 0;
    if (rc < 0)
        zp_error("%s", why);
    if (rc != 1) {
        st->slurm.world = 0;
        return rc;
    }
    snprintf(st->slurm.host, sizeof st->slurm.host, "%s", rank0);
    snprintf(st->run0, sizeof st->run0, "%s", st->run_dir);
    const char *plane = getenv(ZP_PLANE_ENV);
    snprintf(st->plane, sizeof st->plane, "%s", plane && *plane ? plane : st->run_dir);
    if (st->slurm.rank == 0)
        return 0;
    char *slash = strrchr(st->run0, '/'); /* RUN/rank-<r> */
    if (slash && slash != st->run0)
        *slash = 0;
    return 0;
}

/* The node's cache sockets lie in its data plane's folder (pipeline/base/slurm.h). */
static int plane_socket(const char *name)
{
    return !strcmp(name, zp_names_sock(ZP_SOCK_WORK)) || !strcmp(name, zp_names_sock(ZP_SOCK_FETCH));
}

int zp_stage_endpoint(const zp_stage_t *st, const char *name, char *buf, size_t len)
{
    const char *dir = st->plane[0] && plane_socket(name) ? st->plane : st->run_dir;
    int rc = zp_sock_endpoint(buf, len, dir, name);
    if (rc)
        zp_error("%s/sock/%s.ipc: path too long for a UNIX socket; choose a shorter run.dir", dir, name);
    return rc;
}

/* Under Slurm: the tcp port of a socket every rank shares (transport.bind's
 * port plus the socket's offset), or 0 for a socket of this host's own.
 * Rank 0 binds such a socket twice: ipc, plain, for its own stages, and tcp,
 * CURVE, for the other ranks'. */
static int shared_port(const zp_stage_t *st, const char *name)
{
    const char *colon = strrchr(st->cfg.bind, ':');
    for (int i = 0; st->slurm.world > 1 && colon && i < ZP_SOCK_COUNT; i++)
        if (zp_names_slurm_port(i) && !strcmp(name, zp_names_sock(i)))
            return atoi(colon + 1) + zp_names_slurm_port(i);
    return 0;
}

/* CURVE on a tcp socket: a server of the ranks' ZAP domain (only the job's
 * rank keys get in; zap.h), or a client with this rank's key. */
static int curve(zp_stage_t *st, void *sock, int server)
{
    char pub[ZP_Z85_KEY], sec[ZP_Z85_KEY], spub[ZP_Z85_KEY];
    if (server)
        return zp_zap_serve(st, sock, ZP_ZAP_RANKS);
    int rc = ranks_keys(st, pub, sec, spub);
    if (rc)
        return rc;
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, spub, 40) ||
        zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, pub, 40) ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec, 40))
        return ZP_EZMQ;
    return 0;
}

/* bind or connect, the endpoint and the error logged */
static int link_to(void *sock, const char *ep, int bind)
{
    if (bind && zp_resources_add_endpoint(ep)) /* an ipc file: recorded before it exists */
        return ZP_EINVAL;
    if (bind ? zmq_bind(sock, ep) == 0 : zmq_connect(sock, ep) == 0)
        return 0;
    zp_error("%s %s: %s", bind ? "bind" : "connect", ep, zmq_strerror(errno));
    return ZP_EZMQ;
}

int zp_stage_attach(zp_stage_t *st, void *sock, const char *name, int bind)
{
    char ep[ZP_ENDPOINT_MAX + 300];
    int port = shared_port(st, name);
    /* ipc for this host's own stages: rank 0's too, also when the socket is shared */
    int rc = port && !bind && st->slurm.rank > 0 ? 0 : zp_stage_endpoint(st, name, ep, sizeof ep);
    if (!rc && (!port || bind || st->slurm.rank == 0))
        rc = link_to(sock, ep, bind);
    if (rc || !port || (!bind && st->slurm.rank == 0))
        return rc;
    /* The other ranks' tcp. A listener takes the socket's options when it is
     * bound, so the ipc one above stays plain and only this one is CURVE. */
    const char *colon = strrchr(st->cfg.bind, ':');
    if (bind)
        snprintf(ep, sizeof ep, "tcp://%.*s:%d", (int)(colon - st->cfg.bind), st->cfg.bind, port);
    else
        snprintf(ep, sizeof ep, "tcp://%s:%d", st->slurm.host, port);
    rc = curve(st, sock, bind);
    return rc ? rc : link_to(sock, ep, bind);
}

int zp_stage_socket(zp_stage_t *st, void **out, int type, const char *name, int bind, int linger_ms)
{
    if (!(*out = zmq_socket(st->zctx, type))) {
        zp_error("%s socket: %s", name, zmq_strerror(errno));
        return ZP_EZMQ;
    }
    zmq_setsockopt(*out, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
    zp_sock_limit(*out);
    if (zp_stage_attach(st, *out, name, bind)) {
        zp_sock_destroy(out);
        return ZP_EZMQ;
    }
    return 0;
}

/* Timer samples leave as {kind: "timer", region, ns: [durations], start:
 * [microseconds before `time`]}: an offset of a few seconds packs in 5 bytes
 * where a wall-clock time would take 9, and the trace (pipeline/report/trace.h)
 * places every sample from it. The record's `time` is the wall clock read
 * right beside `now` (not later, when the record is built: a thread
 * preempted in between would shift its samples by microseconds). */
static void send_samples(void *ctx, int region, const int64_t *ns, const int64_t *end, int n)
{
    zp_stage_t *st = ctx;
    int64_t now = zp_now_ns(), start[ZP_TIMER_BUF];
    double wall = zp_wall_s();
    for (int i = 0; i < n && i < ZP_TIMER_BUF; i++)
        start[i] = (now - (end[i] - ns[i])) / 1000;
    zp_event_t ev;
    zp_event_record_at(st, &ev, ZP_REC_TIMER, wall);
    zp_event_str(&ev, ZP_KEY(TIMER, region), zp_timer_region_name(region));
    zp_event_ints(&ev, ZP_KEY(TIMER, ns), ns, n);
    zp_event_ints(&ev, ZP_KEY(TIMER, start), start, n);
    zp_event_send(st, &ev);
}

zp_inbox_t zp_stage_inbox(zp_stage_t *st, const zp_route_t *routes, int nroutes, int first,
                          const char *from, int64_t *dropped)
{
    return (zp_inbox_t){.routes = routes, .nroutes = nroutes, .first = first, .from = from,
                        .dropped = dropped, .errors = &st->stats.errors};
}

int zp_stage_open(zp_stage_t *st)
{
    zp_timer_init(&st->timers, send_samples, st);
    if (st->connect[0] && st->slurm.world < 2) { /* a remote loader: no logger to talk to */
        st->zctx = zmq_ctx_new();
        st->stats.since = st->stats.w_start = st->stats.start = zp_now_ns();
        st->stats.interval_ns = st->cfg.stat_interval_ms * 1000000;
        return st->zctx ? 0 : ZP_EZMQ;
    }
    st->zctx = zmq_ctx_new();
    if (!st->zctx)
        return ZP_EZMQ;
    /* Options first: they are taken when the connection is made. The logger
     * may bind after us, so retry soon; linger lets pending events out. */
    int hwm = 10000, ivl = 10, linger = 2000;
    st->events = zmq_socket(st->zctx, ZMQ_PUSH);
    if (!st->events)
        return ZP_EZMQ;
    zmq_setsockopt(st->events, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(st->events, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl);
    zmq_setsockopt(st->events, ZMQ_LINGER, &linger, sizeof linger);
    int rc = zp_stage_attach(st, st->events, zp_names_sock(ZP_SOCK_EVENTS), 0);
    if (rc)
        return rc;
    int64_t now = zp_now_ns();
    st->stats.since = st->stats.w_start = st->stats.start = now;
    st->stats.interval_ns = st->cfg.stat_interval_ms * 1000000;
    st->stats.next_ns = now; /* a first record at once: `stat` sees a new stage within a second */
    return 0;
}

void zp_stage_close(zp_stage_t *st)
{
    if (st->events) {
        st->stats.next_ns = 0; /* the last record: totals of the whole life */
        st->stats.final = 1;
        zp_stage_stats_tick(st);
    }
    zp_sock_destroy(&st->events);
    zp_zap_destroy(&st->zap); /* after the stage closed its sockets: none is bound now */
    if (st->zctx) {
        /* Blocks until pending events reach the logger (or LINGER passes);
         * a SIGTERM arriving meanwhile must not cut that short. */
        while (zmq_ctx_term(st->zctx) == -1 && errno == EINTR)
            ;
        st->zctx = NULL;
    }
}

void zp_stage_stats_state(zp_stats_t *s, int state)
{
    int64_t now = zp_now_ns();
    s->ns[s->state] += now - s->since;
    s->since = now;
    s->state = state;
}

void zp_stage_stats_tick(zp_stage_t *st)
{
    zp_stats_t *s = &st->stats;
    int64_t now = zp_now_ns();
    if (now < s->next_ns)
        return;
    zp_stage_stats_state(s, s->state);
    double dt = now > s->w_start ? (double)(now - s->w_start) : 1.0;
    double dts = dt / 1e9;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru); /* every thread, ZeroMQ's I/O thread included */
    int64_t cpu = (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
                  (int64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
    zp_event_t ev;
    zp_event_record(st, &ev, ZP_REC_STATS);
    int64_t lookups = s->lookups - s->w_lookups;
    zp_event_num(&ev, ZP_KEY(STATS, hit_rate), lookups ? (double)(s->hits - s->w_hits) / (double)lookups : -1);
    zp_event_num(&ev, ZP_KEY(STATS, cpu), s->w_cpu_ns ? (double)(cpu - s->w_cpu_ns) / dt : 0);
    zp_event_num(&ev, ZP_KEY(STATS, items_per_s), (double)(s->items - s->w_items) / dts);
    zp_event_num(&ev, ZP_KEY(STATS, bytes_per_s), (double)(s->bytes - s->w_bytes) / dts);
    zp_event_num(&ev, ZP_KEY(STATS, busy), (double)(s->ns[ZP_ST_BUSY] - s->w_ns[ZP_ST_BUSY]) / dt);
    zp_event_num(&ev, ZP_KEY(STATS, wait_in), (double)(s->ns[ZP_ST_WAIT_IN] - s->w_ns[ZP_ST_WAIT_IN]) / dt);
    zp_event_num(&ev, ZP_KEY(STATS, wait_out), (double)(s->ns[ZP_ST_WAIT_OUT] - s->w_ns[ZP_ST_WAIT_OUT]) / dt);
    zp_event_int(&ev, ZP_KEY(STATS, queue), s->queue);
    zp_event_int(&ev, ZP_KEY(STATS, total_items), s->items);
    zp_event_int(&ev, ZP_KEY(STATS, total_bytes), s->bytes);
    zp_event_int(&ev, ZP_KEY(STATS, errors), s->errors);
    zp_event_int(&ev, ZP_KEY(STATS, lmdb_errors), s->lmdb_errors);
    zp_event_int(&ev, ZP_KEY(STATS, events_dropped), st->events_dropped);
    zp_event_num(&ev, ZP_KEY(STATS, window_s), dts);
    zp_event_num(&ev, ZP_KEY(STATS, uptime_s), (double)(now - s->start) / 1e9);
    zp_event_num(&ev, ZP_KEY(STATS, total_busy_s), (double)s->ns[ZP_ST_BUSY] / 1e9);
    zp_event_num(&ev, ZP_KEY(STATS, total_wait_in_s), (double)s->ns[ZP_ST_WAIT_IN] / 1e9);
    zp_event_num(&ev, ZP_KEY(STATS, total_wait_out_s), (double)s->ns[ZP_ST_WAIT_OUT] / 1e9);
    zp_event_int(&ev, ZP_KEY(STATS, final), s->final); /* the stage is exiting */
    zp_event_num(&ev, ZP_KEY(STATS, readers_busy),
                 s->helpers ? (double)(s->helper_ns - s->w_helper_ns) / (dt * s->helpers) : -1);
    zp_event_send(st, &ev);
    zp_timer_flush(&st->timers);
    s->w_start = now;
    s->w_cpu_ns = cpu;
    s->w_hits = s->hits;
    s->w_lookups = s->lookups;
    s->w_helper_ns = s->helper_ns;
    s->w_items = s->items;
    s->w_bytes = s->bytes;
    memcpy(s->w_ns, s->ns, sizeof s->ns);
    s->next_ns = now + s->interval_ns;
}

/* comm.c — sums over the trainer ranks through rank 0; see comm.h. */
#define _GNU_SOURCE
#include "pipeline/ring/comm.h"
#include "pipeline/base/log.h"
#include "pipeline/base/names.h"
#include "pipeline/net/sock.h"
#include "pipeline/base/timer.h"
#include "pipeline/stage/zap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WORLD 64

struct zp_comm {
    zp_stage_t *st;
    int rank, world;
    int flags;          /* ZP_COMM_* */
    void *sock;
    uint64_t seq;       /* id of the next reduction */
    int64_t timeout_ns;
    zp_frames_t in[MAX_WORLD]; /* rank 0: each rank's REDUCE of this reduction; else [0]: the sum */
    double *acc;               /* rank 0: the running sum of the values */
    int64_t foreign;           /* rank 0: messages from peers that are no rank, dropped */
    size_t acc_cap;
    int64_t last_ns;           /* the last sum's time (ZP_R_COMM) */
};

int zp_comm_create(zp_comm_t **out, zp_stage_t *st, int rank, int world, int flags)
{
    *out = NULL;
    if (world < 1 || world > MAX_WORLD || rank < 0 || rank >= world)
        return ZP_EINVAL;
    zp_comm_t *c = calloc(1, sizeof *c);
    if (!c)
        return ZP_ENOMEM;
    c->st = st, c->rank = rank, c->world = world, c->flags = flags;
    c->timeout_ns = st->cfg.comm_timeout_s * 1000000000ll;
    for (int i = 0; i < world; i++)
        zp_frames_init(&c->in[i]);
    int rc = 0;
    if (world == 1) { /* alone: every sum is the values themselves */
        *out = c;
        return 0;
    }
    if (rank == 0) {
        /* linger: the last sum's answers leave even when rank 0 closes at once */
        zp_stage_socket(st, &c->sock, ZMQ_ROUTER, zp_names_sock(ZP_SOCK_COMM), 1, 2000);
        int mandatory = 1; /* a reply to a rank that is gone fails instead of vanishing */
        if (c->sock)
            zmq_setsockopt(c->sock, ZMQ_ROUTER_MANDATORY, &mandatory, sizeof mandatory);
    } else if ((c->sock = zmq_socket(st->zctx, ZMQ_DEALER))) {
        char id[8];
        int linger = 2000, n = snprintf(id, sizeof id, "%d", rank);
        zmq_setsockopt(c->sock, ZMQ_ROUTING_ID, id, (size_t)n);
        zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof linger);
        if ((rc = zp_stage_attach(st, c->sock, zp_names_sock(ZP_SOCK_COMM), 0)))
            zp_sock_destroy(&c->sock);
    }
    if (rc || !c->sock) {
        zp_comm_destroy(&c);
        return rc ? rc : ZP_EZMQ;
    }
    *out = c;
    return 0;
}

void zp_comm_destroy(zp_comm_t **cp)
{
    zp_comm_t *c = *cp;
    if (!c)
        return;
    for (int i = 0; i < c->world; i++)
        zp_frames_free(&c->in[i]);
    zp_sock_destroy(&c->sock);
    free(c->acc);
    free(c);
    *cp = NULL;
}

/* Receives one message into f within the reduction's deadline (checked
 * before every wait: a peer that keeps sending strangers cannot hold it off). */
static int recv_by(zp_comm_t *c, zp_frames_t *f, int64_t deadline, const char *waiting_for)
{
    for (;;) {
        if (zp_now_ns() > deadline) {
            zp_error("sum %llu of the trainer ranks: no word from %s in %lld s "
                     "(trainer.comm_timeout_s)", (unsigned long long)c->seq, waiting_for,
                     (long long)c->st->cfg.comm_timeout_s);
            return ZP_ETIMEOUT;
        }
        zmq_pollitem_t it = {c->sock, 0, ZMQ_POLLIN, 0};
        int n = zmq_poll(&it, 1, 100);
        if (zp_stop || zp_save || (n < 0 && errno == EINTR && (c->flags & ZP_COMM_SIGNAL_STOPS)))
            return ZP_ESTOP;
        if (n > 0)
            return zp_frames_recv(f, c->sock, 0);
        if (n < 0 && errno != EINTR)
            return ZP_EZMQ;
        zp_stage_stats_tick(c->st);
    }
}

/* Decodes frames [first..) of f as this reduction's REDUCE of n values and k sums. */
static int check(zp_comm_t *c, zp_frames_t *f, int first, size_t n, size_t k, int from)
{
    zp_msg_t m;
    char why[256];
    int rc = zp_frames_decode(f, first, &m, why, sizeof why);
    if (!rc && (m.type != ZP_MSG_REDUCE || m.id != c->seq || m.n != n || m.elems != k)) {
        snprintf(why, sizeof why, "%s %llu of %llu values and %llu sums, expected reduce %llu of "
                 "%zu and %zu", zp_msg_name(m.type), (unsigned long long)m.id,
                 (unsigned long long)m.n, (unsigned long long)m.elems, (unsigned long long)c->seq,
                 n, k);
        rc = ZP_EPROTO;
    }
    zp_msg_release(&m);
    if (rc)
        zp_error("sum %llu of the trainer ranks: rank %d sent %s", (unsigned long long)c->seq, from,
                 why);
    return rc ? ZP_EPROTO : 0;
}

/* The rank that sent f (routing id, header, ...), or -1. Under Slurm the
 * ranks come over tcp and a rank is the key it proved (the ZAP User-Id of
 * its connection, zap.h): the routing id is the peer's own say. Otherwise
 * they come over the run's ipc socket (sock/, mode 0700) and their routing
 * id, "1" .. "world-1", names them. */
static int rank_of(const zp_comm_t *c, zp_frames_t *f)
{
    if (c->st->slurm.world > 1)
        return f->n > 1 ? zp_zap_rank(&f->part[1], c->world) : -1;
    if (f->n < 1)
        return -1;
    size_t len = zmq_msg_size(&f->part[0]);
    for (int r = 1; r < c->world; r++) {
        char want[8];
        int n = snprintf(want, sizeof want, "%d", r);
        if (len == (size_t)n && !memcmp(zmq_msg_data(&f->part[0]), want, len))
            return r;
    }
    return -1;
}

/* dst takes src's frames; src is left empty. */
static void frames_move(zp_frames_t *dst, zp_frames_t *src)
{
    zp_frames_free(dst);
    for (int i = 0; i < src->n; i++) {
        zmq_msg_init(&dst->part[i]);
        zmq_msg_move(&dst->part[i], &src->part[i]);
    }
    dst->n = src->n;
    zp_frames_free(src);
}

static int sum_at_root(zp_comm_t *c, float *v, size_t n, double *s, size_t k, int64_t deadline)
{
    int have[MAX_WORLD] = {1}, got = 1, rc = 0;
    while (!rc && got < c->world) {
        zp_frames_t f;
        zp_frames_init(&f);
        char missing[256] = "rank";
        for (int r = 1, at = 4; r < c->world && at < 240; r++)
            if (!have[r])
                at += snprintf(missing + at, sizeof missing - (size_t)at, " %d", r);
        rc = recv_by(c, &f, deadline, missing);
        int r = rc ? -1 : rank_of(c, &f);
        if (!rc && r < 0) { /* not a rank of this run: dropped, the sum goes on */
            c->st->stats.errors++;
            zp_warn_limited(&c->foreign, "sum %llu of the trainer ranks: dropped a message from a "
                            "peer that is no rank of this run", (unsigned long long)c->seq);
            zp_frames_free(&f);
            continue;
        }
        if (!rc && have[r]) {
            zp_error("sum %llu of the trainer ranks: rank %d sent its part twice",
                     (unsigned long long)c->seq, r);
            rc = ZP_EPROTO;
        }
        if (!rc && !(rc = check(c, &f, 1, n, k, r))) {
            frames_move(&c->in[r], &f);
            have[r] = 1, got++;
            continue;
        }
        zp_frames_free(&f);
    }
    if (rc)
        return rc;
    if (c->acc_cap < n) {
        double *p = realloc(c->acc, n * sizeof *p);
        if (!p)
            return ZP_ENOMEM;
        c->acc = p, c->acc_cap = n;
    }
    for (size_t i = 0; i < n; i++)
        c->acc[i] = v[i];
    for (int r = 1; r < c->world; r++) { /* in rank order, whoever came first */
        const uint8_t *p = zmq_msg_data(&c->in[r].part[2]), *q = zmq_msg_data(&c->in[r].part[3]);
        for (size_t i = 0; i < n; i++) {
            float x;
            memcpy(&x, p + 4 * i, 4);
            c->acc[i] += x;
        }
        for (size_t i = 0; i < k; i++) {
            double x;
            memcpy(&x, q + 8 * i, 8);
            s[i] += x;
        }
    }
    for (size_t i = 0; i < n; i++)
        v[i] = (float)c->acc[i];
    zp_msg_t m = {.type = ZP_MSG_REDUCE, .id = c->seq, .n = n, .elems = k};
    const void *parts[2] = {v, s};
    size_t sizes[2] = {n * 4, k * 8};
    for (int r = 1; r < c->world; r++)
        if (zp_sock_send(c->sock, &c->in[r].part[0], &m, parts, sizes, 2, 0)) {
            zp_error("sum %llu of the trainer ranks: rank %d has gone away (%s)",
                     (unsigned long long)c->seq, r, zmq_strerror(errno));
            return ZP_EZMQ;
        }
    return 0;
}

static int sum_with_ranks(zp_comm_t *c, float *v, size_t n, double *s, size_t k)
{
    int64_t deadline = zp_now_ns() + c->timeout_ns;
    if (c->rank == 0)
        return sum_at_root(c, v, n, s, k, deadline);
    zp_msg_t m = {.type = ZP_MSG_REDUCE, .id = c->seq, .n = n, .elems = k};
    const void *parts[2] = {v, s};
    size_t sizes[2] = {n * 4, k * 8};
    int rc = zp_sock_send(c->sock, NULL, &m, parts, sizes, 2, 0);
    if (!rc && !(rc = recv_by(c, &c->in[0], deadline, "rank 0")) &&
        !(rc = check(c, &c->in[0], 0, n, k, 0))) {
        memcpy(v, zmq_msg_data(&c->in[0].part[1]), n * 4);
        memcpy(s, zmq_msg_data(&c->in[0].part[2]), k * 8);
    }
    return rc;
}

int zp_comm_sum(zp_comm_t *c, float *v, size_t n, double *s, size_t k)
{
    c->last_ns = 0;
    if (c->world == 1)
        return 0;
    ZP_TIME_BEGIN(&c->st->timers, ZP_R_COMM);
    int rc = sum_with_ranks(c, v, n, s, k);
    c->last_ns = ZP_TIME_END(&c->st->timers, ZP_R_COMM);
    c->seq++;
    return rc;
}

int64_t zp_comm_last_ns(const zp_comm_t *c) { return c->last_ns; }
int zp_comm_rank(const zp_comm_t *c) { return c->rank; }
int zp_comm_world(const zp_comm_t *c) { return c->world; }

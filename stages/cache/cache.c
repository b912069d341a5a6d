/* cache.c — the broker between prefetchers and loaders, and (store.c)
 * the cache's only writer. A FETCH of n indices becomes ceil(n / task_size)
 * TASKs; loaders get tasks only while they have credit; every task in flight
 * is tracked with its loader, and its SAMPLES are forwarded as a RESULT with
 * the fetch id and the task's offset inside the fetch.
 *
 * Reliability (the ZeroMQ guide's Paranoid Pirate): loaders and the broker
 * send each other HEARTBEATs when silent for loader.heartbeat_ms. A loader
 * not heard from for heartbeat_ms x liveness is declared dead and its tasks
 * go back to the front of the queue; a result for a task from anyone but the
 * loader that holds it now is a late duplicate and dropped. A loader declared
 * dead that speaks again (it was stopped, not killed) is taken back. */
#define _GNU_SOURCE
#include "stages/cache/cache.h"
#include "pipeline/cachedb/cachedb.h"
#include "pipeline/stage/event.h"
#include "pipeline/base/log.h"
#include "pipeline/base/names.h"
#include "pipeline/net/inbox.h"
#include "pipeline/net/sock.h"
#include "pipeline/stage/stage.h"
#include "pipeline/net/keys.h"
#include "stages/cache/store.h"
#include "stages/cache/tasks.h"
#include "pipeline/stage/zap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOADERS_MAX 1024

typedef zp_peer_t peer_t;

typedef struct {
    peer_t peer;
    void *sock; /* the socket it came through: work (ipc) or remote (tcp) */
    int64_t credit;
    int64_t tasks_done;
    int64_t last_seen; /* ns: the last message from it */
    int alive;         /* 0: declared dead (its record may be reused) */
    int retiring;      /* sent RETIRE: gets no task, and its silence is its exit */
    int refused;       /* sent REFUSED: gets no task, and nothing it sends is used */
    int fp_ok;         /* its READY carried the run's fingerprint */
    int held;          /* tasks it holds */
    int probing;       /* it holds a suspect (zp_tasks_lose): it gets nothing else meanwhile */
    int fd;            /* the connection its messages came through (ZMQ_SRCFD); -1: unknown */
} loader_rec_t;

typedef struct {
    zp_stage_t *st;
    void *work, *fetch;
    void *remote;   /* transport.kind tcp: CURVE ROUTER on transport.bind; NULL for ipc */
    void *monitor;  /* the work socket's disconnections (zmq_socket_monitor); NULL: none */
    loader_rec_t loaders[LOADERS_MAX];
    int nloaders, next_loader;
    zp_tasks_t *tasks; /* every task from its FETCH until its result is forwarded; owned */
    int64_t dropped, late, deaths, requeued, refusals;
    int64_t refused_fetches; /* FETCHes past ZP_TASKS_MAX (zp_warn_limited's count) */
    uint64_t fp; /* zp_cachedb_fingerprint_hash of the run: a loader's READY must carry it */
    int64_t next_beat; /* ns: when the broker sends its next heartbeats */
    int64_t last_loop; /* ns: the previous pass of the loop */
    zp_frames_t f;
    zp_inbox_t work_in, fetch_in; /* loaders' messages (work and remote), prefetchers' */
    void *in_sock;                /* the socket work_in's message came through */
    zp_store_t *store; /* NULL: a pure broker */
    int32_t *hit_labels; /* one task's samples read from the store; owned, task_size */
    uint8_t *hit_data;   /* owned, task_size x sample_bytes */
    int64_t served;      /* samples answered from the store */
    uint8_t *nothing;    /* a skipped sample's bytes (zeros): settle(); owned */
} cache_t;

static void peer_set(peer_t *p, zmq_msg_t *m)
{
    p->idlen = zmq_msg_size(m) < ZP_PEER_MAX ? zmq_msg_size(m) : ZP_PEER_MAX;
    memcpy(p->id, zmq_msg_data(m), p->idlen);
}

static int send_to(void *sock, const peer_t *p, const zp_msg_t *m, const void *const *parts,
                   const size_t *sizes, int nparts)
{
    if (zmq_send(sock, p->id, p->idlen, ZMQ_SNDMORE) < 0)
        return ZP_EZMQ;
    return zp_sock_send(sock, NULL, m, parts, sizes, nparts, 0);
}

/* Answers samples [off, off + n) of a fetch from the store when it holds
 * them all: 1 when it did. A prefetch reads hits from the LMDB itself and
 * asks for what it did not find, which is seldom here (one whose reader
 * failed to open asks for everything). */
static int serve_from_store(cache_t *c, zmq_msg_t *who, const zp_msg_t *m, uint64_t off, uint64_t n,
                            int *rc)
{
    const uint8_t *idx = (const uint8_t *)m->frame[1] + 4 * off;
    if (!zp_store_get(c->store, (int)m->split, n, idx, c->hit_labels, c->hit_data))
        return 0;
    size_t bytes = n * c->st->meta.sample_bytes;
    zp_msg_t out = {.type = ZP_MSG_RESULT, .id = m->id, .split = m->split, .n = n,
                    .elems = (uint64_t)c->st->meta.elems, .offset = off,
                    .dtype = (uint64_t)c->st->meta.dtype, .present = ZP_B(dtype)};
    const void *parts[3] = {idx, c->hit_labels, c->hit_data};
    size_t sizes[3] = {n * 4, n * 4, bytes};
    *rc = zmq_send(c->fetch, zmq_msg_data(who), zmq_msg_size(who), ZMQ_SNDMORE) < 0
              ? ZP_EZMQ : zp_sock_send(c->fetch, NULL, &out, parts, sizes, 3, 0);
    c->served += (int64_t)n;
    c->st->stats.items += (int64_t)n;
    c->st->stats.bytes += (int64_t)bytes;
    return 1;
}

/* A FETCH beyond ZP_TASKS_MAX tasks in flight (no prefetch's bounded window
 * gets there; a misbehaving local peer may): answered FAIL, counted and
 * logged, and the broker goes on. */
static int refuse_fetch(cache_t *c, zmq_msg_t *who, const zp_msg_t *m)
{
    c->st->stats.errors++;
    zp_warn_limited(&c->refused_fetches, "a FETCH of %llu samples refused: %d tasks are in flight "
                    "already (ZP_TASKS_MAX): a peer asks for more than any prefetch does",
                    (unsigned long long)m->n, (int)ZP_TASKS_MAX);
    zp_msg_t fail = {.type = ZP_MSG_FAIL, .id = m->id};
    snprintf(fail.error, sizeof fail.error, "refused: %d tasks in flight already",
             (int)ZP_TASKS_MAX);
    if (zmq_send(c->fetch, zmq_msg_data(who), zmq_msg_size(who), ZMQ_SNDMORE) < 0)
        return ZP_EZMQ;
    return zp_sock_send(c->fetch, NULL, &fail, NULL, NULL, 0, 0);
}

/* Splits a FETCH into tasks: those the store holds whole are answered now,
 * the others queued for loaders. */
static int on_fetch(cache_t *c, zmq_msg_t *who, const zp_msg_t *m)
{
    const uint8_t *idx = m->frame[1]; /* u32 LE array; may be unaligned */
    uint64_t step = (uint64_t)c->st->cfg.task_size;
    for (uint64_t off = 0; off < m->n; off += step) {
        int rc = 0;
        uint64_t n = m->n - off < step ? m->n - off : step;
        if (serve_from_store(c, who, m, off, n, &rc)) {
            if (rc)
                return rc;
            continue;
        }
        zp_task_t *t;
        if ((rc = zp_tasks_add(c->tasks, idx + 4 * off, n, &t)) == ZP_EFULL)
            return refuse_fetch(c, who, m); /* a peer past any prefetch's window */
        if (rc)
            return rc;
        peer_set(&t->prefetch, who);
        t->fetch_id = m->id;
        t->split = m->split;
        t->epoch = m->epoch;
        t->has_epoch = m->present & ZP_B(epoch);
        t->offset = off;
    }
    return 0;
}

static int alive_count(const cache_t *c)
{
    int n = 0;
    for (int i = 0; i < c->nloaders; i++)
        n += c->loaders[i].alive;
    return n;
}

/* The record of the loader `who`, marked as heard from now, its connection
 * `fd` noted (-1: unknown); with `add`, a new one (in the place of a dead one
 * when the table is full). */
static loader_rec_t *loader_find(cache_t *c, void *sock, zmq_msg_t *who, int fd, int add)
{
    loader_rec_t *l = NULL;
    if (zmq_msg_size(who) > ZP_PEER_MAX)
        return NULL; /* a routing id we could not answer: the peer gets nothing */
    for (int i = 0; i < c->nloaders && !l; i++)
        if (c->loaders[i].sock == sock && c->loaders[i].peer.idlen == zmq_msg_size(who) &&
            !memcmp(c->loaders[i].peer.id, zmq_msg_data(who), zmq_msg_size(who)))
            l = &c->loaders[i];
    if (!l && add) {
        for (int i = 0; i < c->nloaders && !l; i++)
            if (!c->loaders[i].alive)
                l = &c->loaders[i];
        if (!l && c->nloaders < LOADERS_MAX)
            l = &c->loaders[c->nloaders++];
        if (!l)
            return NULL;
        memset(l, 0, sizeof *l);
        peer_set(&l->peer, who);
        l->sock = sock;
        l->fd = -1;
    }
    if (!l)
        return NULL;
    if (!l->alive) { /* new, or stopped and back: its credit stands (it still holds its tasks) */
        l->alive = 1;
        zp_info("loader %d connected%s (%d alive)", (int)(l - c->loaders),
                sock == c->remote ? " over tcp" : "", alive_count(c));
    }
    l->last_seen = zp_now_ns();
    if (fd >= 0)
        l->fd = fd;
    return l;
}

/* A loader whose samples cannot be used: its tasks go back to the queue now,
 * it gets no more, and it is told why (it logs the reason and exits 2). */
static int refuse(cache_t *c, loader_rec_t *l, const char *why)
{
    int i = (int)(l - c->loaders);
    int64_t n = zp_tasks_requeue(c->tasks, i);
    l->refused = 1;
    l->credit = 0;
    l->held = l->probing = 0;
    c->refusals++;
    c->requeued += n;
    c->st->stats.errors++;
    zp_warn("loader %d refused, %lld task(s) re-queued: %s", i, (long long)n, why);
    zp_event_t ev;
    zp_event_record(c->st, &ev, ZP_REC_LOADER_REFUSED);
    zp_event_int(&ev, ZP_KEY(LOADER_REFUSED, loader), i);
    zp_event_int(&ev, ZP_KEY(LOADER_REFUSED, requeued), n);
    zp_event_str(&ev, ZP_KEY(LOADER_REFUSED, error), why);
    zp_event_send(c->st, &ev);
    zp_msg_t m = {.type = ZP_MSG_REFUSED};
    snprintf(m.error, sizeof m.error, "%.255s", why);
    return send_to(l->sock, &l->peer, &m, NULL, NULL, 0);
}

/* The sample that killed or hung every loader that held it alone (the
 * culprit of zp_tasks_lose): loader.on_error skip leaves it out of its batch
 * (a RESULT of one skipped sample) and lists it; error stops the run naming
 * it (a FAIL of its fetch). The task is done either way. */
static int settle(cache_t *c, zp_task_t *t)
{
    uint32_t index = t->indices[0];
    char why[256];
    snprintf(why, sizeof why, "%s sample %u %s each loader that held it alone (%d of them): %s",
             zp_dataset_split_name((int)t->split), index, t->hung ? "hung" : "killed", t->losses,
             t->hung ? "no heartbeat for loader.heartbeat_ms x liveness: a __getitem__ or decode "
                       "that never returns?"
                     : "its process died: a crash in __getitem__ or the decoder?");
    int skip = c->st->cfg.on_error == ZP_ON_ERROR_SKIP, rc;
    zp_warn("%s; %s", why, skip ? "skipped (loader.on_error: skip)" : "the run stops "
            "(loader.on_error: error; skip leaves such a sample out)");
    size_t bytes = c->st->meta.sample_bytes;
    if ((skip && !c->nothing && !(c->nothing = calloc(1, bytes ? bytes : 1))) ||
        zmq_send(c->fetch, t->prefetch.id, t->prefetch.idlen, ZMQ_SNDMORE) < 0) {
        zp_tasks_done(c->tasks, t);
        return skip && !c->nothing ? ZP_ENOMEM : ZP_EZMQ;
    }
    if (skip) {
        int32_t label = ZP_LABEL_SKIPPED;
        zp_msg_t out = {.type = ZP_MSG_RESULT, .id = t->fetch_id, .split = t->split, .n = 1,
                        .elems = (uint64_t)c->st->meta.elems, .offset = t->offset,
                        .dtype = (uint64_t)c->st->meta.dtype, .present = ZP_B(dtype)};
        const void *parts[3] = {&index, &label, c->nothing};
        size_t sizes[3] = {4, 4, bytes};
        rc = zp_sock_send(c->fetch, NULL, &out, parts, sizes, 3, 0);
        zp_event_t ev;
        zp_event_record(c->st, &ev, ZP_REC_SAMPLE_SKIPPED);
        zp_event_str(&ev, ZP_KEY(SAMPLE_SKIPPED, split), zp_dataset_split_name((int)t->split));
        zp_event_int(&ev, ZP_KEY(SAMPLE_SKIPPED, index), index);
        zp_event_str(&ev, ZP_KEY(SAMPLE_SKIPPED, error), why);
        zp_event_send(c->st, &ev);
    } else {
        zp_msg_t fail = {.type = ZP_MSG_FAIL, .id = t->fetch_id};
        snprintf(fail.error, sizeof fail.error, "%.255s", why);
        rc = zp_sock_send(c->fetch, NULL, &fail, NULL, NULL, 0, 0);
    }
    zp_tasks_done(c->tasks, t);
    return rc;
}

/* Loader i is gone (`why`; `hung`: silent, else dead): its tasks go first,
 * split into one task a sample, and a sample that loses every loader that
 * holds it alone is settled (settle). */
static void lose_loader(cache_t *c, int i, int hung, const char *why)
{
    loader_rec_t *l = &c->loaders[i];
    l->alive = 0;
    zp_task_t *culprit;
    int64_t n = zp_tasks_lose(c->tasks, i, hung, &culprit);
    l->held = l->probing = 0;
    if (culprit && settle(c, culprit))
        zp_warn("could not tell the prefetch of the culprit sample (the run's fetch timeout will)");
    if ((l->retiring || l->refused) && !n && !culprit)
        return; /* it finished and left */
    c->deaths++;
    c->requeued += n;
    zp_warn("loader %d %s: declared dead, %lld task(s) re-queued (%d alive)", i, why, (long long)n,
            alive_count(c));
    zp_event_t ev;
    zp_event_record(c->st, &ev, ZP_REC_LOADER_LOST);
    zp_event_int(&ev, ZP_KEY(LOADER_LOST, loader), i);
    zp_event_int(&ev, ZP_KEY(LOADER_LOST, requeued), n);
    zp_event_int(&ev, ZP_KEY(LOADER_LOST, alive), alive_count(c));
    zp_event_send(c->st, &ev);
}

/* A loader silent for heartbeat_ms x liveness: dead; its tasks go first. */
static void expire_loaders(cache_t *c, int64_t now)
{
    int64_t limit = c->st->cfg.heartbeat_ms * c->st->cfg.liveness * 1000000;
    for (int i = 0; i < c->nloaders; i++) {
        loader_rec_t *l = &c->loaders[i];
        /* a loader's first task may import torch or open a file first: it gets
         * ZP_FIRST_TASK_GRACE times as long (its watchdog grants the same) */
        int64_t mine = l->held && !l->tasks_done ? limit * ZP_FIRST_TASK_GRACE : limit;
        if (!l->alive || now - l->last_seen <= mine)
            continue;
        char why[64];
        snprintf(why, sizeof why, "silent for %lld ms", (long long)((now - l->last_seen) / 1000000));
        lose_loader(c, i, 1, why);
    }
}

/* The work socket's monitor said a connection closed: a loader whose process
 * died (SIGKILL, the OOM killer) is lost now, its tasks re-queued at once,
 * not after heartbeat_ms x liveness of silence. A hung loader keeps its
 * connection open: the heartbeats still tell. */
static void on_disconnect(cache_t *c)
{
    zmq_msg_t ev, addr;
    zmq_msg_init(&ev), zmq_msg_init(&addr);
    int got = zmq_msg_recv(&ev, c->monitor, ZMQ_DONTWAIT) >= 0 && zmq_msg_more(&ev) &&
              zmq_msg_recv(&addr, c->monitor, ZMQ_DONTWAIT) >= 0 && zmq_msg_size(&ev) >= 6;
    if (got) {
        uint16_t what;
        uint32_t fd;
        memcpy(&what, zmq_msg_data(&ev), 2);
        memcpy(&fd, (uint8_t *)zmq_msg_data(&ev) + 2, 4);
        for (int i = 0; what == ZMQ_EVENT_DISCONNECTED && i < c->nloaders; i++)
            if (c->loaders[i].alive && c->loaders[i].sock == c->work && c->loaders[i].fd == (int)fd)
                lose_loader(c, i, 0, "closed its connection");
    }
    zmq_msg_close(&ev), zmq_msg_close(&addr);
}

/* Heartbeats to every live loader, every heartbeat_ms. */
static int heartbeats(cache_t *c, int64_t now)
{
    if (now < c->next_beat)
        return 0;
    c->next_beat = now + c->st->cfg.heartbeat_ms * 1000000;
    zp_msg_t hb = {.type = ZP_MSG_HEARTBEAT};
    for (int i = 0; i < c->nloaders; i++)
        if (c->loaders[i].alive && send_to(c->loaders[i].sock, &c->loaders[i].peer, &hb, NULL, NULL, 0))
            return ZP_EZMQ;
    return 0;
}

/* Hands queued tasks to loaders with credit, round robin. */
static int dispatch(cache_t *c)
{
    zp_task_t *t;
    while ((t = zp_tasks_peek(c->tasks))) {
        int pick = -1;
        for (int k = 0; k < c->nloaders; k++) {
            int i = (c->next_loader + k) % c->nloaders;
            const loader_rec_t *l = &c->loaders[i];
            /* a suspect only to a loader holding nothing: what kills it is then known */
            if (l->alive && !l->retiring && !l->refused && l->credit > 0 && !l->probing &&
                (!t->suspect || !l->held)) {
                pick = i;
                break;
            }
        }
        if (pick < 0)
            return 0;
        c->next_loader = (pick + 1) % c->nloaders;
        zp_tasks_next(c->tasks);
        zp_msg_t m = {.type = ZP_MSG_TASK, .id = t->id, .split = t->split, .n = t->n,
                      .epoch = t->epoch, .present = t->has_epoch ? ZP_B(epoch) : 0};
        const void *parts[1] = {t->indices};
        size_t sizes[1] = {t->n * 4};
        int rc = send_to(c->loaders[pick].sock, &c->loaders[pick].peer, &m, parts, sizes, 1);
        if (rc)
            return rc;
        c->loaders[pick].credit--;
        c->loaders[pick].held++;
        c->loaders[pick].probing = t->suspect;
        t->loader = pick;
    }
    return 0;
}

/* SAMPLES or FAIL from a loader: forward to the prefetch that asked. */
static int on_result(cache_t *c, const zp_msg_t *m, zp_frames_t *f, loader_rec_t *from)
{
    zp_task_t *t = zp_tasks_lookup(c->tasks, m->id);
    if (!t || t->loader < 0 || !from || t->loader != (int)(from - c->loaders)) {
        c->late++; /* done already, waiting to be sent again, or now someone else's */
        return 0;
    }
    int other = m->type == ZP_MSG_SAMPLES && (m->elems != (uint64_t)c->st->meta.elems ||
                                              m->dtype != (uint64_t)c->st->meta.dtype);
    if (m->type == ZP_MSG_SAMPLES && (other || m->n != t->n || m->split != t->split ||
                                      memcmp(m->frame[1], t->indices, t->n * 4))) {
        char why[200];
        if (other)
            snprintf(why, sizeof why, "samples of %llu %s values, this run's are %lld %s (another "
                     "dataset, transform or dataset.dtype in the loader's config?)",
                     (unsigned long long)m->elems, m->dtype == ZP_DTYPE_U8 ? "uint8" : "float32",
                     (long long)c->st->meta.elems,
                     c->st->meta.dtype == ZP_DTYPE_U8 ? "uint8" : "float32");
        else
            snprintf(why, sizeof why, "samples that do not match task %llu (other indices, split "
                     "or count)", (unsigned long long)m->id);
        return refuse(c, from, why); /* the task goes back to the queue with its others */
    }
    c->loaders[t->loader].tasks_done++;
    c->loaders[t->loader].held--;
    c->loaders[t->loader].probing = 0;
    if (m->type == ZP_MSG_SAMPLES)
        zp_store_put(c->store, (int)m->split, m->n, m->frame[1], m->frame[2], m->frame[3]);
    zp_msg_t out = *m;
    out.type = m->type == ZP_MSG_SAMPLES ? ZP_MSG_RESULT : ZP_MSG_FAIL;
    out.id = t->fetch_id;
    out.offset = t->offset;
    out.present |= m->type == ZP_MSG_SAMPLES ? ZP_B(dtype) : 0;
    if (m->type == ZP_MSG_SAMPLES) {
        c->st->stats.items += (int64_t)m->n;
        c->st->stats.bytes += (int64_t)m->frame_size[3];
    }
    /* Forward the payload frames as they came: ownership moves, bytes are not copied. */
    int rc = zmq_send(c->fetch, t->prefetch.id, t->prefetch.idlen, ZMQ_SNDMORE) < 0 ? ZP_EZMQ : 0;
    ZP_TIME_BEGIN(&c->st->timers, ZP_R_SEND);
    if (!rc)
        rc = zp_sock_send_parts(c->fetch, &out, f->part + 2, m->nframes - 1);
    ZP_TIME_END(&c->st->timers, ZP_R_SEND);
    zp_tasks_done(c->tasks, t);
    return rc;
}

/* The first READY of a loader: its fingerprint must be the run's, or it is
 * refused before any task reaches it. Then its credit counts. */
static int check_fingerprint(cache_t *c, loader_rec_t *l, const zp_msg_t *m)
{
    if (!(m->present & ZP_B(fp)) || m->fp != c->fp) {
        char why[256];
        if (!(m->present & ZP_B(fp)))
            snprintf(why, sizeof why, "its READY carries no dataset fingerprint (a loader of "
                     "another zeus-pipe version?)");
        else
            snprintf(why, sizeof why, "its dataset and transform fingerprint %016llx is not this "
                     "run's %016llx: another dataset (path, size, version), labels, shape, "
                     "dataset.mean/std, dtype or augmentation in its config",
                     (unsigned long long)m->fp, (unsigned long long)c->fp);
        return refuse(c, l, why);
    }
    l->fp_ok = 1;
    l->credit = zp_credit_add(0, m->credit, 64);
    return 0;
}

/* ---- the loaders' socket(s) ---- */

/* The record of the loader that sent the message in f (through c->in_sock);
 * with `add`, a new one for a loader not known yet. NULL: none. */
static loader_rec_t *sender(cache_t *c, zp_frames_t *f, int add)
{
    /* the connection a frame from the wire came through (not the routing id's,
     * which the ROUTER makes): closed when the loader's process dies */
    int fd = f->n > 1 ? zmq_msg_get(&f->part[1], ZMQ_SRCFD) : -1;
    return loader_find(c, c->in_sock, &f->part[0], fd, add);
}

static int on_ready(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    cache_t *c = ctx;
    loader_rec_t *l = sender(c, f, 1);
    if (!l) {
        zp_inbox_drop(&c->work_in, "READY of a loader the table has no room for");
        return 0;
    }
    if (l->refused)
        return 0; /* nothing it sends is used; it was told why */
    if (!l->fp_ok)
        return check_fingerprint(c, l, m);
    if (!l->retiring) /* a retiring loader gets no more tasks */
        l->credit = zp_credit_add(l->credit, m->credit, 64);
    return 0;
}

static int on_loader_result(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    cache_t *c = ctx;
    loader_rec_t *l = sender(c, f, 0);
    return l && l->refused ? 0 : on_result(c, m, f, l);
}

/* VALUES: the cache values of a task this loader holds, kept for later
 * epochs: whole images (the crop at assembly), or the records __getitem__
 * returned before a Python augment step. */
static int on_values(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    cache_t *c = ctx;
    loader_rec_t *l = sender(c, f, 0);
    zp_task_t *t = zp_tasks_lookup(c->tasks, m->id);
    if (!l || l->refused || !t || t->loader != (int)(l - c->loaders) || m->split != t->split) {
        c->late++;
        return 0;
    }
    if (zp_store_put_values(c->store, (int)m->split, m->n, m->frame[1], m->frame_size[1]))
        zp_inbox_drop(&c->work_in, "VALUES with a malformed value");
    return 0;
}

static int on_retire(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    (void)m;
    cache_t *c = ctx;
    loader_rec_t *l = sender(c, f, 0);
    if (!l) {
        zp_inbox_drop(&c->work_in, "RETIRE of an unknown loader");
        return 0;
    }
    if (l->refused)
        return 0;
    l->credit = 0; /* no more tasks; those already sent precede the answer */
    l->retiring = 1;
    zp_msg_t rep = {.type = ZP_MSG_RETIRED};
    zp_info("loader %d retires", (int)(l - c->loaders));
    return send_to(l->sock, &l->peer, &rep, NULL, NULL, 0);
}

static int on_heartbeat(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    (void)m;
    sender(ctx, f, 0); /* heard from now */
    return 0;
}

static const zp_route_t WORK_ROUTES[] = {
    {ZP_MSG_READY, on_ready},       {ZP_MSG_SAMPLES, on_loader_result},
    {ZP_MSG_FAIL, on_loader_result}, {ZP_MSG_RETIRE, on_retire},
    {ZP_MSG_HEARTBEAT, on_heartbeat}, {ZP_MSG_VALUES, on_values},
};

static int on_work(cache_t *c, void *sock)
{
    c->in_sock = sock;
    return zp_inbox_recv(&c->work_in, sock, ZMQ_DONTWAIT, &c->f, c);
}

/* ---- the prefetchers' socket ---- */

static int on_fetch_msg(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    return on_fetch(ctx, &f->part[0], m);
}

static int on_sync(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    cache_t *c = ctx;
    zp_store_commit(c->store);
    zp_msg_t rep = {.type = ZP_MSG_SYNCED, .id = m->id};
    peer_t who;
    peer_set(&who, &f->part[0]);
    return send_to(c->fetch, &who, &rep, NULL, NULL, 0);
}

static const zp_route_t FETCH_ROUTES[] = {{ZP_MSG_FETCH, on_fetch_msg}, {ZP_MSG_SYNC, on_sync}};

static int loop(cache_t *c)
{
    int rc = 0;
    while (!rc && !zp_stop) {
        zp_stage_stats_state(&c->st->stats, ZP_ST_WAIT_IN);
        zmq_pollitem_t items[4] = {{c->work, 0, ZMQ_POLLIN, 0}, {c->fetch, 0, ZMQ_POLLIN, 0},
                                   {c->monitor, 0, c->monitor ? ZMQ_POLLIN : 0, 0},
                                   {c->remote, 0, ZMQ_POLLIN, 0}};
        int timeout = zp_store_tick(c->store);
        if (timeout > c->st->cfg.heartbeat_ms)
            timeout = (int)c->st->cfg.heartbeat_ms;
        int n = zmq_poll(items, c->remote ? 4 : 3, timeout);
        zp_stage_stats_state(&c->st->stats, ZP_ST_BUSY);
        if (n > 0 && (items[0].revents & ZMQ_POLLIN))
            rc = on_work(c, c->work);
        if (!rc && n > 0 && c->remote && (items[3].revents & ZMQ_POLLIN))
            rc = on_work(c, c->remote);
        if (!rc && n > 0 && (items[2].revents & ZMQ_POLLIN))
            on_disconnect(c); /* after the work socket: a loader's last results come first */
        if (!rc && n > 0 && (items[1].revents & ZMQ_POLLIN))
            rc = zp_inbox_recv(&c->fetch_in, c->fetch, ZMQ_DONTWAIT, &c->f, c);
        int64_t now = zp_now_ns();
        if (c->last_loop && now - c->last_loop > c->st->cfg.heartbeat_ms * 1000000)
            for (int i = 0; i < c->nloaders; i++) /* our own stall is not their silence */
                c->loaders[i].last_seen += now - c->last_loop;
        c->last_loop = now;
        expire_loaders(c, now);
        if (!rc)
            rc = heartbeats(c, now);
        if (!rc)
            rc = dispatch(c);
        c->st->stats.queue = (int64_t)zp_tasks_queued(c->tasks);
        zp_stage_stats_tick(c->st);
    }
    return rc == ZP_ESTOP ? 0 : rc;
}

/* The work socket's disconnections, for on_disconnect; without them (an
 * error, logged) a dead loader is found by its silence alone. */
static void open_monitor(cache_t *c)
{
    static const char ep[] = "inproc://zp-cache-work-monitor";
    int linger = 0;
    if (zmq_socket_monitor(c->work, ep, ZMQ_EVENT_DISCONNECTED) ||
        !(c->monitor = zmq_socket(c->st->zctx, ZMQ_PAIR)) ||
        zmq_setsockopt(c->monitor, ZMQ_LINGER, &linger, sizeof linger) || zmq_connect(c->monitor, ep)) {
        zp_warn("no monitor of the loaders' connections (%s): a dead loader is noticed by its "
                "silence only", zmq_strerror(errno));
        zp_sock_destroy(&c->monitor);
    }
}

/* Stops the monitor and reads what it still holds (an unread event is memory
 * libzmq never frees), before the work socket closes. An event sent as the
 * monitor stopped (loaders dying with the run) may still be on its way: the
 * reading goes on until none has come for 10 ms, 100 ms at most. */
static void close_monitor(cache_t *c)
{
    if (!c->monitor)
        return;
    zmq_socket_monitor(c->work, NULL, 0);
    zmq_msg_t m;
    zmq_msg_init(&m);
    zmq_pollitem_t it = {c->monitor, 0, ZMQ_POLLIN, 0};
    for (int waits = 0; waits < 10 && zmq_poll(&it, 1, 10) > 0; waits++)
        for (int i = 0; i < 1000 && zmq_msg_recv(&m, c->monitor, ZMQ_DONTWAIT) >= 0; i++)
            ;
    zmq_msg_close(&m);
    zp_sock_destroy(&c->monitor);
}

/* transport.kind tcp: a CURVE server socket on transport.bind with the run's
 * key pair (RUN/server.key), in the loaders' ZAP domain (zap.h). */
static int open_remote(cache_t *c)
{
    char ep[160];
    int linger = 0;
    c->remote = zmq_socket(c->st->zctx, ZMQ_ROUTER);
    snprintf(ep, sizeof ep, "tcp://%s", c->st->cfg.bind);
    if (!c->remote) {
        zp_error("tcp %s: %s", ep, zmq_strerror(errno));
        return ZP_EZMQ;
    }
    zp_sock_limit(c->remote);
    int rc = zp_zap_serve(c->st, c->remote, ZP_ZAP_LOADERS);
    if (rc)
        return rc;
    if (zmq_setsockopt(c->remote, ZMQ_LINGER, &linger, sizeof linger) || zmq_bind(c->remote, ep)) {
        zp_error("tcp %s: %s", ep, zmq_strerror(errno));
        return ZP_EZMQ;
    }
    zp_info("tcp: remote loaders connect to %s", ep);
    return 0;
}

int zp_cache_main(zp_stage_t *st)
{
    static cache_t c;
    c.st = st;
    zp_frames_init(&c.f);
    c.work_in = ZP_STAGE_INBOX(st, WORK_ROUTES, 1, "a loader", &c.dropped);
    c.fetch_in = ZP_STAGE_INBOX(st, FETCH_ROUTES, 1, "a prefetch", &c.dropped);
    char ep[ZP_ENDPOINT_MAX + 16];
    int rc = 1;
    if (zp_stage_endpoint(st, zp_names_sock(ZP_SOCK_WORK), ep, sizeof ep) ||
        zp_sock_create(&c.work, st->zctx, ZMQ_ROUTER, ep, 1, 0))
        goto out;
    if (zp_stage_socket(st, &c.fetch, ZMQ_ROUTER, zp_names_sock(ZP_SOCK_FETCH), 1, 0))
        goto out;
    open_monitor(&c);
    /* under Slurm rank 0's cache stage alone takes other hosts' loaders */
    if (st->cfg.transport == ZP_TRANSPORT_TCP && st->slurm.rank == 0 && open_remote(&c))
        goto out;
    if (zp_tasks_create(&c.tasks))
        goto out;
    if (st->cfg.cache_enabled && zp_store_create(&c.store, st))
        goto out;
    if (c.store && (!(c.hit_labels = malloc((size_t)st->cfg.task_size * 4)) ||
                    !(c.hit_data = malloc((size_t)st->cfg.task_size * st->meta.sample_bytes))))
        goto out;
    c.fp = zp_cachedb_fingerprint_hash(&st->cfg, &st->meta);
    zp_info("broker ready%s; loaders must offer fingerprint %016llx",
            c.store ? "" : " (no cache: every sample goes to a loader)", (unsigned long long)c.fp);
    rc = loop(&c);
    if (rc)
        zp_error("stopped: %s", zp_strerror(rc));
    if (c.served)
        zp_info("%lld sample(s) answered from the cache", (long long)c.served);
    rc = rc ? 1 : 0;
out:
    zp_store_destroy(&c.store); /* commits what is pending, also on SIGTERM */
    zp_frames_free(&c.f);
    close_monitor(&c);
    zp_sock_destroy(&c.work);
    zp_sock_destroy(&c.fetch);
    zp_sock_destroy(&c.remote);
    free(c.hit_labels);
    free(c.hit_data);
    free(c.nothing);
    zp_tasks_destroy(&c.tasks);
    return rc;
}

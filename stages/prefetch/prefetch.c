/* prefetch.c — owns the sampler, fetches each batch's samples through the
 * cache stage straight into a ring slot, and hands full slots to the trainer
 * in the sampler's order (READY as a BATCH message; the trainer answers FREE).
 * Phases: for every epoch, the train split, then the test split. */
#define _GNU_SOURCE
#include "pipeline/log.h"
#include "pipeline/ring.h"
#include "pipeline/sampler.h"
#include "pipeline/sock.h"
#include "pipeline/stage.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t batch;     /* batch number in the phase, -1 when the slot is free */
    uint32_t gen;
    uint64_t fetch_id;
    int64_t n, filled;
    uint8_t *have;     /* per sample: arrived; owned, batch_size bytes */
} slot_info_t;

typedef struct {
    zp_stage_t *st;
    zp_ring_t *ring;
    zp_batch_layout_t lay;
    void *fetch, *ring_sock;
    zp_sampler_t sampler[ZP_SPLITS];
    slot_info_t slot[ZP_RING_MAX];
    uint64_t fetch_seq;
    int split;
    int64_t epoch, nbatches, next_fetch, next_emit;
    int64_t bad_msgs;
    zp_frames_t f;
} prefetch_t;

static void bad_msg(prefetch_t *p, const char *from, const char *why)
{
    p->st->stats.errors++;
    if (p->bad_msgs++ < 10 || p->bad_msgs % 1000 == 0)
        zp_warn("dropped a malformed message from the %s (%lld so far): %s", from,
                (long long)p->bad_msgs, why);
}

/* Starts fetching the next batches into every free slot. */
static int fill_slots(prefetch_t *p)
{
    zp_sampler_t *s = &p->sampler[p->split];
    int64_t bs = p->st->cfg.batch_size;
    uint32_t slot, gen;
    while (p->next_fetch < p->nbatches && zp_ring_acquire(p->ring, &slot, &gen) == 0) {
        int64_t n;
        const uint32_t *idx = zp_sampler_batch(s, bs, p->next_fetch, &n);
        uint8_t *base = zp_ring_slot(p->ring, slot);
        memcpy(base + p->lay.indices, idx, (size_t)n * 4);
        slot_info_t *si = &p->slot[slot];
        si->batch = p->next_fetch++;
        si->gen = gen;
        si->fetch_id = ++p->fetch_seq;
        si->n = n;
        si->filled = 0;
        memset(si->have, 0, (size_t)n);
        zp_msg_t m = {.type = ZP_MSG_FETCH, .id = si->fetch_id, .split = (uint64_t)p->split, .n = (uint64_t)n};
        const void *parts[1] = {idx};
        size_t sizes[1] = {(size_t)n * 4};
        int rc = zp_send(p->fetch, NULL, &m, parts, sizes, 1, 0);
        if (rc)
            return rc;
    }
    return 0;
}

static slot_info_t *slot_of_fetch(prefetch_t *p, uint64_t fetch_id, uint32_t *slot)
{
    for (uint32_t i = 0; i < p->ring->depth; i++)
        if (p->slot[i].batch >= 0 && p->slot[i].fetch_id == fetch_id) {
            *slot = i;
            return &p->slot[i];
        }
    return NULL;
}

/* Copies a RESULT into its slot after checking that its indices are the ones asked for. */
static int on_result(prefetch_t *p, const zp_msg_t *m)
{
    uint32_t slot;
    slot_info_t *si = slot_of_fetch(p, m->id, &slot);
    if (!si) {
        bad_msg(p, "cache stage", "result for a fetch that is not in flight");
        return 0;
    }
    uint8_t *base = zp_ring_slot(p->ring, slot);
    const uint32_t *want = (const uint32_t *)(base + p->lay.indices) + m->offset;
    if (m->offset + m->n > (uint64_t)si->n || m->elems != (uint64_t)p->st->meta.elems ||
        memcmp(want, m->frame[1], m->n * 4)) {
        bad_msg(p, "cache stage", "result does not match its fetch (offset, indices or shape)");
        return 0;
    }
    const uint8_t *labels = m->frame[2], *data = m->frame[3]; /* frames may be unaligned */
    int32_t *dst_l = (int32_t *)(base + p->lay.labels);
    float *dst_d = (float *)(base + p->lay.data);
    size_t elems = (size_t)m->elems;
    for (uint64_t i = 0; i < m->n; i++) {
        uint64_t at = m->offset + i;
        if (si->have[at])
            continue; /* a duplicate; the first copy stands */
        si->have[at] = 1;
        si->filled++;
        memcpy(&dst_l[at], labels + 4 * i, 4);
        memcpy(dst_d + at * elems, data + i * elems * 4, elems * 4);
    }
    p->st->stats.bytes += (int64_t)(m->n * elems * 4);
    return 0;
}

static int on_fetch_sock(prefetch_t *p)
{
    int rc = zp_frames_recv(&p->f, p->fetch, ZMQ_DONTWAIT);
    if (rc)
        return rc == -EAGAIN ? 0 : rc;
    zp_msg_t m;
    char why[256];
    rc = 0;
    if (zp_frames_decode(&p->f, 0, &m, why, sizeof why)) {
        bad_msg(p, "cache stage", why);
    } else if (m.type == ZP_MSG_RESULT) {
        rc = on_result(p, &m);
    } else if (m.type == ZP_MSG_FAIL) {
        zp_error("a loader could not load %s batch %lld: %s", zp_split_name(p->split),
                 (long long)p->next_emit, m.error);
        rc = ZP_EDATA;
    } else {
        bad_msg(p, "cache stage", zp_msg_name(m.type));
    }
    zp_msg_release(&m);
    return rc;
}

static int on_ring_sock(prefetch_t *p)
{
    int rc = zp_frames_recv(&p->f, p->ring_sock, ZMQ_DONTWAIT);
    if (rc)
        return rc == -EAGAIN ? 0 : rc;
    zp_msg_t m;
    char why[256];
    if (zp_frames_decode(&p->f, 0, &m, why, sizeof why) || m.type != ZP_MSG_FREE) {
        bad_msg(p, "trainer", m.type ? zp_msg_name(m.type) : why);
    } else if (m.slot >= p->ring->depth ||
               zp_ring_release(p->ring, (uint32_t)m.slot, (uint32_t)m.gen)) {
        bad_msg(p, "trainer", "FREE of a slot it does not hold (stale generation)");
    } else {
        p->slot[m.slot].batch = -1;
    }
    zp_msg_release(&m);
    return 0;
}

/* Sends the next batch when its slot is complete. Returns 1 when one was sent. */
static int emit_ready(prefetch_t *p, int *rc)
{
    for (uint32_t i = 0; i < p->ring->depth; i++) {
        slot_info_t *si = &p->slot[i];
        if (si->batch != p->next_emit || p->ring->state[i] != ZP_SLOT_FILLING || si->filled < si->n)
            continue;
        zp_msg_t m = {.type = ZP_MSG_BATCH, .slot = i, .gen = si->gen, .split = (uint64_t)p->split,
                      .epoch = (uint64_t)p->epoch, .index = (uint64_t)si->batch,
                      .batches = (uint64_t)p->nbatches, .n = (uint64_t)si->n,
                      .elems = (uint64_t)p->st->meta.elems};
        *rc = zp_send(p->ring_sock, NULL, &m, NULL, NULL, 0, 0);
        zp_ring_publish(p->ring, i);
        p->next_emit++;
        p->st->stats.items += si->n;
        return 1;
    }
    return 0;
}

static int run_phase(prefetch_t *p)
{
    const zp_config_t *c = &p->st->cfg;
    zp_sampler_t *s = &p->sampler[p->split];
    int train = p->split == ZP_SPLIT_TRAIN;
    zp_sampler_epoch(s, (uint64_t)c->seed, p->split, p->epoch, train && c->shuffle, 0, 1);
    p->nbatches = zp_sampler_batches(s, c->batch_size, train && c->drop_last);
    int64_t limit = train ? c->limit_train_batches : c->limit_test_batches;
    if (limit && p->nbatches > limit)
        p->nbatches = limit;
    p->next_fetch = p->next_emit = 0;
    int64_t samples = 0;
    for (int64_t b = 0; b < p->nbatches; b++) {
        int64_t n;
        zp_sampler_batch(s, c->batch_size, b, &n);
        samples += n;
    }
    int rc = 0;
    while (!rc && !zp_stop && p->next_emit < p->nbatches) {
        if ((rc = fill_slots(p)))
            break;
        if (emit_ready(p, &rc))
            continue;
        int waiting_out = zp_ring_free_count(p->ring) == 0;
        zp_stats_state(&p->st->stats, waiting_out ? ZP_ST_WAIT_OUT : ZP_ST_WAIT_IN);
        zmq_pollitem_t it[2] = {{p->fetch, 0, ZMQ_POLLIN, 0}, {p->ring_sock, 0, ZMQ_POLLIN, 0}};
        int n = zmq_poll(it, 2, 100);
        zp_stats_state(&p->st->stats, ZP_ST_BUSY);
        if (n > 0 && (it[0].revents & ZMQ_POLLIN))
            rc = on_fetch_sock(p);
        if (!rc && n > 0 && (it[1].revents & ZMQ_POLLIN))
            rc = on_ring_sock(p);
        p->st->stats.queue = p->ring->depth - zp_ring_free_count(p->ring);
        zp_stats_tick(p->st);
    }
    if (rc || zp_stop)
        return rc ? rc : ZP_ESTOP;
    zp_msg_t end = {.type = ZP_MSG_EPOCH_END, .split = (uint64_t)p->split,
                    .epoch = (uint64_t)p->epoch, .batches = (uint64_t)p->nbatches,
                    .n = (uint64_t)samples};
    return zp_send(p->ring_sock, NULL, &end, NULL, NULL, 0, 0);
}

/* Keeps answering FREEs until the trainer holds no slot (it may still read them). */
static void drain(prefetch_t *p)
{
    int64_t until = zp_now_ns() + 2000000000;
    while (!zp_stop && zp_ring_free_count(p->ring) < p->ring->depth && zp_now_ns() < until) {
        zmq_pollitem_t it = {p->ring_sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) > 0)
            on_ring_sock(p);
    }
}

static int run(prefetch_t *p)
{
    const zp_config_t *c = &p->st->cfg;
    for (p->epoch = 0; p->epoch < c->epochs; p->epoch++) {
        for (p->split = 0; p->split < ZP_SPLITS; p->split++) {
            if (p->st->meta.n[p->split] == 0)
                continue;
            int rc = run_phase(p);
            if (rc)
                return rc;
        }
    }
    zp_msg_t end = {.type = ZP_MSG_END};
    int rc = zp_send(p->ring_sock, NULL, &end, NULL, NULL, 0, 0);
    drain(p);
    return rc;
}

static int open_all(prefetch_t *p)
{
    zp_stage_t *st = p->st;
    char name[128], ep[ZP_ENDPOINT_MAX + 16];
    p->lay = zp_batch_layout(st->cfg.batch_size, st->meta.elems);
    zp_ring_name(name, sizeof name, st->run_dir, 0);
    int rc = zp_ring_create(&p->ring, name, (uint32_t)st->cfg.depth, p->lay.bytes);
    if (rc) {
        zp_error("shared memory %s (%u slots of %zu bytes): %s", name, (unsigned)st->cfg.depth,
                 p->lay.bytes, zp_strerror(rc));
        return rc;
    }
    for (int i = 0; i < ZP_RING_MAX; i++) {
        p->slot[i].batch = -1;
        if (i < (int)p->ring->depth && !(p->slot[i].have = malloc((size_t)st->cfg.batch_size)))
            return ZP_ENOMEM;
    }
    for (int s = 0; s < ZP_SPLITS; s++)
        if ((rc = zp_sampler_init(&p->sampler[s], st->meta.n[s])))
            return rc;
    if (zp_stage_endpoint(st, "fetch", ep, sizeof ep) ||
        !(p->fetch = zp_sock_open(st->zctx, ZMQ_DEALER, ep, 0, 0)))
        return ZP_EZMQ;
    if (zp_stage_endpoint(st, "ring-0", ep, sizeof ep) ||
        !(p->ring_sock = zp_sock_open(st->zctx, ZMQ_PAIR, ep, 1, 1000)))
        return ZP_EZMQ;
    return 0;
}

int zp_prefetch_main(zp_stage_t *st)
{
    static prefetch_t p;
    p.st = st;
    zp_frames_init(&p.f);
    int rc = open_all(&p);
    if (!rc) {
        zp_info("ring of %u slots x %zu bytes; %lld train, %lld test samples", p.ring->depth,
                p.ring->slot_bytes, (long long)st->meta.n[0], (long long)st->meta.n[1]);
        rc = run(&p);
    }
    if (rc && rc != ZP_ESTOP)
        zp_error("stopped: %s", zp_strerror(rc));
    zp_frames_close(&p.f);
    zp_sock_close(&p.fetch);
    zp_sock_close(&p.ring_sock);
    zp_ring_destroy(&p.ring);
    for (int s = 0; s < ZP_SPLITS; s++)
        zp_sampler_free(&p.sampler[s]);
    for (int i = 0; i < ZP_RING_MAX; i++)
        free(p.slot[i].have);
    return rc == 0 || rc == ZP_ESTOP ? 0 : 1;
}

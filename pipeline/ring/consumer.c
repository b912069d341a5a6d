/* consumer.c — the trainer side of one rank's ring; see consumer.h. */
#define _GNU_SOURCE
#include "pipeline/ring/consumer.h"
#include "pipeline/base/log.h"
#include "pipeline/base/names.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int zp_consumer_open(zp_consumer_t *c, zp_stage_t *st, int rank, const zp_route_t *routes,
                     int nroutes)
{
    memset(c, 0, sizeof *c);
    c->st = st, c->rank = rank;
    zp_frames_init(&c->f);
    c->inbox = zp_stage_inbox(st, routes, nroutes, 0, "the prefetch stage", &c->dropped);
    char ep[ZP_ENDPOINT_MAX + 16], ring[32];
    int rc = zp_ring_layout(&c->lay, st->cfg.batch_size, st->meta.sample_bytes);
    if (rc) {
        zp_error("prefetch.batch_size %lld x %zu bytes a sample does not fit in memory",
                 (long long)st->cfg.batch_size, st->meta.sample_bytes);
        return rc;
    }
    zp_names_ring_sock(ring, sizeof ring, rank);
    if (zp_stage_endpoint(st, ring, ep, sizeof ep) ||
        zp_sock_create(&c->sock, st->zctx, ZMQ_PAIR, ep, 0, 1000))
        return ZP_EZMQ;
    return 0;
}

void zp_consumer_close(zp_consumer_t *c)
{
    zp_frames_free(&c->f);
    zp_sock_destroy(&c->sock);
    zp_ring_destroy(&c->ring);
}

int zp_consumer_wait(zp_consumer_t *c, void *ctx, int timeout_ms)
{
    zp_stage_stats_state(&c->st->stats, ZP_ST_WAIT_IN);
    zmq_pollitem_t it = {c->sock, 0, ZMQ_POLLIN, 0};
    int n = zmq_poll(&it, 1, timeout_ms);
    zp_stage_stats_tick(c->st);
    if (n <= 0)
        return 0;
    return zp_inbox_recv(&c->inbox, c->sock, ZMQ_DONTWAIT, &c->f, ctx);
}

int zp_consumer_map(zp_consumer_t *c, uint64_t nonce)
{
    char name[128];
    zp_ring_name(name, sizeof name, c->st->run_dir, c->rank);
    zp_ring_destroy(&c->ring);
    int rc;
    int64_t give_up = zp_now_ns() + 30000000000ll;
    while ((rc = zp_ring_map(&c->ring, name, nonce)) == -ENOENT || rc == ZP_EPROTO ||
           rc == ZP_ESTALE) {
        if (zp_stop)
            return ZP_ESTOP;
        if (zp_now_ns() > give_up)
            break;
        usleep(20000); /* the prefetch stage creates it */
    }
    if (rc) {
        zp_error("shared memory %s: %s%s", name, zp_strerror(rc),
                 rc == ZP_ESTALE ? " (a previous run's ring, not replaced by this run's prefetch "
                                   "within 30 s)" : "");
        return rc;
    }
    if (c->lay.bytes > c->ring->slot_bytes) {
        zp_error("shared memory %s: slots of %zu bytes, a batch needs %zu", name,
                 c->ring->slot_bytes, c->lay.bytes);
        return ZP_EPROTO;
    }
    return 0;
}

/* The ring a BATCH names: a mapping of another nonce is a dead run's ring,
 * never read; this run's is mapped instead, unless the mapping is pinned. */
static int ring_for(zp_consumer_t *c, uint64_t nonce)
{
    if (c->ring && c->ring->nonce == nonce)
        return 0;
    c->st->stats.errors++;
    zp_warn("a BATCH of ring nonce %016llx, but the mapped ring's is %016llx (a previous run's): "
            "mapping this run's", (unsigned long long)nonce,
            (unsigned long long)(c->ring ? c->ring->nonce : 0));
    if (c->pinned) {
        zp_error("the previous ring was page-locked for a GPU (the cuda backend, or a "
                 "program's zp_client_ring) and cannot be replaced; restart the run");
        return ZP_EPROTO;
    }
    return zp_consumer_map(c, nonce);
}

int zp_consumer_view(zp_consumer_t *c, const zp_msg_t *m, zp_batch_view_t *v)
{
    const zp_stage_t *st = c->st;
    int rc = ring_for(c, m->nonce);
    if (rc)
        return rc;
    if (m->slot >= c->ring->depth || m->n > (uint64_t)st->cfg.batch_size ||
        m->elems != (uint64_t)st->meta.elems || m->dtype != (uint64_t)st->meta.dtype) {
        char why[200];
        snprintf(why, sizeof why, "a BATCH that does not fit the ring (slot %llu, n %llu, %llu "
                 "values of dtype %llu)", (unsigned long long)m->slot, (unsigned long long)m->n,
                 (unsigned long long)m->elems, (unsigned long long)m->dtype);
        zp_inbox_drop(&c->inbox, why); /* counted in stats.errors too */
        if (m->slot >= c->ring->depth)
            return 1; /* no slot of ours: nothing to give back */
        /* the slot goes back to the prefetch, or the ring would be a slot short for good */
        return (rc = zp_consumer_release(c, m->slot, m->gen)) ? rc : 1;
    }
    uint8_t *base = zp_ring_slot(c->ring, (uint32_t)m->slot);
    *v = (zp_batch_view_t){.split = (int)m->split, .n = (int)m->n, .epoch = m->epoch,
                           .index = m->index, .idx = (const uint32_t *)(base + c->lay.indices),
                           .labels = (const int32_t *)(base + c->lay.labels),
                           .data = base + c->lay.data,
                           .crops = (const zp_crop_t *)(base + c->lay.crops)};
    return 0;
}

int zp_consumer_release(zp_consumer_t *c, uint64_t slot, uint64_t gen)
{
    zp_msg_t fr = {.type = ZP_MSG_FREE, .slot = slot, .gen = gen};
    return zp_sock_send(c->sock, NULL, &fr, NULL, NULL, 0, 0);
}

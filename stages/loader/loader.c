/* loader.c — a loader process: takes TASKs from the cache stage with credit,
 * reads and transforms the samples, returns SAMPLES. */
#define _GNU_SOURCE
#include "pipeline/log.h"
#include "pipeline/sock.h"
#include "pipeline/stage.h"
#include "stages/loader/source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    zp_stage_t *st;
    zp_source_t *src;
    void *work;           /* DEALER to the cache stage */
    float lut[4][256];    /* uint8 -> normalised float32, per channel (up to 4) */
    uint8_t *pixels;      /* one sample; owned */
    float *data;          /* task output; owned, grown to the largest task */
    int32_t *labels;
    size_t cap;           /* samples the output buffers hold */
    int64_t bad_msgs;
} loader_t;

static void build_lut(loader_t *l)
{
    const zp_config_t *c = &l->st->cfg;
    for (int ch = 0; ch < 4; ch++) {
        double mean = c->mean.v[c->mean.n > ch ? ch : 0], std = c->std.v[c->std.n > ch ? ch : 0];
        for (int p = 0; p < 256; p++)
            l->lut[ch][p] = (float)((p / 255.0 - mean) / std);
    }
}

static int grow(loader_t *l, size_t n)
{
    if (n <= l->cap)
        return 0;
    size_t elems = (size_t)l->st->meta.elems;
    float *d = realloc(l->data, n * elems * sizeof(float));
    if (d)
        l->data = d;
    int32_t *lb = realloc(l->labels, n * sizeof(int32_t));
    if (lb)
        l->labels = lb;
    if (!d || !lb)
        return ZP_ENOMEM;
    l->cap = n;
    return 0;
}

/* The deterministic transform: uint8 CHW pixels -> normalised float32 CHW. */
static void transform(const loader_t *l, const uint8_t *px, float *out)
{
    int64_t plane = l->st->meta.shape[1] * l->st->meta.shape[2];
    for (int64_t c = 0; c < l->st->meta.shape[0]; c++) {
        const float *lut = l->lut[c < 4 ? c : 3];
        for (int64_t i = 0; i < plane; i++)
            out[c * plane + i] = lut[px[c * plane + i]];
    }
}

static void send_fail(loader_t *l, uint64_t id, const char *error)
{
    zp_msg_t m = {.type = ZP_MSG_FAIL, .id = id};
    snprintf(m.error, sizeof m.error, "%s", error);
    zp_send(l->work, NULL, &m, NULL, NULL, 0, 0);
}

static int run_task(loader_t *l, const zp_msg_t *t)
{
    zp_stats_state(&l->st->stats, ZP_ST_BUSY);
    const uint8_t *idx = t->frame[1]; /* u32 LE array; a frame may be unaligned */
    size_t n = t->n, elems = (size_t)l->st->meta.elems;
    char err[300];
    if (grow(l, n)) {
        send_fail(l, t->id, "loader out of memory");
        return ZP_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t ix;
        memcpy(&ix, idx + 4 * i, 4);
        if (ix >= (uint64_t)l->st->meta.n[t->split]) {
            snprintf(err, sizeof err, "sample %u is outside the %s split (%lld samples)", ix,
                     zp_split_name((int)t->split), (long long)l->st->meta.n[t->split]);
            send_fail(l, t->id, err);
            return 0;
        }
        int rc = l->src->get(l->src, (int)t->split, ix, l->pixels, &l->labels[i], err, sizeof err);
        if (rc) {
            zp_error("%s", err);
            send_fail(l, t->id, err);
            return 0;
        }
        transform(l, l->pixels, l->data + i * elems);
    }
    zp_msg_t out = {.type = ZP_MSG_SAMPLES, .id = t->id, .split = t->split, .n = n, .elems = elems};
    const void *parts[3] = {idx, l->labels, l->data};
    size_t sizes[3] = {n * 4, n * 4, n * elems * 4};
    zp_stats_state(&l->st->stats, ZP_ST_WAIT_OUT);
    int rc = zp_send(l->work, NULL, &out, parts, sizes, 3, 0);
    if (rc)
        return rc;
    l->st->stats.items += (int64_t)n;
    l->st->stats.bytes += (int64_t)(sizes[2]);
    zp_msg_t ready = {.type = ZP_MSG_READY, .credit = 1};
    return zp_send(l->work, NULL, &ready, NULL, NULL, 0, 0);
}

static int loop(loader_t *l)
{
    zp_frames_t f;
    zp_frames_init(&f);
    zp_msg_t ready = {.type = ZP_MSG_READY, .credit = (uint64_t)l->st->cfg.credit};
    int rc = zp_send(l->work, NULL, &ready, NULL, NULL, 0, 0);
    while (!rc && !zp_stop) {
        zp_stats_state(&l->st->stats, ZP_ST_WAIT_IN);
        zmq_pollitem_t it = {l->work, 0, ZMQ_POLLIN, 0};
        int n = zmq_poll(&it, 1, 100);
        zp_stats_tick(l->st);
        if (n <= 0)
            continue;
        if ((rc = zp_frames_recv(&f, l->work, 0)))
            break;
        zp_msg_t m;
        char why[256];
        if (zp_frames_decode(&f, 0, &m, why, sizeof why) || m.type != ZP_MSG_TASK) {
            l->st->stats.errors++;
            if (l->bad_msgs++ < 10)
                zp_warn("dropped a malformed message from the cache stage: %s",
                        m.type && m.type != ZP_MSG_TASK ? zp_msg_name(m.type) : why);
        } else {
            rc = run_task(l, &m);
        }
        zp_msg_release(&m);
    }
    zp_frames_close(&f);
    return rc == ZP_ESTOP ? 0 : rc;
}

int zp_loader_main(zp_stage_t *st)
{
    loader_t l = {.st = st};
    char err[700], ep[ZP_ENDPOINT_MAX + 16];
    int rc = st->cfg.dataset_source == ZP_SOURCE_IDX
                 ? zp_source_idx_open(&l.src, &st->cfg, &st->meta, err, sizeof err)
                 : zp_source_synthetic_open(&l.src, &st->cfg, &st->meta, err, sizeof err);
    if (rc) {
        zp_error("%s", err);
        return 1;
    }
    build_lut(&l);
    l.pixels = malloc((size_t)st->meta.elems);
    if (!l.pixels || grow(&l, (size_t)st->cfg.task_size) || zp_stage_endpoint(st, "work", ep, sizeof ep) ||
        !(l.work = zp_sock_open(st->zctx, ZMQ_DEALER, ep, 0, 0))) {
        rc = 1;
        goto out;
    }
    zp_info("ready: %lld train and %lld test samples of %lld values", (long long)st->meta.n[0],
            (long long)st->meta.n[1], (long long)st->meta.elems);
    rc = loop(&l);
    if (rc)
        zp_error("stopped: %s", zp_strerror(rc));
    rc = rc ? 1 : 0;
out:
    zp_sock_close(&l.work);
    if (l.src)
        l.src->destroy(l.src);
    free(l.pixels);
    free(l.data);
    free(l.labels);
    return rc;
}

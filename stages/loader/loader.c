/* loader.c — a loader process: takes TASKs from the cache stage with credit,
 * reads and transforms the samples, returns SAMPLES. With the crop at
 * assembly and the cache on, a train task's whole images (as the cache keeps
 * them) go first, in a VALUES message.
 *
 * It sends a HEARTBEAT whenever it has sent nothing for loader.heartbeat_ms
 * (also between the samples of a long task); when the cache stage has been
 * silent for heartbeat_ms x liveness it reconnects with a new identity and
 * offers its credit again (Paranoid Pirate). ZP_SIG_RETIRE (`zeus-pipe
 * scale`, a real-time signal) retires it: RETIRE, finish what was sent before RETIRED, exit 0. */
#define _GNU_SOURCE
#include "stages/loader/loader.h"
#include "pipeline/base/buf.h"
#include "pipeline/image/augment.h"
#include "pipeline/dataset/augment_field.h"
#include "pipeline/cachedb/cachedb.h"
#include "pipeline/stage/event.h"
#include "pipeline/base/log.h"
#include "pipeline/base/names.h"
#include "pipeline/base/resources.h"
#include "pipeline/net/inbox.h"
#include "pipeline/net/sock.h"
#include "pipeline/stage/stage.h"
#include "pipeline/source/source.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <turbojpeg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Output buffers handed to ZeroMQ without a copy: `busy` until ZeroMQ's I/O
 * thread is done with the bytes and calls release_buf(). */
#define OUTBUFS 8
typedef struct {
    uint8_t *buf; /* malloc'd: aligned for float32 samples */
    size_t cap;   /* bytes */
    int busy;   /* atomic */
} outbuf_t;

typedef struct {
    zp_stage_t *st;
    zp_source_t *src;
    void *work;        /* DEALER to the cache stage */
    float *lut;       /* uint8 -> normalised float32 (zp_dataset_normalize_lut); owned */
    uint8_t *pixels;   /* raw samples of `chunk` samples; owned */
    size_t chunk;      /* samples read before they are transformed: about 256 KiB */
    outbuf_t out[OUTBUFS];
    int64_t dropped; /* messages from the cache stage dropped */
    zp_frames_t f;
    zp_inbox_t in;   /* the cache stage's messages */
    char ep[ZP_ENDPOINT_MAX + 16];
    int64_t last_send, last_recv; /* ns */
    int retire_sent;
    int delivered; /* samples went out: the supervisor knows (pipeline/base/resources.h) */
    int64_t skipped;
    zp_augment_t aug; /* dataset.augment.where = loader (cache off) */
    float *scratch;   /* one transformed sample before its augmentation; owned */
    uint64_t fp;      /* zp_cachedb_fingerprint_hash of this loader's config */
    int refused;      /* the cache stage said REFUSED: exit 2 */
    /* The crop at assembly with the cache on: the task's whole images as
     * cache values, sent in a VALUES before its SAMPLES. Reused; owned. */
    int keep_whole;
    uint8_t *vals;
    size_t vals_len, vals_cap;
    uint64_t nvals;
    tjhandle tjc;       /* cache.encoding jpeg */
    uint8_t *jpg;
    size_t jpg_cap;
    /* The crop at assembly, cache on or off: each train sample's crop
     * (zp_crop_t) goes with the SAMPLES, for batches.log */
    int crops;
    /* A split with a Python augment step: the records the cache holds are
     * read here (LMDB, read-only, one transaction a task) and augmented; the
     * ones made by __getitem__ go to the cache in a VALUES. */
    zp_cachedb_t db;
    int db_state;   /* 0: not opened yet, 1: open, -1: not usable (every sample is made) */
    MDB_txn *txn;   /* the task's, NULL: none */
    zp_dataset_meta_t kept[ZP_SPLITS]; /* what each split's cache values hold */
    uint64_t vfp[ZP_SPLITS];           /* and the fingerprint they carry (zp_cachedb_value_fp) */
    uint8_t *keep;  /* one record as __getitem__ made it; owned */
    int64_t corrupt;
    zp_augment_field_t fa; /* the built-in ops on a Python Dataset's field (ZP_AUG_STEP_FIELD) */
    zp_augment_field_space_t fsp;
    /* The watchdog's view of the get() running (atomics): since when (ns; 0:
     * none), and of which sample. */
    int64_t get_since;
    uint32_t get_index, get_split;
    int got_one; /* a get() has returned: the first one's grace is over */
    int watch_stop;
} loader_t;

/* Appends the whole image the source just cropped sample `index` from, as
 * the cache value to keep (raw RGB or re-encoded as cache.encoding says). */
static int keep_whole(loader_t *l, uint32_t index, int32_t label)
{
    const zp_source_t *src = l->src;
    int w = src->whole_w, h = src->whole_h, layout = ZP_CACHE_RAW;
    const uint8_t *payload = src->whole;
    size_t bytes = (size_t)w * h * 3;
    if (l->st->cfg.cache_encoding == ZP_ENC_JPEG) {
        unsigned long jsize = tjBufSize(w, h, TJSAMP_420);
        if (zp_buf_grow(&l->jpg, &l->jpg_cap, jsize))
            return ZP_ENOMEM;
        if (tjCompress2(l->tjc, src->whole, w, 0, h, TJPF_RGB, &l->jpg, &jsize, TJSAMP_420,
                        (int)l->st->cfg.jpeg_quality, TJFLAG_NOREALLOC | TJFLAG_ACCURATEDCT))
            return ZP_ENOMEM;
        payload = l->jpg, bytes = jsize, layout = ZP_CACHE_JPEG;
    }
    if (zp_buf_grow(&l->vals, &l->vals_cap, l->vals_len + ZP_CACHE_HDR + bytes))
        return ZP_ENOMEM;
    uint8_t *v = l->vals + l->vals_len;
    memcpy(v + ZP_CACHE_HDR, payload, bytes);
    zp_cachedb_whole_header(v, l->vfp[ZP_SPLIT_TRAIN], layout, index, label, h, w, v + ZP_CACHE_HDR,
                            bytes);
    l->vals_len += ZP_CACHE_HDR + bytes;
    l->nvals++;
    return 0;
}

/* The task's read transaction on the cache, for a split with a Python
 * augment step; NULL when the cache is off, is another host's (a remote
 * loader: the run's LMDB is not here) or cannot be read: its samples are
 * then all made. */
static MDB_txn *cache_txn(loader_t *l)
{
    char err[400];
    if (!l->st->cfg.cache_enabled || l->st->connect[0] || l->db_state < 0)
        return NULL;
    if (!l->db_state && zp_cachedb_open(&l->db, &l->st->cfg, &l->st->meta, 1, err, sizeof err)) {
        zp_warn("cannot read the cache here, every sample will be made by __getitem__: %s", err);
        l->db_state = -1;
        return NULL;
    }
    l->db_state = 1;
    MDB_txn *txn = NULL;
    int rc = zp_cachedb_read_begin(&l->db, &txn);
    if (rc)
        zp_warn_limited(&l->corrupt, "%s: cannot begin a read: %s", l->db.path, mdb_strerror(rc));
    return rc ? NULL : txn;
}

/* The record the cache holds for sample `index` of `split`, checked; NULL
 * when absent or corrupt (the loader makes it again, and the cache keeps the
 * new one). Valid until the transaction ends. */
static const uint8_t *cached_record(loader_t *l, int split, uint32_t index)
{
    uint8_t kb[4];
    zp_cachedb_key(index, kb);
    MDB_val k = {4, kb}, v;
    const uint8_t *payload;
    const char *why;
    int32_t label;
    if (!l->txn || mdb_get(l->txn, l->db.dbi[split], &k, &v))
        return NULL;
    if (zp_cachedb_check_value(&v, &l->kept[split], l->vfp[split], index, &label, &payload, &why)) {
        zp_warn_limited(&l->corrupt, "%s sample %u: the cached record is corrupt (%s): made again",
                        zp_dataset_split_name(split), index, why);
        return NULL;
    }
    return payload;
}

/* Appends the record __getitem__ made for `index` (l->keep) as a cache value. */
static int keep_record(loader_t *l, int split, uint32_t index)
{
    size_t bytes = l->kept[split].sample_bytes;
    if (zp_buf_grow(&l->vals, &l->vals_cap, l->vals_len + ZP_CACHE_HDR + bytes))
        return ZP_ENOMEM;
    uint8_t *v = l->vals + l->vals_len;
    memcpy(v + ZP_CACHE_HDR, l->keep, bytes);
    zp_cachedb_header(v, &l->kept[split], l->vfp[split], index, 0, v + ZP_CACHE_HDR, bytes);
    l->vals_len += ZP_CACHE_HDR + bytes;
    l->nvals++;
    return 0;
}

/* A get() that has run past loader.heartbeat_ms x (liveness + 1): the cache
 * stage declared this loader dead a heartbeat ago and gave its task to
 * another; a hung __getitem__ or decode cannot be interrupted, so the loader
 * ends, saying which sample hung, and the supervisor starts another. */
static void *watchdog(void *arg)
{
    loader_t *l = arg;
    const zp_config_t *c = &l->st->cfg;
    int64_t limit = c->heartbeat_ms * (c->liveness + 1) * 1000000;
    while (!__atomic_load_n(&l->watch_stop, __ATOMIC_ACQUIRE)) {
        struct timespec ts = {0, 100 * 1000000};
        nanosleep(&ts, NULL);
        int64_t since = __atomic_load_n(&l->get_since, __ATOMIC_ACQUIRE);
        /* the first get() may import torch or open a file: the broker's grace too */
        int64_t mine = __atomic_load_n(&l->got_one, __ATOMIC_ACQUIRE) ? limit
                                                                      : limit * ZP_FIRST_TASK_GRACE;
        if (since && zp_now_ns() - since > mine) {
            zp_error("%s sample %u has been loading for %lld ms: this loader is hung and ends "
                     "(the run starts another, and gives the sample to it alone)",
                     zp_dataset_split_name((int)__atomic_load_n(&l->get_split, __ATOMIC_RELAXED)),
                     __atomic_load_n(&l->get_index, __ATOMIC_RELAXED),
                     (long long)((zp_now_ns() - since) / 1000000));
            _exit(3);
        }
    }
    return NULL;
}

/* loader.on_error: skip: the sample goes on with label ZP_LABEL_SKIPPED (the
 * cache does not keep it, the prefetch leaves it out of its batch), and a
 * sample_skipped record names it for the report. */
static void skip_sample(loader_t *l, int split, uint32_t index, const char *why)
{
    zp_warn_limited(&l->skipped, "skipped: %s", why);
    zp_event_t ev;
    zp_event_record(l->st, &ev, ZP_REC_SAMPLE_SKIPPED);
    zp_event_str(&ev, ZP_KEY(SAMPLE_SKIPPED, split), zp_dataset_split_name(split));
    zp_event_int(&ev, ZP_KEY(SAMPLE_SKIPPED, index), index);
    zp_event_str(&ev, ZP_KEY(SAMPLE_SKIPPED, error), why);
    zp_event_send(l->st, &ev);
}

static int send_msg(loader_t *l, const zp_msg_t *m)
{
    l->last_send = zp_now_ns();
    return zp_sock_send(l->work, NULL, m, NULL, NULL, 0, 0);
}

/* A heartbeat when nothing was sent for heartbeat_ms. */
static int beat(loader_t *l)
{
    if (zp_now_ns() - l->last_send < l->st->cfg.heartbeat_ms * 1000000)
        return 0;
    zp_msg_t hb = {.type = ZP_MSG_HEARTBEAT};
    return send_msg(l, &hb);
}

/* A DEALER to a remote run's cache stage, CURVE client. */
static void *open_remote(loader_t *l)
{
    const zp_stage_t *st = l->st;
    int linger = 0;
    void *s = zmq_socket(st->zctx, ZMQ_DEALER);
    if (s)
        zp_sock_limit(s);
    if (!s || zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, st->server_pub, 40) ||
        zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, st->pub, 40) ||
        zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, st->sec, 40) ||
        zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger) || zmq_connect(s, st->connect)) {
        zp_error("connect %s: %s", st->connect, zmq_strerror(errno));
        if (s)
            zmq_close(s);
        return NULL;
    }
    return s;
}

/* A new connection (a new identity) to the cache stage, offering full credit. */
static int connect_broker(loader_t *l)
{
    zp_sock_destroy(&l->work);
    if (l->st->connect[0] ? !(l->work = open_remote(l))
                          : zp_sock_create(&l->work, l->st->zctx, ZMQ_DEALER, l->ep, 0, 0))
        return ZP_EZMQ;
    l->last_recv = zp_now_ns();
    zp_msg_t ready = {.type = ZP_MSG_READY, .credit = (uint64_t)l->st->cfg.credit, .fp = l->fp,
                      .present = ZP_B(fp)};
    return send_msg(l, &ready);
}

/* REFUSED: this loader's samples are not the run's (or it sent what its task
 * did not ask for). Says why, and what it would have sent, and stops. */
static int refused(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    (void)f;
    loader_t *l = ctx;
    char text[8192];
    zp_error("refused by the cache stage: %s", m->error);
    for (int split = 0; split < ZP_SPLITS; split++) {
        zp_cachedb_fingerprint(&l->st->cfg, &l->st->meta, split, text, sizeof text);
        zp_error("this loader's %s split (fingerprint %016llx): %s", zp_dataset_split_name(split),
                 (unsigned long long)l->fp, text);
    }
    zp_error("give this loader the run's config (zeus-pipe config RUN/config.yaml) and dataset");
    l->refused = 1;
    return 1;
}

static void release_buf(void *data, void *hint)
{
    (void)data;
    __atomic_store_n(&((outbuf_t *)hint)->busy, 0, __ATOMIC_RELEASE);
}

/* A message of `bytes` for the task's output, preferably from the pool (no
 * allocation in steady state); returns its data pointer or NULL. */
static uint8_t *out_msg(loader_t *l, zmq_msg_t *msg, size_t bytes)
{
    for (int i = 0; i < OUTBUFS; i++) {
        outbuf_t *o = &l->out[i];
        if (__atomic_load_n(&o->busy, __ATOMIC_ACQUIRE))
            continue;
        if (o->cap < bytes) {
            uint8_t *p = realloc(o->buf, bytes);
            if (!p)
                continue;
            o->buf = p;
            o->cap = bytes;
        }
        __atomic_store_n(&o->busy, 1, __ATOMIC_RELAXED);
        if (zmq_msg_init_data(msg, o->buf, bytes, release_buf, o)) {
            o->busy = 0;
            return NULL;
        }
        return o->buf;
    }
    /* every pooled buffer is still queued in ZeroMQ: let it allocate one */
    return zmq_msg_init_size(msg, bytes) ? NULL : zmq_msg_data(msg);
}

static void send_fail(loader_t *l, uint64_t id, const char *error)
{
    zp_msg_t m = {.type = ZP_MSG_FAIL, .id = id};
    snprintf(m.error, sizeof m.error, "%.255s", error);
    zp_sock_send(l->work, NULL, &m, NULL, NULL, 0, 0);
}

/* Loads every sample of the task into `parts` (labels, data, and for a train
 * task cropped at assembly its crops), `chunk` samples at a time: read them
 * raw, then transform them. 0, or a message in err. */
static int load_samples(loader_t *l, const zp_msg_t *t, zmq_msg_t *parts, char *err, size_t len)
{
    const uint8_t *idx = t->frame[1]; /* u32 LE array; a frame may be unaligned */
    size_t n = t->n, elems = (size_t)l->st->meta.elems;
    /* uint8 samples are the source's pixels as they are: read straight into the message */
    int raw = l->st->meta.dtype == ZP_DTYPE_U8;
    uint8_t *out = out_msg(l, &parts[1], n * l->st->meta.sample_bytes);
    float *data = (float *)out;
    if (!out || zmq_msg_init_size(&parts[0], n * 4)) {
        snprintf(err, len, "loader out of memory");
        return ZP_ENOMEM;
    }
    uint8_t *labels = zmq_msg_data(&parts[0]);
    uint8_t *crops = NULL;
    if (l->crops && t->split == ZP_SPLIT_TRAIN) {
        if (zmq_msg_init_size(&parts[2], n * sizeof(zp_crop_t))) {
            snprintf(err, len, "loader out of memory");
            return ZP_ENOMEM;
        }
        crops = zmq_msg_data(&parts[2]);
    }
    int64_t read_ns = 0, transform_ns = 0;
    /* the epoch comes with tasks of a prefetch that knows about augmentation */
    int augment = l->aug.on && t->split == ZP_SPLIT_TRAIN && (t->present & ZP_B(epoch));
    l->src->epoch = t->present & ZP_B(epoch) ? t->epoch : 0;
    l->vals_len = 0, l->nvals = 0;
    int keep = l->keep_whole && t->split == ZP_SPLIT_TRAIN;
    int apart = l->st->meta.augment[t->split]; /* a Python augment step after the cache */
    int keep_made = apart && l->st->cfg.cache_enabled;
    if (l->src->task) {
        int64_t t0 = zp_now_ns();
        l->src->task(l->src, (int)t->split, idx, n); /* samples out of range: refused below */
        read_ns += zp_now_ns() - t0;
    }
    for (size_t i0 = 0; i0 < n; i0 += l->chunk) {
        size_t m = n - i0 < l->chunk ? n - i0 : l->chunk;
        int64_t t0 = zp_now_ns();
        for (size_t i = i0; i < i0 + m; i++) {
            uint32_t ix;
            int32_t label;
            memcpy(&ix, idx + 4 * i, 4);
            if (ix >= (uint64_t)l->st->meta.n[t->split]) {
                snprintf(err, len, "sample %u is outside the %s split (%lld samples)", ix,
                         zp_dataset_split_name((int)t->split), (long long)l->st->meta.n[t->split]);
                return ZP_EDATA;
            }
            if (beat(l))
                return ZP_EZMQ;
            uint8_t *px = raw ? out + i * elems : l->pixels + (i - i0) * elems;
            if (apart) {
                l->src->cached = apart == ZP_AUG_STEP_PYTHON ? cached_record(l, (int)t->split, ix)
                                                             : NULL;
                l->src->keep = l->keep;
                l->src->kept = 0;
            }
            __atomic_store_n(&l->get_index, ix, __ATOMIC_RELAXED);
            __atomic_store_n(&l->get_split, (uint32_t)t->split, __ATOMIC_RELAXED);
            __atomic_store_n(&l->get_since, zp_now_ns(), __ATOMIC_RELEASE);
            int rc = l->src->get(l->src, (int)t->split, ix, px, &label, err, len);
            __atomic_store_n(&l->get_since, 0, __ATOMIC_RELEASE);
            __atomic_store_n(&l->got_one, 1, __ATOMIC_RELEASE);
            if (!rc && apart == ZP_AUG_STEP_FIELD && /* the built-in ops, from the record kept */
                zp_augment_field_make(&l->fa, &l->fsp, (int)t->split, l->src->epoch, ix, l->keep, px,
                                 &l->src->crop)) {
                snprintf(err, len, "loader out of memory");
                return ZP_ENOMEM;
            }
            if (!rc)
                rc = zp_dataset_label_check(&l->st->meta, zp_dataset_split_name((int)t->split), ix, label, err, len);
            if (rc == ZP_EDATA && l->st->cfg.on_error == ZP_ON_ERROR_SKIP) {
                skip_sample(l, (int)t->split, ix, err);
                memset(px, 0, elems);
                label = ZP_LABEL_SKIPPED;
            } else if (rc) {
                return rc;
            } else if ((keep && l->src->whole && keep_whole(l, ix, label)) ||
                       (keep_made && l->src->kept && keep_record(l, (int)t->split, ix))) {
                snprintf(err, len, "loader out of memory");
                return ZP_ENOMEM;
            }
            memcpy(labels + 4 * i, &label, 4);
            if (crops) {
                zp_crop_t c = label == ZP_LABEL_SKIPPED ? (zp_crop_t){.x = -1} : l->src->crop;
                memcpy(crops + i * sizeof c, &c, sizeof c);
            }
        }
        int64_t t1 = zp_now_ns();
        for (size_t i = i0; i < i0 + m && !raw; i++) {
            if (!augment) {
                zp_dataset_normalize(l->lut, &l->st->meta, l->pixels + (i - i0) * elems, data + i * elems);
                continue;
            }
            uint32_t ix;
            memcpy(&ix, idx + 4 * i, 4);
            zp_dataset_normalize(l->lut, &l->st->meta, l->pixels + (i - i0) * elems, l->scratch);
            zp_augment(&l->aug, t->epoch, ix, l->scratch, data + i * elems);
        }
        read_ns += t1 - t0;
        transform_ns += zp_now_ns() - t1;
    }
    zp_timer_add(&l->st->timers, ZP_R_READ, read_ns);
    if (!raw)
        zp_timer_add(&l->st->timers, augment ? ZP_R_AUGMENT : ZP_R_TRANSFORM, transform_ns);
    return 0;
}

static int run_task(void *ctx, const zp_msg_t *t, zp_frames_t *f)
{
    loader_t *l = ctx;
    zp_stage_stats_state(&l->st->stats, ZP_ST_BUSY);
    zmq_msg_t parts[4]; /* indices, labels, data, crops (empty: none) */
    for (int i = 0; i < 4; i++)
        zmq_msg_init(&parts[i]);
    char err[300];
    l->txn = l->st->meta.augment[t->split] == ZP_AUG_STEP_PYTHON ? cache_txn(l) : NULL;
    int rc = load_samples(l, t, parts + 1, err, sizeof err);
    if (l->txn) /* the cached records it pointed to were copied or augmented */
        mdb_txn_abort(l->txn);
    l->txn = NULL;
    l->src->cached = NULL, l->src->keep = NULL;
    if (rc) {
        zp_error("task %llu: %s", (unsigned long long)t->id, err);
        send_fail(l, t->id, err);
        rc = rc == ZP_ENOMEM ? rc : 0;
    } else {
        size_t bytes = zmq_msg_size(&parts[2]);
        if (l->nvals) { /* the whole images to keep go first */
            zp_msg_t v = {.type = ZP_MSG_VALUES, .id = t->id, .split = t->split, .n = l->nvals};
            const void *vp[1] = {l->vals};
            size_t vs[1] = {l->vals_len};
            rc = zp_sock_send(l->work, NULL, &v, vp, vs, 1, 0);
        }
        zmq_msg_move(&parts[0], &f->part[1]); /* the task's indices go back as they came */
        zp_msg_t out = {.type = ZP_MSG_SAMPLES, .id = t->id, .split = t->split, .n = t->n,
                        .elems = (uint64_t)l->st->meta.elems,
                        .dtype = (uint64_t)l->st->meta.dtype, .present = ZP_B(dtype)};
        zp_stage_stats_state(&l->st->stats, ZP_ST_WAIT_OUT);
        ZP_TIME_BEGIN(&l->st->timers, ZP_R_SEND);
        rc = rc ? rc : zp_sock_send_parts(l->work, &out, parts, zmq_msg_size(&parts[3]) ? 4 : 3);
        ZP_TIME_END(&l->st->timers, ZP_R_SEND);
        l->last_send = zp_now_ns();
        if (!rc && !l->delivered && l->st->run_dir[0]) /* a supervised loader: tell it once */
            l->delivered = 1, zp_resources_mark_delivered(l->st->run_dir, l->st->instance);
        l->st->stats.items += (int64_t)t->n;
        l->st->stats.bytes += (int64_t)bytes;
    }
    for (int i = 0; i < 4; i++)
        zmq_msg_close(&parts[i]);
    /* every READY carries the fingerprint: a loader declared dead whose record
     * went to another is taken back by its next READY alone */
    zp_msg_t ready = {.type = ZP_MSG_READY, .credit = 1, .fp = l->fp, .present = ZP_B(fp)};
    return rc || l->retire_sent ? rc : send_msg(l, &ready);
}

static int on_retired(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    (void)ctx, (void)m, (void)f;
    return 1;
}

static int on_heartbeat(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    (void)ctx, (void)m, (void)f;
    return 0; /* its arrival is what counts */
}

static const zp_route_t ROUTES[] = {{ZP_MSG_TASK, run_task},
                                    {ZP_MSG_RETIRED, on_retired},
                                    {ZP_MSG_REFUSED, refused},
                                    {ZP_MSG_HEARTBEAT, on_heartbeat}};

/* One message from the cache stage; 1 when it said RETIRED or REFUSED. */
static int on_broker(loader_t *l)
{
    int rc = zp_inbox_recv(&l->in, l->work, 0, &l->f, l);
    if (l->f.n) /* anything it sent, after a task as long as it took: not its silence */
        l->last_recv = zp_now_ns();
    return rc;
}

static int loop(loader_t *l)
{
    const zp_config_t *c = &l->st->cfg;
    int rc = connect_broker(l);
    while (!rc && !zp_stop) {
        if (zp_retire && !l->retire_sent) {
            zp_msg_t bye = {.type = ZP_MSG_RETIRE};
            rc = send_msg(l, &bye);
            l->retire_sent = 1;
            zp_info("retiring: finishing the tasks already sent to me");
        }
        zp_stage_stats_state(&l->st->stats, ZP_ST_WAIT_IN);
        zmq_pollitem_t it = {l->work, 0, ZMQ_POLLIN, 0};
        int n = zmq_poll(&it, 1, c->heartbeat_ms < 100 ? (int)c->heartbeat_ms : 100);
        zp_stage_stats_tick(l->st);
        if (n > 0)
            rc = on_broker(l);
        else if (n < 0 && errno != EINTR)
            rc = ZP_EZMQ;
        if (!rc)
            rc = beat(l);
        if (!rc && zp_now_ns() - l->last_recv > c->heartbeat_ms * c->liveness * 1000000) {
            zp_warn("the cache stage was silent for %lld ms: reconnecting",
                    (long long)(c->heartbeat_ms * c->liveness));
            l->retire_sent = 0;
            rc = connect_broker(l);
        }
    }
    zp_frames_free(&l->f);
    return rc == ZP_ESTOP || rc == 1 ? 0 : rc;
}

int zp_loader_run(zp_stage_t *st, zp_source_t *src)
{
    static loader_t l;
    int rc;
    l.st = st;
    l.src = src;
    zp_frames_init(&l.f);
    l.in = ZP_STAGE_INBOX(st, ROUTES, 0, "the cache stage", &l.dropped);
    l.lut = zp_dataset_normalize_lut(&st->cfg, st->meta.shape[0]);
    l.chunk = (size_t)(256 << 10) / (size_t)st->meta.elems;
    l.chunk = l.chunk < 1 ? 1 : l.chunk;
    l.pixels = malloc((size_t)st->meta.elems * l.chunk);
    if (st->cfg.aug_where == ZP_AUG_IN_LOADER && st->mode != ZP_MODE_OVERFIT &&
        (zp_augment_init(&l.aug, &st->cfg, (int)st->meta.shape[0], (int)st->meta.shape[1],
                        (int)st->meta.shape[2]) ||
         !(l.scratch = malloc(sizeof(float) * (size_t)st->meta.elems)))) {
        zp_error("out of memory");
        rc = 1;
        goto out;
    }
    if (!l.pixels || !l.lut || (!st->connect[0] && zp_stage_endpoint(st, zp_names_sock(ZP_SOCK_WORK), l.ep, sizeof l.ep))) {
        rc = 1;
        goto out;
    }
    zp_info("ready: %lld train and %lld test samples of %zu bytes", (long long)st->meta.n[0],
            (long long)st->meta.n[1], st->meta.sample_bytes);
    l.fp = zp_cachedb_fingerprint_hash(&st->cfg, &st->meta);
    for (int split = 0; split < ZP_SPLITS; split++) {
        l.kept[split] = zp_dataset_cached_meta(&st->meta, split);
        l.vfp[split] = zp_cachedb_value_fp(&st->cfg, &st->meta, split);
    }
    if (st->meta.cached.n && !(l.keep = malloc(st->meta.cached.record_bytes))) {
        zp_error("out of memory");
        rc = 1;
        goto out;
    }
    char why[300] = "its fields differ from the run's description";
    if ((st->meta.augment[0] == ZP_AUG_STEP_FIELD || st->meta.augment[1] == ZP_AUG_STEP_FIELD) &&
        (zp_augment_field_init(&l.fa, &st->cfg, &st->meta.cached, why, sizeof why) ||
         l.fa.out.record_bytes != st->meta.sample_bytes)) {
        zp_error("the run's augmented field is not this loader's: %s", why);
        rc = 2;
        goto out;
    }
    l.keep_whole = zp_augment_whole(&st->cfg) && st->cfg.cache_enabled;
    l.crops = zp_augment_whole(&st->cfg) || st->meta.augment[ZP_SPLIT_TRAIN] == ZP_AUG_STEP_FIELD;
    if (l.keep_whole && st->cfg.cache_encoding == ZP_ENC_JPEG && !(l.tjc = tjInitCompress())) {
        zp_error("cannot start a JPEG encoder: %s", tjGetErrorStr2(NULL));
        rc = 1;
        goto out;
    }
    pthread_t dog; /* detached: a loader that retires or stops does not wait for its nap */
    if (pthread_create(&dog, NULL, watchdog, &l) == 0)
        pthread_detach(dog);
    rc = loop(&l);
    __atomic_store_n(&l.watch_stop, 1, __ATOMIC_RELEASE);
    zp_info("stopping: loaded %lld samples", (long long)st->stats.items);
    if (rc)
        zp_error("stopped: %s", zp_strerror(rc));
    rc = l.refused ? 2 : rc ? 1 : 0; /* 2: a config error, which the supervisor does not restart */
out:
    zp_sock_destroy(&l.work);
    free(l.pixels);
    free(l.lut);
    free(l.scratch);
    free(l.vals);
    free(l.jpg);
    free(l.keep);
    zp_augment_field_space_free(&l.fsp);
    if (l.db_state > 0)
        zp_cachedb_close(&l.db);
    if (l.tjc)
        tjDestroy(l.tjc);
    zp_augment_free(&l.aug);
    zp_stage_close(st); /* ZeroMQ releases the output buffers before they are freed */
    for (int i = 0; i < OUTBUFS; i++)
        free(l.out[i].buf);
    return rc;
}

int zp_loader_main(zp_stage_t *st)
{
    char err[700];
    zp_source_t *src = NULL;
    const zp_source_ops_t *ops = zp_source_ops(st->cfg.dataset_source);
    if (ops->python) {
        zp_error("dataset.source %s: a Python loader runs it (python3 -m zeus_pipe._loader_process), "
                 "not `zeus-pipe stage loader`", ops->name);
        return 2;
    }
    int rc = ops->open(&src, &st->cfg, &st->meta, err, sizeof err);
    if (rc) {
        zp_error("%s", err);
        return 1;
    }
    rc = zp_loader_run(st, src);
    src->destroy(src);
    return rc;
}

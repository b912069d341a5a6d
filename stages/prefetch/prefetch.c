/* prefetch.c — owns the sampler and assembles batches in the sampler's order.
 *
 * Up to depth + window batches are in flight: each is one FETCH to the cache
 * stage. A batch that holds a ring slot gets its samples copied straight into
 * the slot as RESULTs arrive; one fetched ahead of the ring keeps its RESULT
 * messages (no copy) until a slot frees, then copies them in. So bytes move
 * once, from a received message into shared memory, and the ring stays at
 * `depth` slots. A full slot goes to the trainer as BATCH{slot, gen}; the
 * trainer answers FREE{slot, gen}. Phases: every epoch, train then test,
 * until the trainer sends SEEK: then from its position, the phases of its
 * plan (plan.c); what was prepared for the old position is abandoned. */
#define _GNU_SOURCE
#include "stages/prefetch/prefetch.h"
#include "pipeline/cachedb/cachedb.h"
#include "pipeline/stage/ckpt.h"
#include "pipeline/stage/event.h"
#include "pipeline/base/log.h"
#include "pipeline/base/names.h"
#include "pipeline/base/resources.h"
#include "pipeline/ring/ring.h"
#include "pipeline/dataset/sampler.h"
#include "pipeline/net/inbox.h"
#include "pipeline/net/sock.h"
#include "pipeline/stage/stage.h"
#include "stages/prefetch/batch.h"
#include "stages/prefetch/plan.h"
#include "stages/prefetch/readers.h"
#include "pipeline/dataset/augment_field.h"
#include "stages/prefetch/ringlog.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INFLIGHT_MAX (ZP_RING_MAX + 256)

typedef struct {
    zp_stage_t *st;
    zp_ring_t *ring;
    zp_ring_layout_t lay;
    void *fetch, *ring_sock;
    zp_sampler_t sampler[ZP_SPLITS];
    zp_batch_t *inflight[INFLIGHT_MAX]; /* owned */
    int nflight; /* depth + window */
    uint64_t fetch_seq;
    int split;
    int64_t epoch, nbatches, next_fetch, next_slot, next_emit;
    int64_t dropped; /* messages dropped, from either socket */
    zp_frames_t f;
    zp_inbox_t fetch_in, ring_in; /* the cache stage's messages, the trainer's */
    /* the cache's hit path */
    int cache_on;
    zp_cachedb_t db;
    uint8_t *present[ZP_SPLITS]; /* keys in the cache when the phase began */
    uint32_t *scratch;           /* indices of one fetch; owned, batch_size */
    uint64_t *order;             /* (index << 32 | position) of one batch's hits; owned */
    MDB_val *vals;               /* their values; owned, batch_size */
    uint8_t *status;             /* per value: ZP_HIT_*; owned */
    const char **why;            /* per corrupt value; owned */
    zp_readers_t *readers;
    int64_t hits, misses, corrupt; /* this phase */
    uint64_t synced;               /* id of the last SYNCED; 0 before any */
    int64_t first_batch;           /* where the current phase starts (a resumed epoch) */
    int64_t from;                  /* the entry of its permutation the ranks' shards start at */
    zp_ckpt_pos_t start;           /* where the run goes on from (all 0: the beginning) */
    int unsynced;                  /* fetches sent since the cache last committed them */
    int64_t corrupt_warned; /* zp_warn_limited's count */
    int cache_failed;       /* the cache did not open once: say when it does */
    int64_t skipped; /* this phase: samples the loaders could not load */
    int64_t last_progress; /* ns: the last sample that arrived or batch sent (prefetch.fetch_timeout_s) */
    zp_plan_t plan;        /* the phases to run */
    struct {
        int pending;       /* a SEEK came that is not yet acted on */
        uint64_t id, split, epoch, from, batch, plan;
    } seek;                /* the latest SEEK (an earlier one not yet acted on is moot) */
    int seeked;            /* a SEEK came once: the trainer decides what comes, after END too */
    uint64_t abandoned;    /* fetches up to this id were for abandoned batches */
    zp_ringlog_t ringlog;  /* BATCH and FREE, for the run's timeline */
    int whole;             /* the train split's values are whole images (zp_augment_whole) */
    zp_augment_field_t fa;      /* the built-in ops on a Python Dataset's field (ZP_AUG_STEP_FIELD) */
    zp_dataset_meta_t kept[ZP_SPLITS]; /* what each split's values hold */
    uint64_t vfp[ZP_SPLITS];           /* and the fingerprint they carry (zp_cachedb_value_fp) */
    zp_rrc_t rrc;          /* their draws */
    float *lut;            /* float32 samples: their normalisation; owned */
} prefetch_t;

#define SEEKING 1 /* run_phase: a SEEK came; the phase is abandoned */

static int open_cache(prefetch_t *p);

static zp_batch_t *batch_of(prefetch_t *p, int64_t b) { return p->inflight[b % p->nflight]; }

/* The batch's ring slot, as the batch module sees it. */
static zp_slot_view_t view_of(prefetch_t *p, const zp_batch_t *bt)
{
    uint8_t *base = zp_ring_slot(p->ring, (uint32_t)bt->slot);
    return (zp_slot_view_t){.indices = (uint32_t *)(base + p->lay.indices),
                            .labels = (int32_t *)(base + p->lay.labels),
                            .data = base + p->lay.data,
                            .crops = (zp_crop_t *)(base + p->lay.crops),
                            .sample_bytes = p->st->meta.sample_bytes};
}

/* Copies samples [offset, offset+n) of a fetch's result into the batch's slot. */
static void copy_in(prefetch_t *p, zp_batch_t *bt, const zp_fetch_t *f, uint64_t offset, uint64_t n,
                    const uint8_t *labels, const uint8_t *data, const uint8_t *crops)
{
    zp_slot_view_t v = view_of(p, bt);
    ZP_TIME_BEGIN(&p->st->timers, ZP_R_COLLATE);
    zp_batch_copy_in(bt, &v, f, offset, n, labels, data, crops);
    ZP_TIME_END(&p->st->timers, ZP_R_COLLATE);
    p->st->stats.bytes += (int64_t)(n * v.sample_bytes);
}

static int is_present(const prefetch_t *p, uint32_t index)
{
    return p->cache_on && (p->present[p->split][index >> 3] >> (index & 7) & 1);
}

/* Asks the cache stage for the samples at positions scratch-listed in f->pos. */
static int send_fetch_of(prefetch_t *p, zp_fetch_t *f)
{
    f->id = ++p->fetch_seq;
    zp_msg_t m = {.type = ZP_MSG_FETCH, .id = f->id, .split = (uint64_t)p->split, .n = (uint64_t)f->n,
                  .epoch = (uint64_t)p->epoch, .present = ZP_B(epoch)}; /* for loaders that augment */
    const void *parts[1] = {p->scratch};
    size_t sizes[1] = {(size_t)f->n * 4};
    p->misses += f->n;
    p->unsynced = 1;
    return zp_sock_send(p->fetch, NULL, &m, parts, sizes, 1, 0);
}

/* Starts the next batch: hits wait for a slot, misses are fetched now. */
static int start_batch(prefetch_t *p)
{
    int64_t bs = p->st->cfg.batch_size, n;
    int64_t b = p->st->mode == ZP_MODE_OVERFIT ? 0 : p->next_fetch; /* overfit: batch 0 again */
    const uint32_t *idx = zp_sampler_batch(&p->sampler[p->split], bs, b, &n);
    zp_batch_t *bt = batch_of(p, p->next_fetch);
    zp_batch_start(bt, p->next_fetch++, idx, n);
    if (p->cache_on)
        p->st->stats.lookups += n;
    /* a split with a Python augment step: every sample goes to a loader, which
     * reads a cached one from LMDB itself (a hit, counted here) and augments it */
    int apart = p->st->meta.augment[p->split] == ZP_AUG_STEP_PYTHON;
    for (int64_t i = 0; i < n; i++) {
        int present = is_present(p, idx[i]);
        bt->cached[i] = (uint8_t)(present && !apart);
        if (present && apart)
            p->hits++, p->misses--, p->st->stats.hits++;
        if (!bt->cached[i]) {
            p->scratch[bt->fetch.n] = idx[i];
            bt->fetch.pos[bt->fetch.n++] = (uint32_t)i;
        }
    }
    return bt->fetch.n ? send_fetch_of(p, &bt->fetch) : 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void corrupt_value(prefetch_t *p, uint32_t index, const char *why)
{
    p->corrupt++;
    zp_warn_limited(&p->corrupt_warned, "%s sample %u in the cache: %s; loading it again",
                    p->db.name[p->split], index, why);
}

/* An LMDB error on the hit path: counted (stat's lmdb_errors), logged, and
 * the samples it hid are loaded by the loaders: never a silent miss. */
static void lmdb_error(prefetch_t *p, const char *what, int rc)
{
    zp_warn_limited(&p->st->stats.lmdb_errors, "%s: %s: %s (LMDB errors); the loaders load what it hid",
                    p->st->cfg.cache_path, what, mdb_strerror(rc));
}

/* Reads the batch's hits from LMDB straight into its slot, each reader thread
 * in a short read transaction of its own; what is absent or corrupt is
 * fetched from loaders instead. */
static int read_hits(prefetch_t *p, zp_batch_t *bt)
{
    uint8_t *base = zp_ring_slot(p->ring, (uint32_t)bt->slot);
    int32_t *labels = (int32_t *)(base + p->lay.labels);
    uint8_t *data = base + p->lay.data;
    zp_crop_t *crops = (zp_crop_t *)(base + p->lay.crops);
    ZP_TIME_BEGIN(&p->st->timers, ZP_R_LMDB_GET);
    /* Read in key order (nearby keys share B-tree pages), write in batch order. */
    int64_t nread = 0;
    for (int64_t i = 0; i < bt->n; i++)
        if (bt->cached[i])
            p->order[nread++] = (uint64_t)bt->indices[i] << 32 | (uint64_t)i;
    qsort(p->order, (size_t)nread, sizeof *p->order, cmp_u64);
    zp_copy_job_t job = {.db = &p->db, .dbi = p->db.dbi[p->split], .vals = p->vals,
                         .order = p->order, .n = nread, .meta = &p->st->meta,
                         .labels = labels, .data = data, .crops = crops, .status = p->status,
                         .why = p->why,
                         .rrc = p->whole && p->split == ZP_SPLIT_TRAIN ? &p->rrc : NULL,
                         .epoch = (uint64_t)p->epoch, .side = p->st->cfg.image_cache_side,
                         .lut = p->lut, .split = p->split, .kept = &p->kept[p->split],
                         .fp = p->vfp[p->split],
                         .field = p->st->meta.augment[p->split] == ZP_AUG_STEP_FIELD ? &p->fa
                                                                                     : NULL};
    zp_readers_run(p->readers, &job);
    p->st->stats.helper_ns = zp_readers_busy_ns(p->readers); /* stat's readers_busy */
    if (job.lmdb_rc)
        lmdb_error(p, job.lmdb_what, job.lmdb_rc);
    for (int64_t j = 0; j < nread; j++) {
        uint32_t index = (uint32_t)(p->order[j] >> 32);
        uint32_t i = (uint32_t)(p->order[j] & 0xffffffffu);
        if (p->status[j] == ZP_HIT_OK) {
            bt->have[i] = 1;
            bt->filled++;
            p->hits++;
            p->st->stats.hits++;
            continue;
        }
        if (p->status[j] == ZP_HIT_CORRUPT)
            corrupt_value(p, index, p->why[j]);
        p->scratch[bt->late.n] = index;
        bt->late.pos[bt->late.n++] = i;
    }
    ZP_TIME_END(&p->st->timers, ZP_R_LMDB_GET);
    p->st->stats.bytes += ((bt->n - bt->late.n - bt->fetch.n) * (int64_t)p->st->meta.sample_bytes);
    return bt->late.n ? send_fetch_of(p, &bt->late) : 0;
}

/* Gives ring slots to fetched batches in order, and copies in what they hold. */
static int assign_slots(prefetch_t *p)
{
    uint32_t slot, gen;
    int rc = 0;
    while (!rc && p->next_slot < p->next_fetch && zp_ring_acquire(p->ring, &slot, &gen) == 0) {
        zp_batch_t *bt = batch_of(p, p->next_slot++);
        bt->slot = (int)slot;
        bt->gen = gen;
        memcpy((uint8_t *)zp_ring_slot(p->ring, slot) + p->lay.indices, bt->indices,
               (size_t)bt->n * 4);
        zp_slot_view_t v = view_of(p, bt);
        int64_t held = 0;
        for (int i = 0; i < bt->nheld; i++)
            held += (int64_t)bt->held[i].n;
        ZP_TIME_BEGIN(&p->st->timers, ZP_R_COLLATE);
        zp_batch_copy_held(bt, &v);
        ZP_TIME_END(&p->st->timers, ZP_R_COLLATE);
        p->st->stats.bytes += held * (int64_t)v.sample_bytes;
        if (p->cache_on)
            rc = read_hits(p, bt);
    }
    return rc;
}

static zp_batch_t *batch_of_fetch(prefetch_t *p, uint64_t fetch_id, zp_fetch_t **f)
{
    for (int i = 0; i < p->nflight; i++) {
        zp_batch_t *bt = p->inflight[i];
        if (bt->batch < 0)
            continue;
        if (bt->fetch.id == fetch_id)
            return *f = &bt->fetch, bt;
        if (bt->late.id == fetch_id)
            return *f = &bt->late, bt;
    }
    return NULL;
}

/* A RESULT: checked against the indices its fetch asked for, then copied or held. */
static int on_result(void *ctx, const zp_msg_t *m, zp_frames_t *fr)
{
    prefetch_t *p = ctx;
    zp_fetch_t *f;
    zp_batch_t *bt = batch_of_fetch(p, m->id, &f);
    if (!bt) {
        if (m->id > p->abandoned) /* else a batch a SEEK abandoned: no error */
            zp_inbox_drop(&p->fetch_in, "result for a fetch that is not in flight");
        return 0;
    }
    int match = zp_span_fits(m->offset, m->n, (uint64_t)f->n) &&
                m->elems == (uint64_t)p->st->meta.elems &&
                m->dtype == (uint64_t)p->st->meta.dtype;
    const uint8_t *got = m->frame[1];
    for (uint64_t i = 0; match && i < m->n; i++) {
        uint32_t idx;
        memcpy(&idx, got + 4 * i, 4);
        match = idx == bt->indices[f->pos[m->offset + i]];
    }
    if (!match) {
        zp_inbox_drop(&p->fetch_in, "result does not match its fetch (offset, indices or shape)");
        return 0;
    }
    p->last_progress = zp_now_ns();
    if (bt->slot >= 0) {
        copy_in(p, bt, f, m->offset, m->n, m->frame[2], m->frame[3],
                m->nframes > 4 ? m->frame[4] : NULL);
        return 0;
    }
    return zp_batch_hold(bt, m, fr);
}

static int on_synced(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    (void)f;
    ((prefetch_t *)ctx)->synced = m->id;
    return 0;
}

static int on_fail(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    (void)f;
    prefetch_t *p = ctx;
    zp_fetch_t *unused;
    if (m->id <= p->abandoned && !batch_of_fetch(p, m->id, &unused))
        return 0; /* for a batch a SEEK abandoned: it may be loaded again when it is asked for */
    zp_error("a loader could not load a %s batch: %s", zp_dataset_split_name(((prefetch_t *)ctx)->split),
             m->error);
    if (p->st->cfg.on_error == ZP_ON_ERROR_STOP)
        zp_error("the run stops on a sample that cannot be loaded (loader.on_error: error); "
                 "loader.on_error: skip leaves such samples out instead, counted and listed in "
                 "the report");
    return ZP_EDATA;
}

static const zp_route_t FETCH_ROUTES[] = {
    {ZP_MSG_RESULT, on_result}, {ZP_MSG_SYNCED, on_synced}, {ZP_MSG_FAIL, on_fail}};

static int on_fetch_sock(prefetch_t *p)
{
    return zp_inbox_recv(&p->fetch_in, p->fetch, ZMQ_DONTWAIT, &p->f, p);
}

static int on_free(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    (void)f;
    prefetch_t *p = ctx;
    if (m->slot >= p->ring->depth || zp_ring_release(p->ring, (uint32_t)m->slot, (uint32_t)m->gen))
        zp_inbox_drop(&p->ring_in, "FREE of a slot it does not hold (stale generation)");
    else
        zp_ringlog_add(&p->ringlog, p->st, 1, (uint32_t)m->slot, (uint32_t)m->gen);
    return 0;
}

/* SEEK: kept for the loop to act on, or refused at once with a sentence. */
static int on_seek(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    (void)f;
    prefetch_t *p = ctx;
    zp_msg_t rep = {.type = ZP_MSG_SEEKED, .id = m->id};
    uint64_t from = m->present & ZP_B(offset) ? m->offset : 0;
    if (zp_plan_check(&p->plan, m->split, m->epoch, from, m->index, m->plan, rep.error,
                      sizeof rep.error)) {
        zp_warn("refused a SEEK of the trainer: %s", rep.error);
        rep.present = ZP_B(error);
        return zp_sock_send(p->ring_sock, NULL, &rep, NULL, NULL, 0, 0);
    }
    p->seek.pending = p->seeked = 1;
    p->seek.id = m->id, p->seek.split = m->split, p->seek.epoch = m->epoch;
    p->seek.from = from, p->seek.batch = m->index, p->seek.plan = m->plan;
    return 0;
}

static const zp_route_t RING_ROUTES[] = {{ZP_MSG_FREE, on_free}, {ZP_MSG_SEEK, on_seek}};

/* The trainer's FREEs and SEEKs; nothing it sends stops the prefetch. */
static int on_ring_sock(prefetch_t *p)
{
    int rc = zp_inbox_recv(&p->ring_in, p->ring_sock, ZMQ_DONTWAIT, &p->f, p);
    return rc == ZP_ESTOP || rc == ZP_EZMQ ? 0 : rc;
}

/* Sends the next batch when it is complete. Returns 1 when one was sent. */
static int emit_ready(prefetch_t *p, int *rc)
{
    if (p->next_emit >= p->next_slot)
        return 0;
    zp_batch_t *bt = batch_of(p, p->next_emit);
    if (!zp_batch_complete(bt))
        return 0;
    if (bt->skipped) {
        zp_slot_view_t v = view_of(p, bt);
        p->skipped += zp_batch_compact(bt, &v);
    }
    zp_msg_t m = {.type = ZP_MSG_BATCH, .slot = (uint64_t)bt->slot, .gen = bt->gen,
                  .nonce = p->ring->nonce, .split = (uint64_t)p->split, .epoch = (uint64_t)p->epoch,
                  .index = (uint64_t)bt->batch, .batches = (uint64_t)p->nbatches,
                  .n = (uint64_t)bt->n, .elems = (uint64_t)p->st->meta.elems,
                  .dtype = (uint64_t)p->st->meta.dtype, .present = ZP_B(dtype)};
    ZP_TIME_BEGIN(&p->st->timers, ZP_R_SEND);
    *rc = zp_sock_send(p->ring_sock, NULL, &m, NULL, NULL, 0, 0);
    ZP_TIME_END(&p->st->timers, ZP_R_SEND);
    zp_ring_publish(p->ring, (uint32_t)bt->slot);
    if (!*rc)
        zp_ringlog_add(&p->ringlog, p->st, 0, (uint32_t)bt->slot, bt->gen);
    bt->batch = -1;
    p->next_emit++;
    p->last_progress = zp_now_ns();
    p->st->stats.items += bt->n;
    return 1;
}

static void cache_record(prefetch_t *p, int64_t cached)
{
    zp_event_t ev;
    int64_t lookups = p->hits + p->misses;
    zp_event_record(p->st, &ev, ZP_REC_CACHE);
    zp_event_str(&ev, ZP_KEY(CACHE, split), zp_dataset_split_name(p->split));
    zp_event_int(&ev, ZP_KEY(CACHE, epoch), p->epoch);
    zp_event_int(&ev, ZP_KEY(CACHE, hits), p->hits);
    zp_event_int(&ev, ZP_KEY(CACHE, misses), p->misses);
    zp_event_int(&ev, ZP_KEY(CACHE, corrupt), p->corrupt);
    zp_event_int(&ev, ZP_KEY(CACHE, cached_at_start), cached);
    zp_event_num(&ev, ZP_KEY(CACHE, hit_rate), lookups ? (double)p->hits / (double)lookups : 0);
    zp_event_send(p->st, &ev);
    zp_info("%s epoch %lld: %lld hits, %lld misses, %lld corrupt", zp_dataset_split_name(p->split),
            (long long)p->epoch + 1, (long long)p->hits, (long long)p->misses, (long long)p->corrupt);
}

/* Makes the samples fetched so far visible in the cache before a phase
 * reads which keys it holds: the cache stage commits, then answers. */
static int sync_cache(prefetch_t *p)
{
    if (!p->cache_on || !p->unsynced)
        return 0;
    zp_msg_t m = {.type = ZP_MSG_SYNC, .id = ++p->fetch_seq};
    int rc = zp_sock_send(p->fetch, NULL, &m, NULL, NULL, 0, 0);
    int64_t give_up = zp_now_ns() + 10000000000ll;
    while (!rc && !zp_stop && p->synced != m.id && zp_now_ns() < give_up) {
        zmq_pollitem_t it = {p->fetch, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) > 0)
            rc = on_fetch_sock(p);
    }
    if (!rc && p->synced != m.id && !zp_stop)
        zp_warn("the cache stage did not confirm its commit in 10 s; going on");
    p->unsynced = 0;
    return rc;
}

/* The next batch has waited prefetch.fetch_timeout_s with no sample arriving
 * from the cache stage: names it and what it lacks, and stops the run (every
 * loader stuck, refused or gone; a cache stage that no longer answers). */
static int stalled(prefetch_t *p)
{
    zp_batch_t *bt = batch_of(p, p->next_emit);
    int64_t missing = 0, first = -1;
    for (int64_t i = 0; i < bt->n; i++)
        if (!bt->have[i] && !(bt->cached[i] && bt->slot < 0)) {
            first = first < 0 ? (int64_t)bt->indices[i] : first;
            missing++;
        }
    zp_error("%s epoch %lld, batch %lld of %lld: %lld of its %lld samples (sample %lld first) not "
             "answered by the cache stage for %lld s (prefetch.fetch_timeout_s), and no other "
             "sample came meanwhile: no loader delivers. See `zeus-pipe stat` (are loaders alive, "
             "busy, refused?) and logs/cache-0.log and logs/loader-*.log",
             zp_dataset_split_name(p->split), (long long)p->epoch + 1, (long long)p->next_emit + 1,
             (long long)p->nbatches, (long long)missing, (long long)bt->n, (long long)first,
             (long long)p->st->cfg.fetch_timeout_s);
    return ZP_ETIMEOUT;
}

/* The samples of the phase's epoch on this rank: from its first batch also
 * where the phase starts later (a resumed run, a seek), whose trainer counts
 * the batches before it as trained, and on rank 0 the entries before `from`
 * too (zp_coverage_resume). */
static int64_t phase_samples(prefetch_t *p)
{
    int64_t samples = p->st->instance == 0 ? p->from : 0, n;
    for (int64_t b = 0; b < p->nbatches; b++) {
        zp_sampler_batch(&p->sampler[p->split], p->st->cfg.batch_size,
                         p->st->mode == ZP_MODE_OVERFIT ? 0 : b, &n);
        samples += n;
    }
    return samples;
}

static int run_phase(prefetch_t *p)
{
    const zp_config_t *c = &p->st->cfg;
    zp_sampler_t *s = &p->sampler[p->split];
    int train = p->split == ZP_SPLIT_TRAIN;
    zp_sampler_epoch(s, (uint64_t)c->seed, p->split, p->epoch, train && c->shuffle,
                     p->st->instance, zp_stage_world(p->st), p->from); /* this rank's shard */
    p->nbatches = zp_sampler_batches(s, c->batch_size, train && c->drop_last);
    int64_t limit = train ? c->limit_train_batches : c->limit_test_batches;
    if (limit && (p->nbatches > limit || p->st->mode == ZP_MODE_OVERFIT))
        p->nbatches = limit; /* overfit: limit_train_batches steps of one batch */
    /* p->first_batch: a resumed run's or a SEEK's first phase starts there */
    p->first_batch = p->first_batch < p->nbatches ? p->first_batch : p->nbatches;
    p->next_fetch = p->next_slot = p->next_emit = p->first_batch;
    p->hits = p->misses = p->corrupt = p->skipped = 0;
    p->last_progress = zp_now_ns();
    int64_t cached = 0;
    int rc = sync_cache(p);
    if (!rc)
        rc = open_cache(p);
    if (rc)
        return rc;
    if (p->cache_on) {
        cached = zp_cachedb_present(&p->db, p->split, p->st->meta.n[p->split], p->present[p->split]);
        if (p->db.error)
            lmdb_error(p, "cannot list the cached samples", p->db.error);
    }
    while (!rc && !zp_stop && !p->seek.pending && p->next_emit < p->nbatches) {
        while (!rc && p->next_fetch < p->nbatches && p->next_fetch < p->next_emit + p->nflight)
            rc = start_batch(p);
        if (!rc)
            rc = assign_slots(p);
        if (rc || emit_ready(p, &rc))
            continue;
        /* Waiting: on the trainer when the next batch has no slot, else on loaders. */
        int on_trainer = p->next_slot == p->next_emit && zp_ring_free_count(p->ring) == 0;
        if (on_trainer)
            p->last_progress = zp_now_ns(); /* the trainer's pace is not the loaders' stall */
        else if (zp_now_ns() - p->last_progress > p->st->cfg.fetch_timeout_s * 1000000000ll)
            return stalled(p);
        zp_stage_stats_state(&p->st->stats, on_trainer ? ZP_ST_WAIT_OUT : ZP_ST_WAIT_IN);
        zmq_pollitem_t it[2] = {{p->fetch, 0, ZMQ_POLLIN, 0}, {p->ring_sock, 0, ZMQ_POLLIN, 0}};
        int n = zmq_poll(it, 2, 100);
        zp_stage_stats_state(&p->st->stats, ZP_ST_BUSY);
        if (n > 0 && (it[0].revents & ZMQ_POLLIN))
            rc = on_fetch_sock(p);
        if (!rc && n > 0 && (it[1].revents & ZMQ_POLLIN))
            rc = on_ring_sock(p);
        p->st->stats.queue = p->next_fetch - p->next_emit;
        zp_stage_stats_tick(p->st);
        zp_ringlog_tick(&p->ringlog, p->st, 0);
    }
    if (rc || zp_stop)
        return rc ? rc : ZP_ESTOP;
    if (p->seek.pending)
        return SEEKING;
    if (p->cache_on)
        cache_record(p, cached);
    zp_msg_t end = {.type = ZP_MSG_EPOCH_END, .split = (uint64_t)p->split,
                    .epoch = (uint64_t)p->epoch, .batches = (uint64_t)p->nbatches,
                    .n = (uint64_t)phase_samples(p), .skipped = (uint64_t)p->skipped,
                    .present = p->skipped ? ZP_B(skipped) : 0};
    return zp_sock_send(p->ring_sock, NULL, &end, NULL, NULL, 0, 0);
}

/* Keeps answering FREEs until the trainer holds no slot (it may still read them). */
static void drain(prefetch_t *p)
{
    int64_t until = zp_now_ns() + 2000000000;
    while (!zp_stop && !p->seek.pending && zp_ring_free_count(p->ring) < p->ring->depth &&
           zp_now_ns() < until) {
        zmq_pollitem_t it = {p->ring_sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) > 0)
            on_ring_sock(p);
    }
}

/* Forgets the batches prepared and not sent: their slots are free again, the
 * RESULTs of their fetches are dropped without a word when they come. */
static void abandon(prefetch_t *p)
{
    for (int64_t b = p->next_emit; b < p->next_fetch; b++) {
        zp_batch_t *bt = batch_of(p, b);
        if (bt->slot >= 0)
            zp_ring_unacquire(p->ring, (uint32_t)bt->slot);
        zp_batch_abandon(bt);
    }
    p->next_fetch = p->next_slot = p->next_emit;
    p->abandoned = p->fetch_seq;
}

/* Acts on the pending SEEK: the phase it names, its plan; SEEKED to the trainer. */
static int apply_seek(prefetch_t *p, zp_phase_t *ph)
{
    abandon(p);
    p->seek.pending = 0;
    p->plan.plan = (unsigned)p->seek.plan;
    *ph = (zp_phase_t){.split = (int)p->seek.split, .epoch = (int64_t)p->seek.epoch};
    p->first_batch = (int64_t)p->seek.batch;
    p->from = (int64_t)p->seek.from;
    zp_info("the trainer seeks %s epoch %llu, batch %llu; then plan %llu",
            zp_dataset_split_name(ph->split), (unsigned long long)ph->epoch + 1,
            (unsigned long long)p->seek.batch, (unsigned long long)p->seek.plan);
    zp_msg_t m = {.type = ZP_MSG_SEEKED, .id = p->seek.id};
    return zp_sock_send(p->ring_sock, NULL, &m, NULL, NULL, 0, 0);
}

/* Every phase sent: END. A trainer that has seeked, or a program's
 * (trainer.command), may seek still (until the run stops): 1 when it did,
 * with the seek pending. The built-in trainer's prefetch exits. */
static int end_of_run(prefetch_t *p, int *rc)
{
    zp_msg_t end = {.type = ZP_MSG_END};
    *rc = zp_sock_send(p->ring_sock, NULL, &end, NULL, NULL, 0, 0);
    drain(p);
    int listen = p->seeked || p->st->cfg.trainer_command.n > 0;
    while (!*rc && !zp_stop && listen && !p->seek.pending) {
        zmq_pollitem_t it = {p->ring_sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) > 0)
            on_ring_sock(p);
    }
    return !*rc && !zp_stop && p->seek.pending;
}

static int run(prefetch_t *p)
{
    /* a resumed run starts in its checkpoint's train epoch, after the batches
     * trained; after that epoch's train phase where it was over */
    zp_phase_t ph = {.split = ZP_SPLIT_TRAIN, .epoch = (int64_t)p->start.epoch};
    int over = zp_ckpt_train_done(&p->start);
    int more = zp_plan_next(&p->plan, ph, !over, &ph), rc = 0;
    int resumed = ph.split == ZP_SPLIT_TRAIN && ph.epoch == (int64_t)p->start.epoch;
    p->first_batch = resumed ? (int64_t)p->start.batch : 0;
    p->from = resumed ? (int64_t)p->start.from : 0;
    for (;;) {
        if (p->seek.pending || (!more && end_of_run(p, &rc))) {
            if ((rc = apply_seek(p, &ph)))
                return rc;
        } else if (!more) {
            return rc;
        }
        p->split = ph.split, p->epoch = ph.epoch;
        rc = run_phase(p);
        if (rc == SEEKING) {
            more = 1;
            continue;
        }
        if (rc)
            return rc;
        p->first_batch = p->from = 0;
        more = zp_plan_next(&p->plan, ph, 0, &ph);
    }
}

/* The ring, its pages allocated: a /dev/shm that filled up since the
 * supervisor's check is reported here, with what to do, instead of a SIGBUS. */
static int open_ring(prefetch_t *p, const char *name)
{
    zp_stage_t *st = p->st;
    uint32_t depth = (uint32_t)st->cfg.depth;
    int rc = zp_ring_layout(&p->lay, st->cfg.batch_size, st->meta.sample_bytes);
    if (!rc)
        rc = zp_ring_create(&p->ring, name, depth, p->lay.bytes);
    if (rc == -ENOSPC || rc == -ENOMEM) {
        char room[256] = "";
        zp_ring_shm_room(zp_ring_bytes(depth, p->lay.bytes), room, sizeof room);
        zp_error("shared memory %s: %u slots of %.1f MiB: posix_fallocate: %s%s%s; %s", name,
                 (unsigned)depth, p->lay.bytes / 1048576.0, strerror(-rc), room[0] ? ": " : "",
                 room, ZP_SHM_ADVICE);
    } else if (rc) {
        zp_error("shared memory %s (%u slots of %zu bytes): %s", name, (unsigned)depth,
                 p->lay.bytes, zp_strerror(rc));
    }
    return rc;
}

/* Opens the cache's hit path: the LMDB of this node (under Slurm, every
 * node's leader keeps one at cache.path on its own disk). An LMDB error is
 * counted and logged, and the next phase tries again (a reader table full of
 * live readers frees up); 0 or a fatal error. */
static int open_cache(prefetch_t *p)
{
    zp_stage_t *st = p->st;
    if (p->cache_on || !st->cfg.cache_enabled)
        return 0;
    char err[512];
    int rc = zp_cachedb_open(&p->db, &st->cfg, &st->meta, 1, err, sizeof err);
    if (rc) {
        p->cache_failed = 1;
        zp_warn_limited(&st->stats.lmdb_errors, "%s; reading no samples from the cache until it "
                        "opens (tried again every epoch)", err);
        return 0;
    }
    if (!p->readers && (rc = zp_readers_create(&p->readers, (int)st->cfg.readers)))
        return rc;
    st->stats.helpers = zp_readers_count(p->readers);
    p->whole = zp_augment_whole(&st->cfg);
    zp_augment_rrc_init(&p->rrc, &st->cfg);
    for (int s = 0; s < ZP_SPLITS; s++) {
        p->kept[s] = zp_dataset_cached_meta(&st->meta, s);
        p->vfp[s] = zp_cachedb_value_fp(&st->cfg, &st->meta, s);
    }
    if (st->meta.augment[0] == ZP_AUG_STEP_FIELD || st->meta.augment[1] == ZP_AUG_STEP_FIELD) {
        snprintf(err, sizeof err, "its fields differ from the run's description");
        if (zp_augment_field_init(&p->fa, &st->cfg, &st->meta.cached, err, sizeof err) ||
            p->fa.out.record_bytes != st->meta.sample_bytes) {
            zp_error("the run's augmented field: %s", err);
            return ZP_ECONFIG;
        }
    }
    if (p->whole && st->meta.dtype == ZP_DTYPE_F32 && !p->lut &&
        !(p->lut = zp_dataset_normalize_lut(&st->cfg, st->meta.shape[0])))
        return ZP_ENOMEM;
    for (int s = 0; s < ZP_SPLITS; s++)
        if (!p->present[s] && !(p->present[s] = malloc((size_t)(st->meta.n[s] + 8) / 8)))
            return ZP_ENOMEM;
    if (p->cache_failed)
        zp_info("%s: open; reading hits from the cache again", st->cfg.cache_path);
    p->cache_on = 1;
    zp_cachedb_willneed(&p->db);
    return 0;
}

static int open_all(prefetch_t *p)
{
    zp_stage_t *st = p->st;
    if (st->mode == ZP_MODE_RESUME) {
        char path[PATH_MAX + 64], err[600];
        zp_ckpt_path(path, sizeof path, zp_stage_run0(st), "last");
        int rc = zp_ckpt_read(path, &p->start, NULL, NULL, err, sizeof err);
        if (rc) {
            zp_error("cannot resume: %s", err);
            return rc;
        }
    }
    char name[128], ep[ZP_ENDPOINT_MAX + 16];
    zp_ring_name(name, sizeof name, st->run_dir, st->instance);
    int rc = zp_resources_add(st->run_dir, "shm", name); /* for the cleanup after a crash */
    if (!rc)
        rc = open_ring(p, name);
    if (rc)
        return rc;
    p->nflight = (int)(st->cfg.depth + st->cfg.window);
    size_t bs = (size_t)st->cfg.batch_size;
    for (int i = 0; i < p->nflight; i++)
        if ((rc = zp_batch_create(&p->inflight[i], bs)))
            return rc;
    if (!(p->scratch = malloc(bs * 4)) || !(p->order = malloc(bs * 8)) ||
        !(p->vals = malloc(bs * sizeof(MDB_val))) || !(p->status = malloc(bs)) ||
        !(p->why = malloc(bs * sizeof(char *))))
        return ZP_ENOMEM;
    if ((rc = open_cache(p)))
        return rc;
    for (int s = 0; s < ZP_SPLITS; s++)
        if ((rc = zp_sampler_init(&p->sampler[s], st->meta.n[s])))
            return rc;
    zp_plan_init(&p->plan, st);
    if (st->mode == ZP_MODE_RESUME) {
        char path[PATH_MAX + 64], err[800];
        zp_ckpt_path(path, sizeof path, zp_stage_run0(st), "last");
        int64_t n = st->meta.n[ZP_SPLIT_TRAIN];
        if ((rc = zp_ckpt_check(&p->start, path, &st->cfg, n, zp_stage_world(st), err, sizeof err))) {
            zp_error("cannot resume: %s", err);
            return rc;
        }
        zp_ckpt_regroup(&p->start, &st->cfg, n, zp_stage_world(st));
        zp_info("resuming at epoch %llu, batch %llu of shards from entry %llu",
                (unsigned long long)p->start.epoch + 1, (unsigned long long)p->start.batch,
                (unsigned long long)p->start.from);
    }
    if (zp_stage_socket(st, &p->fetch, ZMQ_DEALER, zp_names_sock(ZP_SOCK_FETCH), 0, 0))
        return ZP_EZMQ;
    char ring[32];
    zp_names_ring_sock(ring, sizeof ring, st->instance);
    if (zp_stage_endpoint(st, ring, ep, sizeof ep) ||
        zp_sock_create(&p->ring_sock, st->zctx, ZMQ_PAIR, ep, 1, 1000))
        return ZP_EZMQ;
    return 0;
}

static void close_all(prefetch_t *p)
{
    zp_ringlog_tick(&p->ringlog, p->st, 1);
    zp_frames_free(&p->f);
    zp_sock_destroy(&p->fetch);
    zp_sock_destroy(&p->ring_sock);
    zp_ring_destroy(&p->ring);
    for (int s = 0; s < ZP_SPLITS; s++)
        zp_sampler_free(&p->sampler[s]);
    for (int i = 0; i < INFLIGHT_MAX; i++)
        zp_batch_destroy(&p->inflight[i]);
    free(p->scratch);
    free(p->lut);
    free(p->order);
    free(p->vals);
    free(p->status);
    free(p->why);
    zp_readers_destroy(&p->readers);
    for (int s = 0; s < ZP_SPLITS; s++)
        free(p->present[s]);
    zp_cachedb_close(&p->db);
}

int zp_prefetch_main(zp_stage_t *st)
{
    static prefetch_t p;
    p.st = st;
    zp_frames_init(&p.f);
    p.fetch_in = ZP_STAGE_INBOX(st, FETCH_ROUTES, 0, "the cache stage", &p.dropped);
    p.ring_in = ZP_STAGE_INBOX(st, RING_ROUTES, 0, "the trainer", &p.dropped);
    int rc = open_all(&p);
    if (!rc) {
        zp_info("ring of %u slots x %zu bytes, %d batches in flight; %lld train, %lld test samples",
                p.ring->depth, p.ring->slot_bytes, p.nflight, (long long)st->meta.n[0],
                (long long)st->meta.n[1]);
        rc = run(&p);
    }
    if (rc == ZP_EZMQ && zp_stop)
        rc = ZP_ESTOP; /* a ZeroMQ call the supervisor's TERM interrupted: the stop, not a fault */
    if (rc && rc != ZP_ESTOP)
        zp_error("stopped: %s", zp_strerror(rc));
    close_all(&p);
    return rc == 0 || rc == ZP_ESTOP ? 0 : 1;
}

/* client.c — the public API of zeus_pipe.h: a user's program as rank r's
 * trainer. A client is a stage named "trainer" of the run (its config,
 * dataset description, event socket, stats and timers: stage.h), the ring's
 * consumer side (consumer.c, the built-in trainer's too) and one epoch proof
 * per split (coverage.c, whose epoch_end record the built-in trainer sends
 * too), summed over the ranks at each epoch's end (comm.c, as the built-in
 * trainer's ranks sum theirs). Only zp_client_* leave libzeuspipe.so
 * (scripts/zeuspipe.map). */
#define _GNU_SOURCE
#include "pipeline/include/zeus_pipe.h"
#include "pipeline/image/augment.h"
#include "pipeline/ring/comm.h"
#include "pipeline/ring/consumer.h"
#include "pipeline/ring/coverage.h"
#include "pipeline/dataset/dataset.h"
#include "pipeline/source/source.h"
#include "pipeline/stage/event.h"
#include "pipeline/base/log.h"
#include "pipeline/base/names.h"
#include "pipeline/base/resources.h"
#include "pipeline/dataset/sampler.h"
#include "schemas/errors.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ZP_CLIENT_LOG_MAX 32

/* The public header names the codes of schemas/errors.h that this API
 * returns: the same numbers, or a program compares against the wrong one. */
#define ZP_CLIENT_SAME_CODE(name)                                                    \
    _Static_assert((int)ZP_CLIENT_##name == (int)ZP_##name,                          \
                   "zeus_pipe.h's ZP_CLIENT_" #name " is schemas/errors.h's ZP_" #name)
ZP_CLIENT_SAME_CODE(EINVAL);
ZP_CLIENT_SAME_CODE(ECONFIG);
ZP_CLIENT_SAME_CODE(EPROTO);
ZP_CLIENT_SAME_CODE(EDATA);
ZP_CLIENT_SAME_CODE(ESTALE);
ZP_CLIENT_SAME_CODE(EFULL);
ZP_CLIENT_SAME_CODE(ENOMEM);
ZP_CLIENT_SAME_CODE(EZMQ);
ZP_CLIENT_SAME_CODE(ESTOP);
ZP_CLIENT_SAME_CODE(ETIMEOUT);
ZP_CLIENT_SAME_CODE(EGPU);

struct zp_client {
    zp_stage_t st;        /* name "trainer", instance: the rank */
    zp_dataset_t *ds;     /* the run's dataset description; owned (st.meta points into it) */
    zp_consumer_t ring;
    zp_coverage_t acc[ZP_SPLITS];
    zp_comm_t *comm;      /* the epoch sums over the ranks; one rank sums alone */
    int world;
    int opened;           /* st was opened (1), and the ring's consumer too (2) */
    int mark;             /* RUN/logs/trainer-R.attached, held while attached; -1: none */
    int64_t step;         /* train batches received */
    int had_batch;         /* a batch (of either split) was received: the ring is this run's */
    zp_client_batch_t *out; /* where a route writes what came; during zp_client_next */
    int kind;             /* what came: ZP_CLIENT_*, 0 while nothing */
    uint64_t seek_seq;    /* the id of the last SEEK sent */
    int seek_split;       /* and where it goes */
    uint64_t seek_epoch, seek_from, seek_batch;
    int64_t seek_repeats; /* its epoch's samples trained again (rank 0 counts them) */
    int64_t repeats[ZP_SPLITS]; /* zp_client_resume_ranks's, for the split's next seek */
    int seeking;          /* what comes before its SEEKED is released unread */
    int seek_refused;     /* the prefetch answered it with an error: zp_client_next says so */
    int seeked;           /* a SEEK was taken: the prefetch listens for more after END */
    int ended;            /* END came (not before a SEEKED) */
    int64_t train_epochs; /* train epochs read to their EPOCH_END: the last one's number + 1 */
    int between_epochs;   /* the last zp_client_next gave an EPOCH_END: a loop may end here */
    zp_client_field_t fields[ZP_FIELDS_MAX]; /* st.meta.fields, names pointing into it */
    int64_t stop_checked; /* ns: when RUN/stopped was last looked for */
    zp_augment_t aug;     /* dataset.augment.* (where: trainer): zp_client_augment */
    char error[PATH_MAX + 512]; /* the sentence of the last error zp_client_next returned */
};

int zp_client_api_version(void) { return ZP_CLIENT_API_VERSION; }

const char *zp_client_strerror(int rc) { return zp_strerror(rc); }

/* As the prefetch counts a phase's batches (run_phase), without a resume's
 * batches already trained. */
/* This rank's batches of `split` in shards from entry `from`, limits applied. */
static int64_t batches_from(const zp_client_t *c, int split, int64_t from)
{
    const zp_config_t *cfg = &c->st.cfg;
    int train = split == ZP_CLIENT_TRAIN;
    int64_t n = zp_sampler_shard_batches(c->st.meta.n[split] - from, c->st.instance, c->world,
                                         cfg->batch_size, train && cfg->drop_last);
    int64_t limit = train ? cfg->limit_train_batches : cfg->limit_test_batches;
    return limit && n > limit ? limit : n;
}

int64_t zp_client_batches(const zp_client_t *c, int split)
{
    if (!c || split < ZP_CLIENT_TRAIN || split > ZP_CLIENT_TEST)
        return ZP_EINVAL;
    return batches_from(c, split, 0);
}

static void say(char *err, size_t len, const char *fmt, ...)
{
    if (!err || !len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

static void to_view(const zp_client_t *c, const zp_msg_t *m, const zp_batch_view_t *v,
                    zp_client_batch_t *b)
{
    const zp_dataset_meta_t *meta = &c->st.meta;
    *b = (zp_client_batch_t){.kind = ZP_CLIENT_BATCH, .split = v->split, .epoch = v->epoch,
                             .index = v->index, .batches = m->batches, .n = v->n,
                             .indices = v->idx, .labels = v->labels, .data = v->data,
                             .dtype = meta->dtype == ZP_DTYPE_U8 ? ZP_CLIENT_U8 : ZP_CLIENT_F32,
                             .c = meta->shape[0], .h = meta->shape[1], .w = meta->shape[2],
                             .sample_bytes = meta->sample_bytes, .slot = m->slot, .gen = m->gen,
                             .fields = c->fields, .nfields = meta->fields.n};
}

/* st.meta.fields as the API gives them. */
static void fill_fields(zp_client_t *c)
{
    const zp_fields_t *fs = &c->st.meta.fields;
    for (int i = 0; i < fs->n; i++) {
        const zp_field_t *f = &fs->f[i];
        zp_client_field_t *o = &c->fields[i];
        *o = (zp_client_field_t){.name = f->name, .dtype = f->dtype, .ndim = f->ndim,
                                 .offset = f->offset, .bytes = f->bytes,
                                 .normalize = zp_source_ops(c->st.cfg.dataset_source)->python &&
                                              f->dtype == ZP_FT_U8 &&
                                              !strcmp(f->name, c->st.cfg.py_normalize)};
        memcpy(o->shape, f->shape, sizeof o->shape);
    }
}

int zp_client_fields(const zp_client_t *c, const zp_client_field_t **fields, int *item)
{
    if (!c || !fields)
        return ZP_EINVAL;
    *fields = c->fields;
    if (item)
        *item = c->st.meta.fields.item == ZP_ITEM_DICT ? ZP_CLIENT_ITEM_DICT : ZP_CLIENT_ITEM_TUPLE;
    return c->st.meta.fields.n;
}

static int route_batch(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    zp_client_t *c = ctx;
    zp_batch_view_t v;
    int rc = zp_consumer_view(&c->ring, m, &v);
    if (rc)
        return rc > 0 ? 0 : rc; /* 1: dropped, counted, its slot given back */
    if (c->seeking) /* sent before the prefetch heard the seek */
        return zp_consumer_release(&c->ring, m->slot, m->gen);
    zp_coverage_add(&c->acc[v.split], v.idx, v.n);
    to_view(c, m, &v, c->out);
    c->step += v.split == ZP_SPLIT_TRAIN;
    c->had_batch = 1;
    c->kind = ZP_CLIENT_BATCH;
    return 0;
}

/* The epoch's counts summed over the ranks (every rank waits here for the
 * others' epoch end, up to trainer.comm_timeout_s), then the whole epoch's
 * proof to the logger (rank 0, as the built-in trainer's leader), and a check
 * that the sampler's count arrived. The caller is told this rank's counts. */
static int route_epoch_end(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    zp_client_t *c = ctx;
    zp_timers_t *tm = &c->st.timers;
    int split = (int)m->split;
    if (c->seeking)
        return 0; /* the end of a phase the seek left */
    zp_coverage_t *a = &c->acc[split];
    int64_t mine = a->samples, expected = (int64_t)(m->n - m->skipped);
    uint64_t n = m->n, skipped = m->skipped;
    if (zp_timer_is_open(tm, ZP_R_IO))
        ZP_TIME_END(tm, ZP_R_IO);
    int rc = zp_coverage_sum_ranks(a, c->comm, &n, &skipped);
    if (rc)
        return rc;
    double dt = a->start_ns ? (zp_now_ns() - a->start_ns) / 1e9 : 0;
    if (zp_timer_is_open(tm, ZP_R_EPOCH))
        ZP_TIME_END(tm, ZP_R_EPOCH);
    ZP_TIME_BEGIN(tm, ZP_R_EPOCH); /* the next epoch runs from the end of this one */
    if (c->st.instance == 0) {
        zp_epoch_info_t e = {split, m->epoch, c->st.cfg.epochs, c->step, (int64_t)n,
                             (int64_t)skipped, 0};
        zp_coverage_record(&c->st, a, &e, dt);
    }
    if (!zp_coverage_exact(a, n, skipped))
        zp_error("%s epoch %llu: %lld samples (%lld distinct, %lld repeats after a resume) and "
                 "%llu skipped, but the sampler sent %llu", zp_dataset_split_name(split),
                 (unsigned long long)m->epoch, (long long)a->samples, (long long)a->distinct,
                 (long long)a->repeats, (unsigned long long)skipped,
                 (unsigned long long)n);
    *c->out = (zp_client_batch_t){.kind = ZP_CLIENT_EPOCH_END, .split = split,
                                  .epoch = m->epoch, .samples = mine, .expected = expected};
    zp_coverage_end(a);
    if (split == ZP_SPLIT_TRAIN)
        c->train_epochs = (int64_t)m->epoch + 1;
    c->kind = ZP_CLIENT_EPOCH_END;
    return 0;
}

static int route_end(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    zp_client_t *c = ctx;
    if (c->seeking)
        return 0; /* the prefetch goes on from the seek's position */
    c->kind = ZP_CLIENT_END;
    c->ended = 1;
    return 0;
}

/* The prefetch heard the latest SEEK: what follows is from its position. */
static int route_seeked(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    zp_client_t *c = ctx;
    if (!c->seeking || m->id != c->seek_seq)
        return 0; /* an earlier seek's answer: the latest one's is still to come */
    c->seeking = 0;
    if (m->present & ZP_B(error)) {
        zp_error("the prefetch refused the seek: %s", m->error);
        c->seek_refused = 1;
        return 0;
    }
    c->seeked = 1, c->ended = 0;
    /* the phase's record counts its batches before the seek's as trained */
    return zp_coverage_resume(&c->acc[c->seek_split], &c->st.cfg, c->seek_split, c->seek_epoch,
                              c->st.instance, c->world, (int64_t)c->seek_from,
                              (int64_t)c->seek_batch, c->seek_repeats);
}

static const zp_route_t routes[] = {
    {ZP_MSG_BATCH, route_batch},
    {ZP_MSG_EPOCH_END, route_epoch_end},
    {ZP_MSG_END, route_end},
    {ZP_MSG_SEEKED, route_seeked},
};

/* The run's config and dataset description, as `zeus-pipe stage` reads them. */
static int read_run(zp_client_t *c, const char *run_dir, char *err, size_t len)
{
    zp_stage_t *st = &c->st;
    char path[PATH_MAX + 32];
    if (!run_dir || !realpath(run_dir, st->run_dir)) {
        say(err, len, "%s: no such run directory (give the folder `zeus-pipe up` made: "
            "run.dir/NAME)", run_dir ? run_dir : "(null)");
        return ZP_EINVAL;
    }
    snprintf(path, sizeof path, "%s/config.yaml", st->run_dir);
    if (access(path, R_OK)) {
        say(err, len, "%s: no config.yaml: not a zeus-pipe run directory (give the folder "
            "`zeus-pipe up` made: run.dir/NAME)", st->run_dir);
        return ZP_EINVAL;
    }
    if (zp_config_load_run(&st->cfg, path, err, len))
        return ZP_ECONFIG;
    int rc = zp_dataset_read(&c->ds, st->run_dir, err, len);
    if (rc == -ENOENT) /* a run directory made by hand: probed here, as a stage does */
        rc = zp_source_probe(&c->ds, &st->cfg, err, len);
    if (rc)
        return rc;
    st->meta = c->ds->meta;
    fill_fields(c);
    return 0;
}

/* Maps rank's ring once it exists (the prefetch creates it), for up to
 * timeout_ms. A ring of a previous run of the same name is replaced at the
 * first BATCH, whose nonce names this run's (consumer.c). */
static int wait_ring(zp_client_t *c, int timeout_ms, char *err, size_t len)
{
    char name[128];
    zp_ring_name(name, sizeof name, c->st.run_dir, c->st.instance);
    int64_t give_up = zp_now_ns() + (int64_t)timeout_ms * 1000000;
    int rc;
    while ((rc = zp_ring_map(&c->ring.ring, name, 0)) == -ENOENT || rc == ZP_EPROTO) {
        if (timeout_ms >= 0 && zp_now_ns() >= give_up)
            break;
        usleep(10000);
    }
    if (rc == -ENOENT || rc == ZP_EPROTO)
        say(err, len, "%s: rank %d's ring %s is not there after %d ms: is the run's prefetch "
            "started (`zeus-pipe up`)? Attach again, or with a longer timeout", c->st.run_dir,
            c->st.instance, name, timeout_ms);
    else if (rc)
        say(err, len, "%s: rank %d's ring %s: %s", c->st.run_dir, c->st.instance, name,
            zp_strerror(rc));
    else if (c->ring.lay.bytes > c->ring.ring->slot_bytes)
        say(err, len, "%s: ring %s has slots of %zu bytes, but a batch of this run needs %zu: "
            "the ring is another run's", c->st.run_dir, name, c->ring.ring->slot_bytes,
            c->ring.lay.bytes), rc = ZP_EPROTO;
    return rc;
}

static int attach(zp_client_t *c, const char *run_dir, int rank, int timeout_ms, char *err,
                  size_t len)
{
    zp_stage_t *st = &c->st;
    st->name = zp_names_stage(ZP_STAGE_TRAINER);
    st->instance = rank;
    int rc = read_run(c, run_dir, err, len);
    if (rc)
        return rc;
    if ((rc = zp_stage_slurm(st))) {
        say(err, len, "%s: the Slurm environment of this task is not one zeus-pipe can use "
            "(see the error above)", st->run_dir);
        return rc;
    }
    c->world = zp_stage_world(st);
    if (rank < 0 || rank >= c->world) {
        say(err, len, "%s: rank %d is out of range: the run has %d trainer rank%s (0..%d; "
            "trainer.gpus or the Slurm tasks)", st->run_dir, rank, c->world,
            c->world == 1 ? "" : "s", c->world - 1);
        return ZP_EINVAL;
    }
    long holder = 0;
    c->mark = zp_resources_attach_hold(st->run_dir, rank, &holder);
    if (c->mark == -EBUSY) {
        char pid[32] = "";
        if (holder > 0)
            snprintf(pid, sizeof pid, " (pid %ld)", holder);
        say(err, len, "%s: rank %d is already attached by another program%s: one program per "
            "rank; attach this one as another rank, or stop that one first", st->run_dir, rank,
            pid);
        return ZP_EINVAL;
    } /* another error (a read-only run): unmarked */
    for (int s = 0; s < ZP_SPLITS && !rc; s++)
        rc = zp_coverage_init(&c->acc[s], st->meta.n[s]);
    if (rc) {
        say(err, len, "%s: no memory for the epoch proofs", st->run_dir);
        return rc;
    }
    if (st->cfg.aug_where == ZP_AUG_IN_TRAINER &&
        zp_augment_init(&c->aug, &st->cfg, (int)st->meta.shape[0], (int)st->meta.shape[1],
                        (int)st->meta.shape[2])) {
        say(err, len, "%s: no memory for dataset.augment", st->run_dir);
        return ZP_ENOMEM;
    }
    c->opened = 1;
    if (!(rc = zp_stage_open(st)))
        c->opened = 2, rc = zp_consumer_open(&c->ring, st, rank, routes,
                                             (int)(sizeof routes / sizeof *routes));
    if (rc) {
        say(err, len, "%s: cannot open rank %d's sockets: %s", st->run_dir, rank, zp_strerror(rc));
        return rc;
    }
    /* a user's program handles its own signals: Ctrl-C ends a wait for the ranks */
    if ((rc = zp_comm_create(&c->comm, st, rank, c->world, ZP_COMM_SIGNAL_STOPS))) {
        say(err, len, "%s: rank %d of %d cannot open the ranks' socket %s: %s (see the error "
            "above)", st->run_dir, rank, c->world, zp_names_sock(ZP_SOCK_COMM), zp_strerror(rc));
        return rc;
    }
    return wait_ring(c, timeout_ms, err, len);
}

zp_client_t *zp_client_attach(const char *run_dir, int rank, int timeout_ms, char *err,
                              size_t errlen)
{
    zp_client_t *c = calloc(1, sizeof *c);
    if (!c) {
        say(err, errlen, "zp_client_attach: out of memory");
        return NULL;
    }
    c->mark = -1;
    zp_log_init(zp_names_stage(ZP_STAGE_TRAINER), rank);
    if (attach(c, run_dir, rank, timeout_ms, err, errlen))
        zp_client_destroy(&c);
    return c;
}

/* 1 when the run's supervisor stopped it before it ended (RUN/stopped),
 * its sentence in c->error; looked for at most every 200 ms. */
static int stopped(zp_client_t *c)
{
    int64_t now = zp_now_ns();
    if (now - c->stop_checked < 200000000)
        return 0;
    c->stop_checked = now;
    char why[400];
    if (!zp_resources_stopped(c->st.run_dir, why, sizeof why))
        return 0;
    snprintf(c->error, sizeof c->error, "%s: no more batches will come (run %s)", why,
             c->st.run_dir);
    return 1;
}

const char *zp_client_error(const zp_client_t *c)
{
    return c ? c->error : "";
}

int zp_client_next(zp_client_t *c, zp_client_batch_t *b, int timeout_ms)
{
    zp_timers_t *tm = &c->st.timers;
    if (zp_timer_is_open(tm, ZP_R_BATCH)) /* a batch not released: its time ends here */
        ZP_TIME_END(tm, ZP_R_BATCH);
    /* as the built-in trainer's: an epoch runs from the run's first batch or
     * the end of the previous epoch, and io is the wait for a batch inside one
     * (a timeout of 0 only looks, as a program that fetches ahead does: no wait) */
    if (timeout_ms && zp_timer_is_open(tm, ZP_R_EPOCH) && !zp_timer_is_open(tm, ZP_R_IO))
        ZP_TIME_BEGIN(tm, ZP_R_IO);
    int64_t give_up = zp_now_ns() + (int64_t)timeout_ms * 1000000;
    c->out = b, c->kind = 0, c->error[0] = 0;
    /* a stopped run hands out nothing more, even what it had prepared */
    int rc = stopped(c) ? ZP_ESTOP : 0;
    while (!c->kind && !c->seek_refused && rc >= 0) {
        int64_t left = timeout_ms < 0 ? 100 : (give_up - zp_now_ns()) / 1000000;
        rc = zp_consumer_wait(&c->ring, c, left < 0 ? 0 : left > 100 ? 100 : (int)left);
        if (!c->kind && rc >= 0 && stopped(c))
            rc = ZP_ESTOP;
        if (timeout_ms >= 0 && zp_now_ns() >= give_up)
            break;
    }
    c->out = NULL;
    zp_stage_stats_state(&c->st.stats, ZP_ST_BUSY);
    if (c->seek_refused) {
        c->seek_refused = 0;
        return ZP_EINVAL;
    }
    if (rc < 0 || !c->kind) {
        c->between_epochs &= rc >= 0; /* an error is no place to end a loop */
        return rc < 0 ? rc : 0;       /* io stays open: the program waits again */
    }
    c->between_epochs = c->kind == ZP_CLIENT_EPOCH_END;
    if (zp_timer_is_open(tm, ZP_R_IO))
        ZP_TIME_END(tm, ZP_R_IO);
    if (c->kind == ZP_CLIENT_BATCH) {
        if (!zp_timer_is_open(tm, ZP_R_EPOCH))
            ZP_TIME_BEGIN(tm, ZP_R_EPOCH);
        ZP_TIME_BEGIN(tm, ZP_R_BATCH);
    }
    return c->kind;
}

int zp_client_augment(zp_client_t *c, const zp_client_batch_t *b, const float *in, float *out)
{
    if (!c || !b || b->kind != ZP_CLIENT_BATCH || (b->n && (!in || !out)))
        return ZP_EINVAL;
    if (!c->aug.on || b->split != ZP_CLIENT_TRAIN)
        return 0;
    size_t elems = (size_t)c->st.meta.elems;
    ZP_TIME_BEGIN(&c->st.timers, ZP_R_AUGMENT);
    for (int64_t i = 0; i < b->n; i++)
        zp_augment(&c->aug, b->epoch, b->indices[i], in + (size_t)i * elems, out + (size_t)i * elems);
    ZP_TIME_END(&c->st.timers, ZP_R_AUGMENT);
    return 1;
}

int zp_client_set_step(zp_client_t *c, int64_t step)
{
    if (!c || step < 0)
        return ZP_EINVAL;
    c->step = step;
    return 0;
}

int zp_client_any(zp_client_t *c, int mine)
{
    if (!c)
        return ZP_EINVAL;
    double any = mine != 0;
    int rc = zp_comm_sum(c->comm, NULL, 0, &any, 1);
    if (rc)
        snprintf(c->error, sizeof c->error, "a sum over the ranks: %s", zp_strerror(rc));
    return rc ? rc : any > 0;
}

int zp_client_run_info(const zp_client_t *c, zp_client_run_t *out)
{
    if (!c || !out)
        return ZP_EINVAL;
    const zp_config_t *cfg = &c->st.cfg;
    *out = (zp_client_run_t){.seed = (uint64_t)cfg->seed, .world = c->world,
                             .rank = c->st.instance, .batch_size = cfg->batch_size,
                             .epochs = cfg->epochs, .shuffle = !!cfg->shuffle,
                             .drop_last = !!cfg->drop_last, .classes = c->st.meta.classes,
                             .augment = c->aug.on};
    for (int s = 0; s < ZP_SPLITS; s++) {
        out->samples[s] = c->st.meta.n[s];
        out->batches[s] = zp_client_batches(c, s);
    }
    return 0;
}

/* Whether the prefetch can go to the position: as plan.c checks it there. */
static int seek_check(const zp_client_t *c, int split, uint64_t epoch, uint64_t from,
                      uint64_t batch, unsigned plan, char *err, size_t len)
{
    const char *name = split == ZP_CLIENT_TRAIN ? "train" : "test";
    int known = split == ZP_CLIENT_TRAIN || split == ZP_CLIENT_TEST;
    int64_t batches = known ? zp_client_batches(c, split) : 0;
    int64_t here = known && from <= (uint64_t)c->st.meta.n[split]
                       ? batches_from(c, split, (int64_t)from) : 0;
    if (split != ZP_CLIENT_TRAIN && split != ZP_CLIENT_TEST)
        say(err, len, "zp_client_seek: split %d is not ZP_CLIENT_TRAIN (0) or ZP_CLIENT_TEST (1)",
            split);
    else if (c->st.meta.n[split] == 0 || batches <= 0)
        say(err, len, "zp_client_seek: the run has no %s batches", name);
    else if (epoch >= (uint64_t)zp_config_epochs(&c->st.cfg))
        say(err, len, "zp_client_seek: %s epoch %llu is past the run's last (epochs 0..%lld: "
            "trainer.epochs %lld)", name, (unsigned long long)epoch,
            (long long)c->st.cfg.epochs - 1, (long long)c->st.cfg.epochs);
    else if (from > (uint64_t)c->st.meta.n[split])
        say(err, len, "zp_client_seek: %s epoch %llu from entry %llu: its permutation has "
            "entries 0..%lld", name, (unsigned long long)epoch, (unsigned long long)from,
            (long long)c->st.meta.n[split]);
    else if (batch >= (uint64_t)here && (batch || !from))
        say(err, len, "zp_client_seek: batch %llu of %s epoch %llu: an epoch of %s has batches "
            "0..%lld on rank %d%s", (unsigned long long)batch, name, (unsigned long long)epoch,
            name, (long long)here - 1, c->st.instance, from ? " from that entry" : "");
    else if (plan & ~7u)
        say(err, len, "zp_client_seek: plan %u: a plan is ZP_CLIENT_PLAN_* bits (1 train, 2 "
            "test, 4 test first)", plan);
    else if (c->ended && !c->seeked && c->st.cfg.trainer_command.n == 0)
        say(err, len, "zp_client_seek: the run has ended (its last epoch was sent) and its "
            "prefetch no longer listens");
    else
        return 0;
    return ZP_EINVAL;
}

int zp_client_seek(zp_client_t *c, int split, uint64_t epoch, uint64_t batch, unsigned plan,
                   char *err, size_t errlen)
{
    return zp_client_seek_from(c, split, epoch, 0, batch, plan, err, errlen);
}

int64_t zp_client_resume_entry(const zp_client_t *c, int split, uint64_t from, int world,
                               uint64_t batch)
{
    if (!c || split < 0 || split >= ZP_SPLITS || world < 1 || world > (1 << 16) ||
        from > (uint64_t)c->st.meta.n[split])
        return ZP_EINVAL;
    int64_t repeats, rest = c->st.meta.n[split] - (int64_t)from;
    return zp_sampler_position((int64_t)from, rest, world, c->st.cfg.batch_size,
                               split == ZP_SPLIT_TRAIN && c->st.cfg.drop_last, NULL,
                               batch > (uint64_t)rest ? rest : (int64_t)batch, &repeats);
}

int64_t zp_client_resume_ranks(zp_client_t *c, int split, uint64_t from, int world,
                               uint64_t batch_size, const uint64_t *batches, int64_t *repeats)
{
    if (!c || !batches || !repeats || split < 0 || split >= ZP_SPLITS || world < 1 ||
        world > (1 << 16) || batch_size < 1 || batch_size > UINT32_MAX ||
        from > (uint64_t)c->st.meta.n[split])
        return ZP_EINVAL;
    int64_t rest = c->st.meta.n[split] - (int64_t)from;
    int64_t *k = malloc((size_t)world * sizeof *k);
    if (!k)
        return ZP_ENOMEM;
    for (int r = 0; r < world; r++) /* past its shard's end is its shard done */
        k[r] = batches[r] > (uint64_t)rest ? rest : (int64_t)batches[r];
    int64_t entry = zp_sampler_position((int64_t)from, rest, world, (int64_t)batch_size,
                                        split == ZP_SPLIT_TRAIN && c->st.cfg.drop_last, k, 0,
                                        repeats);
    free(k);
    c->repeats[split] = *repeats;
    return entry;
}

int zp_client_seek_from(zp_client_t *c, int split, uint64_t epoch, uint64_t from, uint64_t batch,
                        unsigned plan, char *err, size_t errlen)
{
    if (!c)
        return ZP_EINVAL;
    int rc = seek_check(c, split, epoch, from, batch, plan, err, errlen);
    if (rc)
        return rc;
    zp_msg_t m = {.type = ZP_MSG_SEEK, .id = ++c->seek_seq, .split = (uint64_t)split,
                  .epoch = epoch, .index = batch, .plan = plan, .offset = from};
    if (from)
        m.present |= ZP_B(offset);
    if ((rc = zp_sock_send(c->ring.sock, NULL, &m, NULL, NULL, 0, 0))) {
        say(err, errlen, "zp_client_seek: cannot send to the prefetch: %s", zp_strerror(rc));
        return rc;
    }
    c->seeking = 1;
    c->seek_split = split, c->seek_epoch = epoch, c->seek_from = from, c->seek_batch = batch;
    c->seek_repeats = c->repeats[split];
    c->repeats[split] = 0;
    for (int s = 0; s < ZP_SPLITS; s++)
        zp_coverage_end(&c->acc[s]); /* a phase left mid-way gets no record */
    return 0;
}

int zp_client_release(zp_client_t *c, const zp_client_batch_t *b)
{
    if (!b || b->kind != ZP_CLIENT_BATCH || !c->ring.ring || b->slot >= c->ring.ring->depth)
        return ZP_EINVAL;
    int rc = zp_consumer_release(&c->ring, b->slot, b->gen);
    c->st.stats.items += b->n;
    c->st.stats.bytes += (int64_t)((size_t)b->n * c->st.meta.sample_bytes);
    if (zp_timer_is_open(&c->st.timers, ZP_R_BATCH))
        ZP_TIME_END(&c->st.timers, ZP_R_BATCH);
    zp_stage_stats_tick(&c->st);
    return rc;
}

int zp_client_log(zp_client_t *c, const char *event, int64_t step, int64_t epoch, int n,
                  const char *const *keys, const double *values)
{
    if (!event || !*event || n < 0 || n > ZP_CLIENT_LOG_MAX || (n && (!keys || !values)))
        return ZP_EINVAL;
    for (int i = 0; i < n; i++)
        if (!keys[i] || !*keys[i])
            return ZP_EINVAL;
    zp_event_t ev;
    zp_event_begin(&c->st, &ev, "metric");
    zp_event_str(&ev, "event", event);
    zp_event_int(&ev, "step", step);
    zp_event_int(&ev, "epoch", epoch);
    for (int i = 0; i < n; i++)
        zp_event_num(&ev, keys[i], values[i]);
    zp_event_send(&c->st, &ev);
    zp_stage_stats_tick(&c->st);
    return 0;
}

int zp_client_region_begin(zp_client_t *c, const char *region)
{
    int r = region ? zp_timer_region_of(region) : -1;
    return r < 0 ? ZP_EINVAL : zp_timer_begin_at(&c->st.timers, r, "zp_client_region_begin", 0);
}

int zp_client_region_end(zp_client_t *c, const char *region)
{
    int r = region ? zp_timer_region_of(region) : -1;
    if (r < 0)
        return ZP_EINVAL;
    return zp_timer_end_at(&c->st.timers, r, "zp_client_region_end", 0) < 0 ? ZP_EINVAL : 0;
}

int zp_client_ring(zp_client_t *c, void **base, size_t *bytes)
{
    if (!c || !base || !bytes || !c->ring.ring || !c->had_batch)
        return ZP_EINVAL;
    c->ring.pinned = 1; /* page-locked by the program: never remapped (consumer.c) */
    *base = c->ring.ring->base;
    *bytes = c->ring.ring->map_bytes;
    return 0;
}

/* The channels normalised: the images'; a Python Dataset's normalised
 * field's first dimension (1 for a scalar or none). */
static int64_t norm_channels(const zp_client_t *c)
{
    if (!zp_source_ops(c->st.cfg.dataset_source)->python)
        return c->st.meta.shape[0];
    const zp_field_t *f = zp_fields_find(&c->st.meta.fields, c->st.cfg.py_normalize);
    return f && f->ndim ? f->shape[0] : 1;
}

int zp_client_normalization(const zp_client_t *c, float *mean, float *std, int channels)
{
    int64_t n = c ? norm_channels(c) : 0;
    if (!c || !mean || !std || n < 1 || channels < n)
        return ZP_EINVAL;
    const zp_floats_t *m = &c->st.cfg.mean, *s = &c->st.cfg.std;
    for (int64_t k = 0; k < n; k++) { /* as zp_dataset_normalize_lut */
        mean[k] = (float)m->v[m->n > k ? k : 0];
        std[k] = (float)s->v[s->n > k ? k : 0];
    }
    return (int)n;
}

int zp_client_normalization_table(const zp_client_t *c, float *lut, int channels)
{
    int64_t want = c ? norm_channels(c) : 0;
    if (!c || !lut || want < 1 || channels < want)
        return ZP_EINVAL;
    float *t = zp_dataset_normalize_lut(&c->st.cfg, want);
    if (!t)
        return ZP_ENOMEM;
    memcpy(lut, t, sizeof *t * 256 * (size_t)want);
    free(t);
    return (int)want;
}

void zp_client_destroy(zp_client_t **cp)
{
    zp_client_t *c = cp ? *cp : NULL;
    if (!c)
        return;
    zp_comm_destroy(&c->comm); /* its socket before the context (zp_stage_close) */
    if (c->opened == 2)
        zp_consumer_close(&c->ring);
    if (c->opened)
        zp_stage_close(&c->st); /* the last events have reached the logger */
    if (c->mark >= 0 && c->ended)
        zp_resources_attach_end(c->mark); /* had its END: nothing more to wait for */
    else if (c->mark >= 0 && c->had_batch && c->between_epochs) /* its loop ended first, */
        zp_resources_attach_leave(c->mark, c->train_epochs); /* at an epoch's end: not a crash */
    if (c->mark >= 0)
        close(c->mark); /* detached: `up --attach` may end the run */
    for (int s = 0; s < ZP_SPLITS; s++)
        zp_coverage_free(&c->acc[s]);
    zp_augment_free(&c->aug);
    zp_dataset_destroy(&c->ds);
    free(c);
    *cp = NULL;
}

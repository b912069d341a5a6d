/* trainer.c — the trainer stage's loop: takes every BATCH of its rank's ring
 * (pipeline/ring/consumer.c, shared with the client library), accounts its sample
 * indices (pipeline/ring/coverage.c, which also sends the epoch_end record), hands it to the
 * backend (backend.h: cpu, cuda, eval or null) with the step's learning rate
 * (schedule.c), gives the slot back with FREE(slot, gen), and writes the
 * step and epoch records and checkpoints (checkpoints.c). At an epoch's end
 * the ranks' counts are summed (pipeline/ring/comm.c; one rank sums alone), so every
 * epoch-end record carries the whole epoch's samples, distinct indices, an
 * order-independent checksum of them and an order-dependent digest of the
 * batch sequence. */
#define _GNU_SOURCE
#include "stages/trainer/trainer.h"
#include "pipeline/image/augment.h"
#include "pipeline/stage/event.h"
#include "pipeline/base/hash.h"
#include "pipeline/base/log.h"
#include "schemas/records.h"
#include "pipeline/stage/stage.h"
#include "stages/trainer/backend.h"
#include "stages/trainer/checkpoints.h"
#include "pipeline/stage/ckpt.h"
#include "pipeline/ring/comm.h"
#include "pipeline/ring/consumer.h"
#include "pipeline/ring/coverage.h"
#include "stages/trainer/schedule.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

typedef struct {
    zp_stage_t *st;
    zp_consumer_t ring;
    zp_comm_t *comm;    /* sums over the ranks (trainer.gpus); one rank sums alone */
    zp_backend_t *be;
    zp_checkpoints_t ckpts;
    zp_coverage_t acc[ZP_SPLITS];
    int rank, world;
    int leader;         /* rank 0: writes the run's records */
    int64_t step, steps_per_epoch;
    double lr;          /* of the last optimizer step (trainer.lr before any) */
    /* since the last step record */
    double win_loss;
    int64_t win_correct, win_samples, win_start;
    FILE *batches;      /* batches.log when trainer.debug.log_batches; owned */
    int crops;          /* train samples are cropped at assembly: batches.log lists the crops */
    int64_t compute_ns; /* timed regions of the current batch: transform, augment, forward, ... */
    double first_loss, last_loss; /* of train steps, for ZP_MODE_OVERFIT */
    /* --resume: the first epoch, the entry of its permutation its shards start
     * at (0 but after a resume with another number of ranks) and its first
     * batch; else -1 */
    int64_t resume_epoch, resume_from, resume_batch;
    int64_t recorded_epoch; /* the last train epoch whose record was made; -1: none */
    /* where the run goes on after the last step done here (a train batch's
     * next, or the next epoch's first after its test split); epoch -1 before
     * any: what a save on SIGUSR1 writes */
    int64_t done_epoch, done_batch;
} trainer_t;

static void step_record(trainer_t *t, int64_t epoch)
{
    int64_t now = zp_now_ns();
    double dt = (now - t->win_start) / 1e9;
    const zp_config_t *c = &t->st->cfg;
    zp_event_t ev;
    if (t->leader) {
        zp_event_record(t->st, &ev, ZP_REC_STEP);
        zp_event_str(&ev, ZP_KEY(STEP, split), "train");
        zp_event_int(&ev, ZP_KEY(STEP, epoch), epoch);
        zp_event_int(&ev, ZP_KEY(STEP, epochs), c->epochs);
        zp_event_int(&ev, ZP_KEY(STEP, step), t->step);
        zp_event_int(&ev, ZP_KEY(STEP, steps_per_epoch), t->steps_per_epoch);
        zp_event_num(&ev, ZP_KEY(STEP, loss), t->win_samples ? t->win_loss / t->win_samples : 0);
        zp_event_num(&ev, ZP_KEY(STEP, accuracy), t->win_samples ? (double)t->win_correct / t->win_samples : 0);
        zp_event_num(&ev, ZP_KEY(STEP, samples_per_s), dt > 0 ? t->win_samples / dt : 0);
        zp_event_num(&ev, ZP_KEY(STEP, lr), (float)t->lr);
        zp_event_int(&ev, ZP_KEY(STEP, samples), t->win_samples);
        zp_event_send(t->st, &ev);
    }
    t->win_loss = 0;
    t->win_correct = t->win_samples = 0;
    t->win_start = now;
}

static int epoch_record(trainer_t *t, const zp_msg_t *m)
{
    int split = (int)m->split;
    zp_coverage_t *a = &t->acc[split];
    double dt = (zp_now_ns() - a->start_ns) / 1e9;
    if (t->leader) {
        zp_epoch_info_t e = {split, m->epoch, t->st->cfg.epochs, t->step, (int64_t)m->n,
                             (int64_t)m->skipped, t->be->ops->metrics};
        zp_coverage_record(t->st, a, &e, dt);
    }
    int rc = t->be->ops->epoch_end(t->be, split);
    int overfit = t->st->mode == ZP_MODE_OVERFIT; /* one batch again and again */
    if (overfit ? a->samples + (int64_t)m->skipped != (int64_t)m->n
                : !zp_coverage_exact(a, m->n, m->skipped))
        zp_error("%s epoch %llu: %lld samples (%lld distinct, %lld repeats after a resume) and "
                 "%llu skipped, but the sampler sent %llu", zp_dataset_split_name(split),
                 (unsigned long long)m->epoch, (long long)a->samples, (long long)a->distinct,
                 (long long)a->repeats, (unsigned long long)m->skipped,
                 (unsigned long long)m->n);
    if (split == ZP_SPLIT_TRAIN)
        t->recorded_epoch = (int64_t)m->epoch;
    zp_info("%s epoch %llu done: %lld samples in %.2f s", zp_dataset_split_name(split),
            (unsigned long long)m->epoch + 1, (long long)a->samples, dt);
    if (split == ZP_SPLIT_TEST || t->st->meta.n[ZP_SPLIT_TEST] == 0)
        zp_checkpoints_epoch(&t->ckpts, t->step, m->epoch,
                       split == ZP_SPLIT_TEST && a->samples ? (double)a->correct / (double)a->samples
                                                            : -1);
    zp_coverage_end(a);
    return rc;
}

/* One line per train batch: lets a test compare the batch sequence of runs,
 * and the pixels the model is given (after augmentation). With the crop at
 * assembly the line goes on with "crops" and each sample's crop, in batch
 * order: x,y,w,h,flip,image_w,image_h (the box on the whole image as cached;
 * "-" where not known). Made before the step (which may change x) and
 * written once the step is done: a step a stop cut short (its sum over the
 * ranks) is not logged, since it trains again after a resume.
 * Returns the malloc'd line, or NULL. */
static char *batch_line(trainer_t *t, const zp_batch_view_t *v, const void *x, size_t sample_bytes)
{
    char *line = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&line, &len);
    if (!f)
        return NULL;
    uint64_t d = ZP_ORDER_INIT;
    for (int i = 0; i < v->n; i++)
        d = zp_order_step(d, v->idx[i]);
    uint64_t px = XXH3_64bits(x, (size_t)v->n * sample_bytes);
    fprintf(f, "%llu %llu %lld %016llx %016llx", (unsigned long long)v->epoch,
            (unsigned long long)v->index, (long long)t->step + 1, (unsigned long long)d,
            (unsigned long long)px);
    if (t->crops)
        fputs(" crops", f);
    for (int i = 0; t->crops && i < v->n; i++) {
        const zp_crop_t *c = &v->crops[i];
        if (c->x < 0)
            fputs(" -", f);
        else
            fprintf(f, " %d,%d,%d,%d,%d,%d,%d", c->x, c->y, c->w, c->h, c->flip, c->img_w, c->img_h);
    }
    fputc('\n', f);
    fclose(f);
    return line;
}

/* What a batch or a collect brought: into the epoch's sums, the log window,
 * the batch's compute time, and the overfit figures. */
static void add_out(trainer_t *t, int split, const zp_batch_out_t *o, double lr)
{
    t->acc[split].loss_sum += o->loss_sum;
    t->acc[split].correct += o->correct;
    t->win_loss += o->win_loss;
    t->win_correct += o->win_correct;
    t->win_samples += o->win_samples;
    t->compute_ns += o->compute_ns;
    if (o->stepped)
        t->lr = lr;
    if (o->trained && t->step == 0)
        t->first_loss = o->loss;
    if (o->trained)
        t->last_loss = o->loss;
}

/* The entry of train epoch `epoch`'s permutation its shards start at. */
static uint64_t epoch_from(const trainer_t *t, int64_t epoch)
{
    return epoch == t->resume_epoch && t->resume_from > 0 ? (uint64_t)t->resume_from : 0;
}

/* The backend's work on a batch (n = 0: the step the other ranks make). */
static int backend_batch(trainer_t *t, const zp_batch_view_t *v, uint64_t batches)
{
    const zp_config_t *c = &t->st->cfg;
    int64_t n = t->st->meta.n[ZP_SPLIT_TRAIN];
    if (epoch_from(t, (int64_t)v->epoch)) /* an epoch's rest: the schedule counts whole ones */
        batches = (uint64_t)zp_schedule_shard_steps(c, n, 0, t->world);
    int64_t per_epoch = zp_schedule_epoch_steps(c, n, t->world, batches);
    zp_step_t s = {t->step, (int64_t)v->epoch,
                   zp_schedule_lr(c, t->step, (int64_t)v->epoch, per_epoch)};
    zp_batch_out_t o = {0};
    int rc = t->be->ops->batch(t->be, v, &s, &o);
    add_out(t, v->split, &o, s.lr);
    return rc;
}

/* Metrics the backend held back (on a GPU), of `split`. */
static int collect(trainer_t *t, int split, int64_t epoch)
{
    zp_step_t s = {t->step, epoch, t->lr};
    zp_batch_out_t o = {0};
    int rc = t->be->ops->collect(t->be, split, &s, &o);
    add_out(t, split, &o, t->lr);
    return rc;
}

static int on_batch(trainer_t *t, const zp_msg_t *m)
{
    const zp_config_t *c = &t->st->cfg;
    zp_batch_view_t v;
    int rc = zp_consumer_view(&t->ring, m, &v);
    if (rc)
        return rc > 0 ? 0 : rc; /* 1: dropped */
    zp_stage_stats_state(&t->st->stats, ZP_ST_BUSY);
    zp_coverage_add(&t->acc[v.split], v.idx, v.n);
    const void *x;
    size_t sample_bytes;
    if ((rc = t->be->ops->input(t->be, &v, &x, &sample_bytes, &t->compute_ns)))
        return rc;
    char *line = t->batches && v.split == ZP_SPLIT_TRAIN ? batch_line(t, &v, x, sample_bytes) : NULL;
    rc = backend_batch(t, &v, m->batches);
    if (line && rc != ZP_ESTOP) { /* a step that failed (a NaN) ran: its batch is named */
        fputs(line, t->batches);
        fflush(t->batches);
    }
    free(line);
    if (rc)
        return rc;
    /* The slot is the prefetch's again after this: nothing below reads it. */
    rc = zp_consumer_release(&t->ring, m->slot, m->gen);
    t->st->stats.items += v.n;
    t->st->stats.bytes += (int64_t)((size_t)v.n * t->st->meta.sample_bytes);
    if (v.split == ZP_SPLIT_TRAIN) {
        t->step++;
        t->done_epoch = (int64_t)m->epoch, t->done_batch = (int64_t)m->index + 1;
        t->steps_per_epoch = (int64_t)m->batches;
        int log_now = t->step % c->log_every_steps == 0 || m->index + 1 == m->batches;
        int ckpt_now = c->ckpt_every_steps && t->step % c->ckpt_every_steps == 0;
        /* a GPU's NaN flag is read here: never checkpoint a model that has one */
        int mrc = log_now || ckpt_now ? collect(t, ZP_SPLIT_TRAIN, (int64_t)m->epoch) : 0;
        if (mrc)
            return mrc;
        if (log_now)
            step_record(t, (int64_t)m->epoch);
        if (ckpt_now)
            zp_checkpoints_write(&t->ckpts, "last", t->step, m->epoch,
                                 epoch_from(t, (int64_t)m->epoch), m->index + 1, 0);
    }
    return rc;
}

/* Regions: an epoch (of either split) runs from the end of the previous one,
 * or from the run's first batch; io is open whenever the trainer waits for a
 * batch inside one. A batch is forward + backward (+ h2d and comm with a
 * GPU) + other (optimizer step, bookkeeping, FREE). */
static int timed_batch(trainer_t *t, const zp_msg_t *m)
{
    zp_timers_t *tm = &t->st->timers;
    if (!zp_timer_is_open(tm, ZP_R_EPOCH))
        ZP_TIME_BEGIN(tm, ZP_R_EPOCH);
    if (zp_timer_is_open(tm, ZP_R_IO))
        ZP_TIME_END(tm, ZP_R_IO);
    ZP_TIME_BEGIN(tm, ZP_R_BATCH);
    t->compute_ns = 0;
    int rc = on_batch(t, m);
    int64_t batch = ZP_TIME_END(tm, ZP_R_BATCH);
    zp_timer_add(tm, ZP_R_OTHER, batch - t->compute_ns);
    ZP_TIME_BEGIN(tm, ZP_R_IO);
    return rc;
}

/* At an epoch's end: for train, the steps of the ranks that are not done
 * yet (a shard a batch shorter joins rank 0's last step; a resumed epoch's
 * batches start at the checkpoint's on every rank); then the epoch's counts
 * of every rank, into this rank's accumulator and `m`, so that every rank's
 * record and checks are of the whole epoch. One rank has none to wait for. */
static int sum_epoch(trainer_t *t, zp_msg_t *m)
{
    const zp_config_t *c = &t->st->cfg;
    int split = (int)m->split, rc = 0;
    int64_t n = t->st->meta.n[ZP_SPLIT_TRAIN] - (int64_t)epoch_from(t, (int64_t)m->epoch);
    int64_t mine = zp_schedule_shard_steps(c, n, t->rank, t->world);
    int64_t most = zp_schedule_shard_steps(c, n, 0, t->world);
    if ((int64_t)m->epoch == t->resume_epoch) {
        mine -= t->resume_batch < mine ? t->resume_batch : mine;
        most -= t->resume_batch < most ? t->resume_batch : most;
    }
    zp_batch_view_t none = {.split = ZP_SPLIT_TRAIN, .epoch = m->epoch};
    for (int64_t k = mine; split == ZP_SPLIT_TRAIN && !rc && k < most; k++) {
        rc = backend_batch(t, &none, 0);
        t->step++;
    }
    return rc ? rc : zp_coverage_sum_ranks(&t->acc[split], t->comm, &m->n, &m->skipped);
}

/* The first message maps the ring (a BATCH's names its nonce; it is created
 * before the prefetch sends anything, so the file of that name is then this
 * run's, never a dead run's left in /dev/shm) and attaches the backend. */
static int started(trainer_t *t, uint64_t nonce)
{
    if (t->ring.ring)
        return 0;
    int rc = zp_consumer_map(&t->ring, nonce);
    if (!rc)
        rc = t->be->ops->attach(t->be, t->ring.ring);
    t->ring.pinned = t->be->ops->pins_ring;
    return rc;
}

static int route_batch(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    trainer_t *t = ctx;
    int rc = started(t, m->nonce);
    return rc ? rc : timed_batch(t, m);
}

static int route_epoch_end(void *ctx, const zp_msg_t *msg, zp_frames_t *f)
{
    trainer_t *t = ctx;
    zp_timers_t *tm = &t->st->timers;
    zp_msg_t m = *msg; /* the ranks' sums replace n and skipped */
    int rc = started(t, 0);
    if (zp_timer_is_open(tm, ZP_R_IO))
        ZP_TIME_END(tm, ZP_R_IO);
    if (!rc) /* waits for a GPU's epoch */
        rc = collect(t, (int)m.split, (int64_t)m.epoch);
    if (!rc)
        rc = sum_epoch(t, &m);
    if (zp_timer_is_open(tm, ZP_R_EPOCH))
        ZP_TIME_END(tm, ZP_R_EPOCH);
    if (!rc)
        rc = epoch_record(t, &m);
    if (!rc && m.split == ZP_SPLIT_TEST)
        t->done_epoch = (int64_t)m.epoch + 1, t->done_batch = 0;
    ZP_TIME_BEGIN(tm, ZP_R_EPOCH);
    ZP_TIME_BEGIN(tm, ZP_R_IO);
    return rc;
}

static int route_end(void *ctx, const zp_msg_t *m, zp_frames_t *f) { return 1; }

static const zp_route_t routes[] = {
    {ZP_MSG_BATCH, route_batch},
    {ZP_MSG_EPOCH_END, route_epoch_end},
    {ZP_MSG_END, route_end},
};

/* Until END (1), an error, or a stop or save (0). */
static int loop(trainer_t *t)
{
    int rc = 0;
    t->win_start = zp_now_ns();
    while (!rc && !zp_stop && !zp_save)
        rc = zp_consumer_wait(&t->ring, t, 100);
    return rc == ZP_ESTOP ? 0 : rc;
}

/* Stopped to save: SIGUSR1 (`kill -USR1`, Slurm's --signal warning of a time
 * limit or a preemption), or under Slurm the SIGTERM of the limit itself.
 * Rank 0 writes "last" where the run goes on after its last step; the model
 * is the one that step made (a step whose sum over the ranks the stop cut
 * short changed nothing, and every rank holds rank 0's model). */
static void save_on_stop(trainer_t *t)
{
    int asked = zp_save || (zp_stop == SIGTERM && getenv("SLURM_JOB_ID"));
    if (!asked || !t->leader || t->done_epoch < 0)
        return;
    if (collect(t, ZP_SPLIT_TRAIN, t->done_epoch)) /* a GPU's NaN flag: never save that model */
        return;
    zp_checkpoints_write(&t->ckpts, "last", t->step, (uint64_t)t->done_epoch,
                         epoch_from(t, t->done_epoch), (uint64_t)t->done_batch,
                         t->recorded_epoch == t->done_epoch ? ZP_CKPT_TRAIN_RECORDED : 0);
    zp_info("saved on %s: the run goes on at epoch %lld, batch %lld (step %lld)",
            zp_save ? "SIGUSR1" : "SIGTERM", (long long)t->done_epoch + 1, (long long)t->done_batch,
            (long long)t->step);
}

/* overfit.txt: "STEPS FIRST_LOSS LAST_LOSS", read by `zeus-pipe overfit`. */
static int overfit_record(trainer_t *t)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/overfit.txt", t->st->run_dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%lld %.9g %.9g\n", (long long)t->step, t->first_loss, t->last_loss);
        if (!fclose(f))
            return 1;
    }
    zp_error("%s: %s", path, strerror(errno));
    return -errno;
}

static int open_batches_log(trainer_t *t)
{
    char path[PATH_MAX + 32];
    if (t->rank)
        snprintf(path, sizeof path, "%s/batches-rank%d.log", t->st->run_dir, t->rank);
    else
        snprintf(path, sizeof path, "%s/batches.log", t->st->run_dir);
    return (t->batches = fopen(path, "a")) ? 0 : -errno;
}

/* Everything the loop needs, in order; the first error is returned. */
static int setup(trainer_t *t, zp_stage_t *st)
{
    int rc = 0;
    char err[512];
    if (st->cfg.backend != ZP_BACKEND_NULL && zp_dataset_builtin_fields(&st->meta, err, sizeof err)) {
        zp_error("%s", err); /* `up` refuses it first; eval and overfit reach here */
        return ZP_ECONFIG;
    }
    for (int s = 0; s < ZP_SPLITS && !rc; s++)
        rc = zp_coverage_init(&t->acc[s], st->meta.n[s]);
    if (!rc && (rc = zp_comm_create(&t->comm, st, t->rank, t->world, 0)))
        zp_error("trainer.gpus: rank %d of %d cannot reach the others: %s", t->rank, t->world,
                 zp_strerror(rc));
    if (!rc)
        rc = zp_backend_create(&t->be, st, t->comm);
    if (!rc)
        rc = zp_checkpoints_open(&t->ckpts, st, t->be, t->leader);
    int recorded = 0;
    if (!rc && st->mode == ZP_MODE_RESUME)
        rc = zp_checkpoints_resume(&t->ckpts, &t->step, &t->resume_epoch, &t->resume_from,
                                   &t->resume_batch, &recorded);
    if (!rc && t->resume_epoch >= 0 && !recorded) /* its record proves both parts */
        rc = zp_coverage_resume(&t->acc[ZP_SPLIT_TRAIN], &st->cfg, ZP_SPLIT_TRAIN,
                                (uint64_t)t->resume_epoch, t->rank, t->world, t->resume_from,
                                t->resume_batch, 0); /* its ranks stepped together */
    t->crops = zp_augment_whole(&st->cfg);
    if (!rc && st->cfg.log_batches)
        rc = open_batches_log(t);
    if (!rc)
        rc = zp_consumer_open(&t->ring, st, t->rank, routes, (int)(sizeof routes / sizeof *routes));
    return rc;
}

int zp_trainer_main(zp_stage_t *st)
{
    static trainer_t t;
    t.st = st;
    t.world = zp_stage_world(st);
    t.rank = t.world > 1 ? st->instance : 0;
    t.leader = t.rank == 0;
    t.lr = st->cfg.lr;
    t.resume_epoch = t.resume_from = t.resume_batch = t.done_epoch = t.recorded_epoch = -1;
    int rc = setup(&t, st);
    if (!rc)
        rc = loop(&t);
    if (!rc && st->mode != ZP_MODE_OVERFIT)
        save_on_stop(&t);
    if (rc < 0 && rc != ZP_ESTOP)
        zp_error("stopped: %s", zp_strerror(rc));
    else if (rc == 1)
        zp_info("training finished after %lld steps", (long long)t.step);
    if (rc == 1 && st->mode == ZP_MODE_OVERFIT)
        rc = overfit_record(&t);
    zp_backend_destroy(&t.be); /* a GPU unregisters the ring: before it is unmapped */
    zp_consumer_close(&t.ring);
    zp_checkpoints_close(&t.ckpts);
    zp_comm_destroy(&t.comm);
    if (t.batches)
        fclose(t.batches);
    for (int s = 0; s < ZP_SPLITS; s++)
        zp_coverage_free(&t.acc[s]);
    /* 2: a config error, which no restart mends */
    return rc == 1 ? 0 : rc == ZP_ECONFIG ? 2 : rc < 0 && rc != ZP_ESTOP ? 1 : 0;
}

/* trainer.c — maps the prefetch ring, trains on every train batch and
 * evaluates every test batch, answers FREE(slot, gen) when done with a slot,
 * and proves coverage: each epoch-end record carries the number of distinct
 * sample indices seen, an order-independent checksum of them, and an
 * order-dependent digest of the batch sequence. */
#define _GNU_SOURCE
#include "stages/trainer/trainer.h"
#include "pipeline/augment.h"
#include "pipeline/ckpt.h"
#include "pipeline/hash.h"
#include "pipeline/log.h"
#include "pipeline/ring.h"
#include "pipeline/sampler.h"
#include "pipeline/sock.h"
#include "pipeline/stage.h"
#include "stages/trainer/comm.h"
#include "stages/trainer/eval.h"
#include "stages/trainer/gpu.h"
#include "stages/trainer/mlp.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

char *openblas_get_corename(void);
void openblas_set_num_threads(int);

typedef struct {
    int64_t samples, distinct, batches, correct;
    uint64_t checksum, order;
    double loss_sum;
    int64_t start_ns;
    uint8_t *seen; /* bitmap over the split; owned */
} epoch_acc_t;

typedef struct {
    zp_stage_t *st;
    zp_ring_t *ring;
    void *sock;
    zp_mlp_t mlp;
    zp_opt_t opt;
    zp_batch_layout_t lay;
    epoch_acc_t acc[ZP_SPLITS];
    int64_t step, steps_per_epoch;
    /* since the last step record */
    double win_loss;
    int64_t win_correct, win_samples, win_start;
    int64_t bad_msgs;
    zp_frames_t f;
    int pending;   /* f holds a message received but not handled yet */
    double best;   /* best test accuracy so far; -1 before any */
    uint8_t *ckpt; /* checkpoint payload buffer; owned */
    size_t ckpt_bytes;
    FILE *batches; /* batches.log when trainer.debug.log_batches; owned */
    int64_t compute_ns; /* timed regions of the current batch: augment, forward, backward */
    zp_augment_t aug;   /* in the trainer: dataset.augment.where = trainer */
    int backend;        /* trainer.backend with auto resolved */
    zp_gpu_t *gpu;      /* the cuda backend */
    float *lut;         /* uint8 samples: their normalisation (zp_normalize_lut); owned */
    float *input;       /* uint8 samples on the cpu: the normalised batch; owned */
    float *augmented;   /* the augmented train batch; owned */
    zp_aug_draw_t *draws; /* cuda backend: the batch's draws, augmented on the GPU; owned */
    zp_eval_t eval;     /* ZP_MODE_EVAL: the checkpoints under test */
    double first_loss, last_loss; /* of train steps, for ZP_MODE_OVERFIT */
    int rank, world;    /* trainer.gpus: this trainer's rank (its instance) of `world` */
    int64_t resume_epoch, resume_batch; /* --resume: where the first epoch starts; else -1 */
    zp_comm_t *comm;    /* world > 1: sums over the ranks */
    float *gsum;        /* cpu backend, world > 1: the gradients packed for a sum; owned */
    size_t gcount;      /* floats in gsum */
} trainer_t;

/* The tail of a step's sum over the ranks: samples, loss sum, correct. */
enum { SUM_N, SUM_LOSS, SUM_CORRECT, SUM_COUNT };

/* The directory that holds an eval run's directory: the evaluated run. */
static void parent_dir(const trainer_t *t, char *buf, size_t len)
{
    const char *slash = strrchr(t->st->run_dir, '/');
    int n = slash ? (int)(slash - t->st->run_dir) : 0;
    snprintf(buf, len, "%.*s", n ? n : 1, n ? t->st->run_dir : "/");
}

static void acc_reset(epoch_acc_t *a, int64_t n)
{
    uint8_t *seen = a->seen;
    memset(a, 0, sizeof *a);
    a->seen = seen;
    memset(a->seen, 0, (size_t)(n + 7) / 8);
    a->order = ZP_ORDER_INIT;
    a->start_ns = zp_now_ns();
}

static void account_indices(trainer_t *t, int split, const uint32_t *idx, int64_t n)
{
    epoch_acc_t *a = &t->acc[split];
    if (a->batches == 0 && a->samples == 0)
        acc_reset(a, t->st->meta.n[split]);
    for (int64_t i = 0; i < n; i++) {
        uint32_t x = idx[i];
        a->order = zp_order_step(a->order, x);
        if (x >= t->st->meta.n[split])
            continue; /* cannot happen: the prefetch checked it */
        if (!(a->seen[x >> 3] & (1u << (x & 7)))) {
            a->seen[x >> 3] |= (uint8_t)(1u << (x & 7));
            a->distinct++;
            a->checksum += zp_index_term(x);
        }
    }
    a->samples += n;
    a->batches++;
}

static void step_record(trainer_t *t, int64_t epoch)
{
    int64_t now = zp_now_ns();
    double dt = (now - t->win_start) / 1e9;
    const zp_config_t *c = &t->st->cfg;
    zp_event_t ev;
    if (t->rank) { /* rank 0 logs the run's figures */
        t->win_loss = 0;
        t->win_correct = t->win_samples = 0;
        t->win_start = now;
        return;
    }
    zp_ev_begin(t->st, &ev, "metric", 11);
    zp_ev_str(&ev, "event", "step");
    zp_ev_str(&ev, "split", "train");
    zp_ev_int(&ev, "epoch", epoch);
    zp_ev_int(&ev, "epochs", c->epochs);
    zp_ev_int(&ev, "step", t->step);
    zp_ev_int(&ev, "steps_per_epoch", t->steps_per_epoch);
    zp_ev_num(&ev, "loss", t->win_samples ? t->win_loss / t->win_samples : 0);
    zp_ev_num(&ev, "accuracy", t->win_samples ? (double)t->win_correct / t->win_samples : 0);
    zp_ev_num(&ev, "samples_per_s", dt > 0 ? t->win_samples / dt : 0);
    zp_ev_num(&ev, "lr", t->opt.lr);
    zp_ev_int(&ev, "samples", t->win_samples);
    zp_ev_send(t->st, &ev);
    t->win_loss = 0;
    t->win_correct = t->win_samples = 0;
    t->win_start = now;
}

/* Payload: the best test accuracy (f64), then the model and optimizer state. */
static void checkpoint(trainer_t *t, const char *name, uint64_t epoch, uint64_t batch)
{
    if (t->backend == ZP_BACKEND_NULL || t->rank) /* every rank holds the same model */
        return;
    int rc = t->gpu ? zp_gpu_download(t->gpu, &t->mlp) : 0;
    if (rc) {
        zp_error("cannot write a checkpoint: the model cannot be read from the GPU");
        return;
    }
    memcpy(t->ckpt, &t->best, 8);
    zp_mlp_save(&t->mlp, t->ckpt + 8);
    zp_ckpt_pos_t pos = {(uint64_t)t->step, epoch, batch, (uint64_t)t->st->cfg.seed};
    char path[PATH_MAX + 64];
    zp_ckpt_path(path, sizeof path, t->st->run_dir, name);
    rc = zp_ckpt_write(path, &pos, t->ckpt, t->ckpt_bytes);
    if (rc)
        zp_error("%s: cannot write the checkpoint: %s", path, zp_strerror(rc));
}

/* After an epoch's evaluation: last (to go on with the next epoch), best, epoch-N. */
static void epoch_checkpoints(trainer_t *t, uint64_t epoch, double accuracy)
{
    const zp_config_t *c = &t->st->cfg;
    if (!c->ckpt_every_epochs || (epoch + 1) % (uint64_t)c->ckpt_every_epochs)
        return;
    int better = accuracy > t->best;
    if (better)
        t->best = accuracy;
    checkpoint(t, "last", epoch + 1, 0);
    if (c->ckpt_keep != ZP_KEEP_LAST && better)
        checkpoint(t, "best", epoch + 1, 0);
    if (c->ckpt_keep == ZP_KEEP_ALL) {
        char name[32];
        snprintf(name, sizeof name, "epoch-%llu", (unsigned long long)epoch + 1);
        checkpoint(t, name, epoch + 1, 0);
    }
}

/* The epoch_end metric; with ranks, rank 0 logs it with every rank's counts. */
static void epoch_event(trainer_t *t, const zp_msg_t *m, const epoch_acc_t *a, double dt)
{
    char sum[24], order[24];
    snprintf(sum, sizeof sum, "%016llx", (unsigned long long)a->checksum);
    snprintf(order, sizeof order, "%016llx", (unsigned long long)a->order);
    zp_event_t ev;
    int with_model = t->backend != ZP_BACKEND_NULL;
    zp_ev_begin(t->st, &ev, "metric", 13 + 2 * with_model);
    zp_ev_str(&ev, "event", "epoch_end");
    zp_ev_str(&ev, "split", zp_split_name((int)m->split));
    zp_ev_int(&ev, "epoch", (int64_t)m->epoch);
    zp_ev_int(&ev, "epochs", t->st->cfg.epochs);
    zp_ev_int(&ev, "step", t->step);
    zp_ev_int(&ev, "samples", a->samples);
    zp_ev_int(&ev, "expected_samples", (int64_t)m->n);
    zp_ev_int(&ev, "skipped", (int64_t)m->skipped);
    zp_ev_int(&ev, "distinct", a->distinct);
    zp_ev_str(&ev, "index_checksum", sum);
    zp_ev_str(&ev, "order_digest", order);
    zp_ev_num(&ev, "samples_per_s", dt > 0 ? a->samples / dt : 0);
    zp_ev_num(&ev, "seconds", dt);
    if (with_model) {
        zp_ev_num(&ev, "loss", a->samples ? a->loss_sum / a->samples : 0);
        zp_ev_num(&ev, "accuracy", a->samples ? (double)a->correct / a->samples : 0);
    }
    zp_ev_send(t->st, &ev);
}

static void epoch_record(trainer_t *t, const zp_msg_t *m)
{
    int split = (int)m->split;
    epoch_acc_t *a = &t->acc[split];
    double dt = (zp_now_ns() - a->start_ns) / 1e9;
    if (t->rank == 0)
        epoch_event(t, m, a, dt);
    if (t->st->mode == ZP_MODE_EVAL) {
        char dir[PATH_MAX];
        parent_dir(t, dir, sizeof dir);
        zp_eval_write(&t->eval, dir);
    }
    int repeats = t->st->mode == ZP_MODE_OVERFIT; /* one batch again and again */
    if (a->samples + (int64_t)m->skipped != (int64_t)m->n || (a->distinct != a->samples && !repeats))
        zp_error("%s epoch %llu: %lld samples (%lld distinct) and %llu skipped, but the sampler "
                 "sent %llu", zp_split_name(split), (unsigned long long)m->epoch,
                 (long long)a->samples, (long long)a->distinct, (unsigned long long)m->skipped,
                 (unsigned long long)m->n);
    zp_info("%s epoch %llu done: %lld samples in %.2f s", zp_split_name(split),
            (unsigned long long)m->epoch + 1, (long long)a->samples, dt);
    if (split == ZP_SPLIT_TEST || t->st->meta.n[ZP_SPLIT_TEST] == 0)
        epoch_checkpoints(t, m->epoch, split == ZP_SPLIT_TEST && a->samples
                                           ? (double)a->correct / (double)a->samples : -1);
    a->samples = a->batches = 0;
}

static int resume(trainer_t *t)
{
    char path[PATH_MAX + 64], err[600];
    zp_ckpt_path(path, sizeof path, t->st->run_dir, "last");
    zp_ckpt_pos_t pos;
    void *payload;
    size_t bytes;
    int rc = zp_ckpt_read(path, &pos, &payload, &bytes, err, sizeof err);
    if (rc) {
        zp_error("cannot resume: %s", err);
        return rc;
    }
    if (bytes != t->ckpt_bytes || zp_mlp_load(&t->mlp, (uint8_t *)payload + 8, bytes - 8)) {
        zp_error("cannot resume: %s holds another model than trainer.model.hidden describes", path);
        free(payload);
        return ZP_EINVAL;
    }
    memcpy(&t->best, payload, 8);
    free(payload);
    t->step = (int64_t)pos.step;
    t->resume_epoch = (int64_t)pos.epoch, t->resume_batch = (int64_t)pos.batch;
    zp_info("resumed from %s: step %lld, epoch %llu, batch %llu", path, (long long)t->step,
            (unsigned long long)pos.epoch + 1, (unsigned long long)pos.batch);
    return 0;
}

/* One line per train batch: lets a test compare the batch sequence of runs,
 * and the pixels the model is given (after augmentation). */
static void log_batch(trainer_t *t, const zp_msg_t *m, const uint32_t *idx, const void *x,
                      size_t sample_bytes, int64_t step)
{
    uint64_t d = ZP_ORDER_INIT;
    for (uint64_t i = 0; i < m->n; i++)
        d = zp_order_step(d, idx[i]);
    uint64_t px = XXH3_64bits(x, m->n * sample_bytes);
    fprintf(t->batches, "%llu %llu %lld %016llx %016llx\n", (unsigned long long)m->epoch,
            (unsigned long long)m->index, (long long)step, (unsigned long long)d,
            (unsigned long long)px);
    fflush(t->batches);
}

/* The learning rate of the step after `step` steps, in epoch `epoch` of
 * `per_epoch` steps: the schedule, then the linear warm-up. A function of
 * the position only, so a resumed run follows the same curve. */
static double scheduled_lr(const zp_config_t *c, int64_t step, int64_t epoch, int64_t per_epoch)
{
    double lr = c->lr;
    if (c->schedule == ZP_SCHED_STEP) {
        lr *= pow(c->gamma, (double)(epoch / c->step_epochs));
    } else if (c->schedule == ZP_SCHED_COSINE) {
        double total = (double)c->epochs * (double)per_epoch;
        double f = total > 1 ? fmin(1.0, (double)step / (total - 1)) : 1;
        lr = c->min_lr + (c->lr - c->min_lr) * 0.5 * (1 + cos(M_PI * f));
    }
    if (step < c->warmup_steps)
        lr *= (double)(step + 1) / (double)c->warmup_steps;
    return lr;
}

/* A NaN or infinity: says where, writes the batch's sample indices to
 * nan-batch.txt so that it can be replayed, and stops the run. */
static int non_finite(trainer_t *t, const zp_msg_t *m, const uint32_t *idx, int layer,
                      const char *tensor, const char *what)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/nan-batch.txt", t->st->run_dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "# step %lld, epoch %llu, batch %llu, split %s: %llu sample indices\n",
                (long long)t->step + 1, (unsigned long long)m->epoch + 1,
                (unsigned long long)m->index + 1, zp_split_name((int)m->split),
                (unsigned long long)m->n);
        for (uint64_t i = 0; i < m->n; i++)
            fprintf(f, "%u\n", idx[i]);
        if (fclose(f))
            f = NULL;
    }
    zp_error("step %lld (epoch %llu, batch %llu): %s: layer %d %s holds NaN or infinity; "
             "the batch's sample indices are in %s",
             (long long)t->step + 1, (unsigned long long)m->epoch + 1, (unsigned long long)m->index + 1,
             what, layer + 1, tensor, f ? path : "(cannot be written)");
    return ZP_EINVAL;
}

/* Train steps an epoch of rank `rank` takes (trainer.limit_train_batches applied). */
static int64_t shard_steps(const trainer_t *t, int rank)
{
    const zp_config_t *c = &t->st->cfg;
    int64_t b = zp_sampler_shard_batches(t->st->meta.n[ZP_SPLIT_TRAIN], rank, t->world,
                                         c->batch_size, c->drop_last);
    return c->limit_train_batches && b > c->limit_train_batches ? c->limit_train_batches : b;
}

/* Steps of the current epoch: with ranks, rank 0's (its shard is the
 * largest), which every rank takes. */
static int64_t epoch_steps(const trainer_t *t, const zp_msg_t *m)
{
    return t->world > 1 ? shard_steps(t, 0) : (int64_t)m->batches;
}

/* The optimizer step after `step` steps, in epoch `epoch` of `per_epoch` steps. */
static void take_step(trainer_t *t, int64_t epoch, int64_t per_epoch)
{
    t->opt.lr = (float)scheduled_lr(&t->st->cfg, t->step, epoch, per_epoch);
    t->opt.t = t->step + 1;
    zp_mlp_step(&t->mlp, &t->opt);
}

/* cpu backend, world > 1: this rank's gradients (a mean over its n samples)
 * weighted by n, summed over the ranks and divided by their total — the mean
 * over every rank's batch, as one trainer given all of them computes it. A
 * rank with no samples (its batch was skipped whole, or its shard is a batch
 * shorter) adds zeros. `tail` comes back with the totals (SUM_*); they go to
 * the log window. */
static int sum_step(trainer_t *t, int n, double loss_sum, int correct, double *tail)
{
    zp_mlp_t *mlp = &t->mlp;
    float *p = t->gsum;
    for (int l = 0; l < mlp->nlayers; l++) {
        size_t w = (size_t)mlp->dims[l] * (size_t)mlp->dims[l + 1], o = (size_t)mlp->dims[l + 1];
        for (size_t i = 0; i < w; i++)
            *p++ = n ? mlp->gw[l][i] * (float)n : 0;
        for (size_t i = 0; i < o; i++)
            *p++ = n ? mlp->gb[l][i] * (float)n : 0;
    }
    tail[SUM_N] = n, tail[SUM_LOSS] = loss_sum, tail[SUM_CORRECT] = correct;
    ZP_TIME_BEGIN(&t->st->timers, ZP_R_COMM);
    int rc = zp_comm_sum(t->comm, t->gsum, t->gcount, tail, SUM_COUNT);
    t->compute_ns += ZP_TIME_END(&t->st->timers, ZP_R_COMM);
    if (rc || tail[SUM_N] <= 0)
        return rc;
    float scale = (float)(1.0 / tail[SUM_N]);
    p = t->gsum;
    for (int l = 0; l < mlp->nlayers; l++) {
        size_t w = (size_t)mlp->dims[l] * (size_t)mlp->dims[l + 1], o = (size_t)mlp->dims[l + 1];
        for (size_t i = 0; i < w; i++)
            mlp->gw[l][i] = *p++ * scale;
        for (size_t i = 0; i < o; i++)
            mlp->gb[l][i] = *p++ * scale;
    }
    t->win_loss += tail[SUM_LOSS];
    t->win_correct += (int64_t)tail[SUM_CORRECT];
    t->win_samples += (int64_t)tail[SUM_N];
    return 0;
}

/* Forward, and for a train batch backward and an optimizer step. */
static int compute(trainer_t *t, const zp_msg_t *m, const uint32_t *idx, const float *x,
                   const int32_t *labels)
{
    const zp_config_t *c = &t->st->cfg;
    int n = (int)m->n, split = (int)m->split, correct, layer;
    const char *tensor;
    zp_timers_t *tm = &t->st->timers;
    if (t->st->mode == ZP_MODE_EVAL) { /* the epoch record shows the first checkpoint's figures */
        zp_eval_model_t *first = &t->eval.m[0];
        double loss0 = first->loss_sum;
        int64_t correct0 = first->correct;
        ZP_TIME_BEGIN(tm, ZP_R_FORWARD);
        zp_eval_batch(&t->eval, x, labels, n);
        t->compute_ns += ZP_TIME_END(tm, ZP_R_FORWARD);
        t->acc[split].loss_sum += first->loss_sum - loss0;
        t->acc[split].correct += first->correct - correct0;
        return 0;
    }
    ZP_TIME_BEGIN(tm, ZP_R_FORWARD);
    double loss = zp_mlp_forward(&t->mlp, x, labels, n, &correct);
    t->compute_ns += ZP_TIME_END(tm, ZP_R_FORWARD);
    if (!isfinite(loss)) {
        if (!zp_mlp_check_forward(&t->mlp, n, &layer, &tensor))
            layer = t->mlp.nlayers - 1, tensor = "loss";
        return non_finite(t, m, idx, layer, tensor, "the loss is not finite");
    }
    t->acc[split].loss_sum += loss * n;
    t->acc[split].correct += correct;
    if (split != ZP_SPLIT_TRAIN)
        return 0;
    if (!t->comm) { /* else the window gets every rank's totals */
        t->win_loss += loss * n;
        t->win_correct += correct;
    }
    if (t->step == 0)
        t->first_loss = loss;
    t->last_loss = loss;
    ZP_TIME_BEGIN(tm, ZP_R_BACKWARD);
    zp_mlp_backward(&t->mlp, x, labels, n);
    t->compute_ns += ZP_TIME_END(tm, ZP_R_BACKWARD);
    if (c->nan_at_step && t->step + 1 == c->nan_at_step)
        t->mlp.gw[0][0] = NAN;
    if (zp_mlp_check_grads(&t->mlp, &layer, &tensor))
        return non_finite(t, m, idx, layer, tensor, "a gradient is not finite");
    if (t->comm) {
        double tail[SUM_COUNT];
        int rc = sum_step(t, n, loss * n, correct, tail);
        if (rc)
            return rc;
    }
    take_step(t, (int64_t)m->epoch, epoch_steps(t, m));
    return 0;
}

/* The cuda backend: enqueue the batch's copy and compute, and return once
 * the copy is done (the caller then gives the slot back); the compute runs on
 * while the next batch arrives. Losses stay on the GPU until they are logged. */
static int gpu_compute(trainer_t *t, const zp_msg_t *m, const uint32_t *idx, const void *x,
                       const int32_t *labels)
{
    int split = (int)m->split;
    zp_gpu_aug_t aug = {t->aug.c, t->aug.h, t->aug.w, t->aug.padding, t->aug.fill, t->draws};
    if (split == ZP_SPLIT_TRAIN) {
        t->opt.lr = (float)scheduled_lr(&t->st->cfg, t->step, (int64_t)m->epoch, epoch_steps(t, m));
        t->opt.t = t->step + 1;
        for (uint64_t i = 0; t->aug.on && i < m->n; i++)
            zp_augment_draw(&t->aug, m->epoch, idx[i], &t->draws[i]);
    }
    int augmented = t->aug.on && split == ZP_SPLIT_TRAIN;
    int64_t t0 = zp_now_ns();
    int rc = zp_gpu_batch(t->gpu, x, labels, (int)m->n, split, &t->opt, augmented ? &aug : NULL);
    if (!rc)
        rc = zp_gpu_wait_copy(t->gpu);
    /* the GPU's own times go to h2d, forward, backward; the host's wait is not "other" */
    t->compute_ns += zp_now_ns() - t0;
    zp_gpu_harvest(t->gpu, &t->st->timers, 0);
    return rc;
}

/* world > 1, a train step with no batch of this rank's in it (a shard a
 * batch shorter, or a batch skipped whole): zeros to the sum, and the step
 * the others' samples make. The backend null keeps no model: nothing. */
static int others_step(trainer_t *t, int64_t epoch)
{
    zp_msg_t none = {.type = ZP_MSG_BATCH, .split = ZP_SPLIT_TRAIN, .epoch = (uint64_t)epoch};
    if (t->gpu)
        return gpu_compute(t, &none, NULL, NULL, NULL);
    if (!t->gsum)
        return 0;
    double tail[SUM_COUNT];
    int rc = sum_step(t, 0, 0, 0, tail);
    if (!rc && tail[SUM_N] > 0)
        take_step(t, epoch, epoch_steps(t, &none));
    return rc;
}

/* The cuda backend's loss and hits of `split` since the last call, into the
 * epoch's (and for train, the log window's) sums; stops the run on a NaN. */
static int gpu_metrics(trainer_t *t, int split, int64_t epoch)
{
    if (!t->gpu)
        return 0;
    double loss;
    int64_t correct;
    int non_finite;
    int rc = zp_gpu_take(t->gpu, split, &loss, &correct, &non_finite);
    if (rc)
        return rc;
    t->acc[split].loss_sum += loss;
    t->acc[split].correct += correct;
    if (split == ZP_SPLIT_TRAIN) {
        t->win_loss += loss;
        t->win_correct += correct;
    }
    if (non_finite) {
        zp_error("step %lld (epoch %lld): a loss or gradient is not finite (the cuda backend "
                 "checks at every metric record: the first such step is at most "
                 "trainer.log_every_steps earlier)", (long long)t->step, (long long)epoch + 1);
        return ZP_EINVAL;
    }
    return 0;
}

/* Maps this rank's ring, the one whose header carries `nonce` (0: the file of
 * that name now). A dead run's file of the same name (another nonce) is
 * refused and looked up again until the prefetch has replaced it. */
static int map_ring(trainer_t *t, uint64_t nonce)
{
    char name[128];
    zp_ring_name(name, sizeof name, t->st->run_dir, t->rank);
    zp_ring_destroy(&t->ring);
    int rc;
    int64_t give_up = zp_now_ns() + 30000000000ll;
    while ((rc = zp_ring_open(&t->ring, name, nonce)) == -ENOENT || rc == ZP_EPROTO ||
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
    if (t->lay.bytes > t->ring->slot_bytes) {
        zp_error("shared memory %s: slots of %zu bytes, a batch needs %zu", name,
                 t->ring->slot_bytes, t->lay.bytes);
        return ZP_EPROTO;
    }
    return 0;
}

/* The ring a BATCH names: a mapping of another nonce is a dead run's ring,
 * never read; this run's is mapped instead. The cuda backend page-locked its
 * mapping for good, so there it is an error. */
static int ring_for(trainer_t *t, uint64_t nonce)
{
    if (t->ring && t->ring->nonce == nonce)
        return 0;
    t->st->stats.errors++;
    zp_warn("a BATCH of ring nonce %016llx, but the mapped ring's is %016llx (a previous run's): "
            "mapping this run's", (unsigned long long)nonce,
            (unsigned long long)(t->ring ? t->ring->nonce : 0));
    if (t->gpu) {
        zp_error("the cuda backend page-locked the previous ring; restart the run");
        return ZP_EPROTO;
    }
    return map_ring(t, nonce);
}

/* Waits up to 100 ms for the prefetch's next message, into t->f (or takes
 * the pending one). Returns 1 when one is there, 0 when none came, or an error. */
static int next_msg(trainer_t *t)
{
    if (t->pending) {
        t->pending = 0;
        return 1;
    }
    zp_stats_state(&t->st->stats, ZP_ST_WAIT_IN);
    zmq_pollitem_t it = {t->sock, 0, ZMQ_POLLIN, 0};
    int n = zmq_poll(&it, 1, 100);
    zp_stats_tick(t->st);
    if (n <= 0)
        return 0;
    int rc = zp_frames_recv(&t->f, t->sock, 0);
    return rc ? rc : 1;
}

/* Connects to the prefetch and maps the ring once the prefetch has spoken:
 * it creates the ring before it sends anything, so the file of that name is
 * then this run's, never a dead run's left in /dev/shm (up --resume); a
 * BATCH's nonce confirms it. The first message stays pending for loop(). */
static int open_ring(trainer_t *t)
{
    char ep[ZP_ENDPOINT_MAX + 16], ring[32];
    int rc = zp_batch_layout(&t->lay, t->st->cfg.batch_size, t->st->meta.sample_bytes);
    if (rc) {
        zp_error("prefetch.batch_size %lld x %zu bytes a sample does not fit in memory",
                 (long long)t->st->cfg.batch_size, t->st->meta.sample_bytes);
        return rc;
    }
    snprintf(ring, sizeof ring, "ring-%d", t->rank);
    if (zp_stage_endpoint(t->st, ring, ep, sizeof ep) ||
        !(t->sock = zp_sock_open(t->st->zctx, ZMQ_PAIR, ep, 0, 1000)))
        return ZP_EZMQ;
    while (!(rc = next_msg(t)))
        if (zp_stop)
            return ZP_ESTOP;
    if (rc < 0)
        return rc;
    t->pending = 1;
    zp_msg_t m;
    char why[256];
    uint64_t nonce = 0;
    if (!zp_frames_decode(&t->f, 0, &m, why, sizeof why) && m.type == ZP_MSG_BATCH)
        nonce = m.nonce;
    zp_msg_release(&m);
    return map_ring(t, nonce);
}

static int on_batch(trainer_t *t, const zp_msg_t *m)
{
    const zp_config_t *c = &t->st->cfg;
    int rc = ring_for(t, m->nonce);
    if (rc)
        return rc;
    if (m->slot >= t->ring->depth || m->n > (uint64_t)c->batch_size ||
        m->elems != (uint64_t)t->st->meta.elems || m->dtype != (uint64_t)t->st->meta.dtype) {
        t->st->stats.errors++;
        zp_warn("dropped a BATCH that does not fit the ring (slot %llu, n %llu, %llu values of "
                "dtype %llu)", (unsigned long long)m->slot, (unsigned long long)m->n,
                (unsigned long long)m->elems, (unsigned long long)m->dtype);
        if (m->slot >= t->ring->depth)
            return 0; /* no slot of ours: nothing to give back */
        /* the slot goes back to the prefetch, or the ring would be a slot short for good */
        zp_msg_t fr = {.type = ZP_MSG_FREE, .slot = m->slot, .gen = m->gen};
        return zp_send(t->sock, NULL, &fr, NULL, NULL, 0, 0);
    }
    zp_stats_state(&t->st->stats, ZP_ST_BUSY);
    uint8_t *base = zp_ring_slot(t->ring, (uint32_t)m->slot);
    const uint32_t *idx = (const uint32_t *)(base + t->lay.indices);
    const int32_t *labels = (const int32_t *)(base + t->lay.labels);
    const uint8_t *data = base + t->lay.data;
    const float *x = (const float *)data;
    int n = (int)m->n, split = (int)m->split;
    size_t elems = (size_t)t->st->meta.elems;
    account_indices(t, split, idx, n);
    if (t->input) { /* uint8 samples, normalised here (the cuda backend does it on the GPU) */
        ZP_TIME_BEGIN(&t->st->timers, ZP_R_TRANSFORM);
        for (int i = 0; i < n; i++)
            zp_normalize(t->lut, &t->st->meta, data + (size_t)i * elems, t->input + (size_t)i * elems);
        t->compute_ns += ZP_TIME_END(&t->st->timers, ZP_R_TRANSFORM);
        x = t->input;
    }
    if (t->aug.on && split == ZP_SPLIT_TRAIN && n > 0 && !t->gpu) {
        ZP_TIME_BEGIN(&t->st->timers, ZP_R_AUGMENT);
        for (int i = 0; i < n; i++)
            zp_augment(&t->aug, m->epoch, idx[i], x + (size_t)i * elems, t->augmented + (size_t)i * elems);
        t->compute_ns += ZP_TIME_END(&t->st->timers, ZP_R_AUGMENT);
        x = t->augmented;
    }
    if (t->batches && split == ZP_SPLIT_TRAIN) /* the cuda backend's uint8 batch: as it came */
        log_batch(t, m, idx, t->gpu ? (const void *)data : x,
                  t->gpu ? t->st->meta.sample_bytes : elems * sizeof *x, t->step + 1);
    if (n == 0 && t->world > 1 && split == ZP_SPLIT_TRAIN) /* every sample was skipped */
        rc = others_step(t, (int64_t)m->epoch);
    else if (t->gpu && n > 0)
        rc = gpu_compute(t, m, idx, data, labels);
    else if (t->backend == ZP_BACKEND_CPU && n > 0)
        rc = compute(t, m, idx, x, labels);
    if (rc)
        return rc;
    /* The slot is the prefetch's again after this: nothing below reads it. */
    zp_msg_t fr = {.type = ZP_MSG_FREE, .slot = m->slot, .gen = m->gen};
    rc = zp_send(t->sock, NULL, &fr, NULL, NULL, 0, 0);
    t->st->stats.items += n;
    t->st->stats.bytes += (int64_t)((size_t)n * t->st->meta.sample_bytes);
    if (split == ZP_SPLIT_TRAIN) {
        t->step++;
        t->win_samples += t->gsum ? 0 : n; /* sum_step counted every rank's */
        t->steps_per_epoch = (int64_t)m->batches;
        int log_now = t->step % c->log_every_steps == 0 || m->index + 1 == m->batches;
        int ckpt_now = c->ckpt_every_steps && t->step % c->ckpt_every_steps == 0;
        /* the GPU's NaN flag is read here: never checkpoint a model that has one */
        int mrc = log_now || ckpt_now ? gpu_metrics(t, ZP_SPLIT_TRAIN, (int64_t)m->epoch) : 0;
        if (mrc)
            return mrc;
        if (log_now)
            step_record(t, (int64_t)m->epoch);
        if (ckpt_now)
            checkpoint(t, "last", m->epoch, m->index + 1);
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

/* world > 1, at an epoch's end: for train, the steps of the ranks that are
 * not done yet; then the epoch's counts of every rank, into this rank's
 * accumulator and `m`, so that every rank's record (rank 0's is logged) and
 * checks are of the whole epoch. The index checksum travels as two 32-bit
 * halves: a double sums those exactly. */
static int sum_epoch(trainer_t *t, zp_msg_t *m)
{
    int split = (int)m->split, rc = 0;
    /* a shard a batch shorter joins rank 0's last step; a resumed epoch's
     * batches start at the checkpoint's on every rank */
    int64_t mine = shard_steps(t, t->rank), most = shard_steps(t, 0);
    if ((int64_t)m->epoch == t->resume_epoch) {
        mine -= t->resume_batch < mine ? t->resume_batch : mine;
        most -= t->resume_batch < most ? t->resume_batch : most;
    }
    for (int64_t k = mine; split == ZP_SPLIT_TRAIN && !rc && k < most; k++) {
        rc = others_step(t, (int64_t)m->epoch);
        t->step++;
    }
    epoch_acc_t *a = &t->acc[split];
    double s[8] = {(double)a->samples, (double)a->distinct, (double)(a->checksum & 0xffffffffu),
                   (double)(a->checksum >> 32), a->loss_sum, (double)a->correct, (double)m->n,
                   (double)m->skipped};
    float none = 0;
    ZP_TIME_BEGIN(&t->st->timers, ZP_R_COMM);
    if (!rc)
        rc = zp_comm_sum(t->comm, &none, 0, s, 8);
    ZP_TIME_END(&t->st->timers, ZP_R_COMM);
    if (rc)
        return rc;
    a->samples = (int64_t)s[0], a->distinct = (int64_t)s[1];
    a->checksum = (uint64_t)s[2] + ((uint64_t)s[3] << 32);
    a->loss_sum = s[4], a->correct = (int64_t)s[5];
    m->n = (uint64_t)s[6], m->skipped = (uint64_t)s[7];
    return 0;
}

static int loop(trainer_t *t)
{
    int rc = 0;
    t->win_start = zp_now_ns();
    while (!rc && !zp_stop) {
        int got = next_msg(t);
        if (got < 0)
            rc = got;
        if (got <= 0)
            continue;
        zp_msg_t m;
        char why[256];
        if (zp_frames_decode(&t->f, 0, &m, why, sizeof why)) {
            t->st->stats.errors++;
            if (t->bad_msgs++ < 10)
                zp_warn("dropped a malformed message from the prefetch stage: %s", why);
        } else if (m.type == ZP_MSG_BATCH) {
            rc = timed_batch(t, &m);
        } else if (m.type == ZP_MSG_EPOCH_END) {
            if (zp_timer_is_open(&t->st->timers, ZP_R_IO))
                ZP_TIME_END(&t->st->timers, ZP_R_IO);
            rc = gpu_metrics(t, (int)m.split, (int64_t)m.epoch); /* waits for the GPU's epoch */
            if (!rc && t->comm)
                rc = sum_epoch(t, &m);
            if (zp_timer_is_open(&t->st->timers, ZP_R_EPOCH))
                ZP_TIME_END(&t->st->timers, ZP_R_EPOCH);
            if (!rc)
                epoch_record(t, &m);
            ZP_TIME_BEGIN(&t->st->timers, ZP_R_EPOCH);
            ZP_TIME_BEGIN(&t->st->timers, ZP_R_IO);
        } else if (m.type == ZP_MSG_END) {
            zp_msg_release(&m);
            return 1;
        }
        zp_msg_release(&m);
    }
    return rc == ZP_ESTOP ? 0 : rc;
}

static int init_model(trainer_t *t)
{
    const zp_config_t *c = &t->st->cfg;
    int dims[ZP_MLP_MAX_LAYERS + 1], L = c->hidden.n + 1;
    if (L > ZP_MLP_MAX_LAYERS)
        return ZP_EINVAL;
    dims[0] = (int)t->st->meta.elems;
    for (int i = 0; i < c->hidden.n; i++)
        dims[i + 1] = (int)c->hidden.v[i];
    dims[L] = (int)t->st->meta.classes;
    t->opt = (zp_opt_t){.kind = c->optimizer == ZP_OPTIM_ADAMW ? ZP_OPT_ADAMW : ZP_OPT_SGD,
                        .lr = (float)c->lr, .momentum = (float)c->momentum,
                        .weight_decay = (float)c->weight_decay, .beta1 = (float)c->betas.v[0],
                        .beta2 = (float)c->betas.v[1], .eps = (float)c->eps};
    openblas_set_num_threads((int)c->threads);
    if (t->backend == ZP_BACKEND_CPU)
        zp_info("cpu backend: MLP with %d weight layers; OpenBLAS core %s, %lld thread(s)", L,
                openblas_get_corename(), (long long)c->threads);
    int rc = zp_mlp_init(&t->mlp, dims, L, (int)c->batch_size, (uint64_t)c->seed);
    if (!rc && t->st->mode == ZP_MODE_EVAL) {
        char dir[PATH_MAX], ckpts[PATH_MAX + 16];
        parent_dir(t, dir, sizeof dir);
        snprintf(ckpts, sizeof ckpts, "%s/checkpoints", dir);
        rc = zp_eval_open(&t->eval, t->st->ckpts, ckpts, dims, L, (int)c->batch_size);
    }
    return rc;
}

/* trainer.backend with auto resolved: cuda where a GPU is found (eval and
 * overfit run on the cpu backend). */
static int pick_backend(trainer_t *t)
{
    const zp_stage_t *st = t->st;
    t->backend = st->cfg.backend;
    if (t->backend != ZP_BACKEND_CUDA && t->backend != ZP_BACKEND_AUTO)
        return 0;
    if (st->mode == ZP_MODE_EVAL || st->mode == ZP_MODE_OVERFIT) {
        t->backend = ZP_BACKEND_CPU;
        return 0;
    }
    char why[256];
    int n = zp_gpu_count(why, sizeof why);
    if (n > 0) {
        t->backend = ZP_BACKEND_CUDA;
    } else if (t->backend == ZP_BACKEND_CUDA) {
        zp_error("trainer.backend: cuda: no GPU to use: %s", why);
        return ZP_EGPU;
    } else {
        zp_info("trainer.backend: auto: no GPU (%s), so the cpu backend", why);
        t->backend = ZP_BACKEND_CPU;
    }
    return 0;
}

/* cuda, world > 1: rank 0's NCCL id to every rank (a sum: the others add
 * zeros), then every rank joins the communicator. */
static int join_ranks(trainer_t *t)
{
    uint8_t id[ZP_NCCL_ID_BYTES] = {0};
    double sum[ZP_NCCL_ID_BYTES];
    char err[512];
    int rc = t->rank == 0 ? zp_gpu_nccl_id(id, err, sizeof err) : 0;
    if (rc) {
        zp_error("trainer.gpus: %s", err);
        return rc;
    }
    for (int i = 0; i < ZP_NCCL_ID_BYTES; i++)
        sum[i] = id[i];
    float none = 0;
    if ((rc = zp_comm_sum(t->comm, &none, 0, sum, ZP_NCCL_ID_BYTES)))
        return rc;
    for (int i = 0; i < ZP_NCCL_ID_BYTES; i++)
        id[i] = (uint8_t)sum[i];
    if ((rc = zp_gpu_join(t->gpu, id, t->rank, t->world, (int)t->st->cfg.comm_timeout_s, err,
                          sizeof err)))
        zp_error("trainer.gpus: %s", err);
    else
        zp_info("cuda backend: rank %d of %d joined the NCCL communicator", t->rank, t->world);
    return rc;
}

static int open_gpu(trainer_t *t)
{
    char err[512];
    /* rank r uses GPU r; under Slurm a task uses its node-local rank's GPU
     * among those it sees (one, when Slurm gives each task its own) */
    int device = t->rank;
    if (t->world > 1) {
        const zp_slurm_t *sl = &t->st->slurm;
        int n = zp_gpu_count(err, sizeof err);
        if (sl->world > 1 ? n < 1 : n < t->world) {
            zp_error("%s: %d ranks, but %d GPU(s) here%s%s", sl->world > 1 ? "Slurm" : "trainer.gpus",
                     t->world, n, n ? "" : ": ", n ? "" : err);
            return ZP_ECONFIG;
        }
        if (sl->world > 1)
            device = sl->local % n;
    }
    int rc = zp_gpu_open(&t->gpu, device, &t->mlp, t->ring->base, t->ring->map_bytes, t->lut,
                         (int)t->st->meta.shape[0], err, sizeof err);
    if (rc) {
        zp_error("cuda backend: %s", err);
        return rc;
    }
    zp_info("cuda backend: MLP with %d weight layers on %s; the ring (%zu bytes) is page-locked",
            t->mlp.nlayers, zp_gpu_name(t->gpu), t->ring->map_bytes);
    if (t->st->cfg.nan_at_step)
        zp_warn("trainer.debug.nan_at_step is not applied by the cuda backend");
    return t->world > 1 ? join_ranks(t) : 0;
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

int zp_trainer_main(zp_stage_t *st)
{
    static trainer_t t;
    t.st = st;
    zp_frames_init(&t.f);
    int rc = 0;
    for (int s = 0; s < ZP_SPLITS; s++)
        if (!(t.acc[s].seen = calloc((size_t)(st->meta.n[s] + 8) / 8, 1)))
            rc = ZP_ENOMEM;
    t.best = -1;
    t.world = zp_stage_world(st);
    t.resume_epoch = -1;
    t.rank = t.world > 1 ? st->instance : 0;
    if (!rc)
        rc = pick_backend(&t);
    if (!rc && t.backend != ZP_BACKEND_NULL) {
        rc = init_model(&t);
        t.ckpt_bytes = rc ? 0 : 8 + zp_mlp_state_bytes(&t.mlp);
        if (!rc && !(t.ckpt = malloc(t.ckpt_bytes)))
            rc = ZP_ENOMEM;
        char dir[PATH_MAX + 16];
        snprintf(dir, sizeof dir, "%s/checkpoints", st->run_dir);
        if (!rc && mkdir(dir, 0755) && errno != EEXIST)
            rc = -errno;
        if (!rc && st->mode == ZP_MODE_RESUME)
            rc = resume(&t);
        if (!rc && st->cfg.aug_where == ZP_AUG_IN_TRAINER && st->mode != ZP_MODE_EVAL &&
            st->mode != ZP_MODE_OVERFIT) /* overfit: the one batch as it is */
            rc = zp_augment_init(&t.aug, &st->cfg, &st->meta);
        /* the cpu backend augments into a batch buffer, the cuda backend needs the draws */
        size_t b = (size_t)st->cfg.batch_size;
        if (!rc && t.aug.on && t.backend == ZP_BACKEND_CPU &&
            !(t.augmented = malloc(sizeof(float) * b * (size_t)st->meta.elems)))
            rc = ZP_ENOMEM;
        if (!rc && t.aug.on && t.backend == ZP_BACKEND_CUDA && !(t.draws = malloc(sizeof *t.draws * b)))
            rc = ZP_ENOMEM;
    }
    if (!rc && st->meta.dtype == ZP_DTYPE_U8) { /* the table for the cpu backend and the GPU */
        if (!(t.lut = zp_normalize_lut(&st->cfg, st->meta.shape[0])))
            rc = ZP_ENOMEM;
        int normalise_here = t.backend == ZP_BACKEND_CPU ||
                             (t.backend == ZP_BACKEND_NULL && st->cfg.log_batches);
        if (!rc && normalise_here &&
            !(t.input = malloc(sizeof(float) * (size_t)st->cfg.batch_size * (size_t)st->meta.elems)))
            rc = ZP_ENOMEM;
    }
    if (!rc && t.world > 1 && t.backend == ZP_BACKEND_CPU) {
        for (int l = 0; l < t.mlp.nlayers; l++)
            t.gcount += (size_t)t.mlp.dims[l] * (size_t)t.mlp.dims[l + 1] + (size_t)t.mlp.dims[l + 1];
        if (!(t.gsum = malloc(t.gcount * sizeof *t.gsum)))
            rc = ZP_ENOMEM;
    }
    if (!rc && t.world > 1 && (rc = zp_comm_open(&t.comm, st, t.rank, t.world)))
        zp_error("trainer.gpus: rank %d of %d cannot reach the others: %s", t.rank, t.world,
                 zp_strerror(rc));
    if (!rc && st->cfg.log_batches) {
        char path[PATH_MAX + 32];
        if (t.rank)
            snprintf(path, sizeof path, "%s/batches-rank%d.log", st->run_dir, t.rank);
        else
            snprintf(path, sizeof path, "%s/batches.log", st->run_dir);
        if (!(t.batches = fopen(path, "a")))
            rc = -errno;
    }
    if (!rc)
        rc = open_ring(&t);
    if (!rc && t.backend == ZP_BACKEND_CUDA)
        rc = open_gpu(&t);
    if (!rc)
        rc = loop(&t);
    int64_t untimed = t.gpu ? zp_gpu_harvest(t.gpu, &st->timers, 1) : 0;
    if (untimed)
        zp_info("cuda backend: %lld batches went untimed (the event pool was full)",
                (long long)untimed);
    if (rc < 0 && rc != ZP_ESTOP)
        zp_error("stopped: %s", zp_strerror(rc));
    else if (rc == 1)
        zp_info("training finished after %lld steps", (long long)t.step);
    if (rc == 1 && st->mode == ZP_MODE_OVERFIT)
        rc = overfit_record(&t);
    zp_frames_close(&t.f);
    zp_sock_close(&t.sock);
    zp_gpu_close(t.gpu); /* unregisters the ring: before it is unmapped */
    zp_ring_destroy(&t.ring);
    zp_mlp_free(&t.mlp);
    zp_eval_close(&t.eval);
    zp_augment_free(&t.aug);
    zp_comm_close(&t.comm);
    free(t.gsum);
    free(t.augmented);
    free(t.lut);
    free(t.input);
    free(t.draws);
    free(t.ckpt);
    if (t.batches)
        fclose(t.batches);
    for (int s = 0; s < ZP_SPLITS; s++)
        free(t.acc[s].seen);
    return rc == 1 ? 0 : rc < 0 && rc != ZP_ESTOP ? 1 : 0;
}

/* checkpoints.c — the trainer's checkpoints: written every epoch (last, best,
 * epoch-N), pruned, and read back for --resume. */
#define _GNU_SOURCE
#include "stages/trainer/checkpoints.h"
#include "pipeline/stage/ckpt.h"
#include "pipeline/base/log.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int zp_checkpoints_open(zp_checkpoints_t *k, zp_stage_t *st, zp_backend_t *be, int writer)
{
    memset(k, 0, sizeof *k);
    k->st = st, k->be = be, k->writer = writer, k->best = -1;
    size_t state = be->ops->state_bytes(be);
    if (!state)
        return 0;
    k->bytes = 8 + state;
    if (!(k->buf = malloc(k->bytes)))
        return ZP_ENOMEM;
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/checkpoints", st->run_dir);
    if (mkdir(dir, 0755) && errno != EEXIST) {
        int rc = -errno;
        zp_error("%s: %s", dir, strerror(errno));
        return rc;
    }
    return 0;
}

void zp_checkpoints_close(zp_checkpoints_t *k)
{
    free(k->buf);
    k->buf = NULL;
}

void zp_checkpoints_write(zp_checkpoints_t *k, const char *name, int64_t step, uint64_t epoch,
                          uint64_t from, uint64_t batch, uint64_t flags)
{
    if (!k->buf || !k->writer)
        return;
    memcpy(k->buf, &k->best, 8);
    if (k->be->ops->save(k->be, k->buf + 8))
        return; /* logged */
    zp_ckpt_pos_t pos = {(uint64_t)step, epoch, batch, (uint64_t)k->st->cfg.seed, from,
                         (uint64_t)zp_stage_world(k->st), flags};
    char path[PATH_MAX + 64];
    zp_ckpt_path(path, sizeof path, k->st->run_dir, name);
    int rc = zp_ckpt_write(path, &pos, k->buf, k->bytes);
    if (rc)
        zp_error("%s: cannot write the checkpoint: %s", path, zp_strerror(rc));
}

void zp_checkpoints_epoch(zp_checkpoints_t *k, int64_t step, uint64_t epoch, double accuracy)
{
    const zp_config_t *c = &k->st->cfg;
    if (!c->ckpt_every_epochs || (epoch + 1) % (uint64_t)c->ckpt_every_epochs)
        return;
    int better = accuracy > k->best;
    if (better)
        k->best = accuracy;
    zp_checkpoints_write(k, "last", step, epoch + 1, 0, 0, 0);
    if (c->ckpt_keep != ZP_KEEP_LAST && better)
        zp_checkpoints_write(k, "best", step, epoch + 1, 0, 0, 0);
    if (c->ckpt_keep == ZP_KEEP_ALL) {
        char name[32];
        snprintf(name, sizeof name, "epoch-%llu", (unsigned long long)epoch + 1);
        zp_checkpoints_write(k, name, step, epoch + 1, 0, 0, 0);
    }
}

int zp_checkpoints_resume(zp_checkpoints_t *k, int64_t *step, int64_t *epoch, int64_t *from,
                          int64_t *batch, int *recorded)
{
    *epoch = *from = *batch = -1;
    *recorded = 0;
    if (!k->buf)
        return 0;
    char path[PATH_MAX + 64], err[600];
    zp_ckpt_path(path, sizeof path, zp_stage_run0(k->st), "last"); /* rank 0's, on every rank */
    zp_ckpt_pos_t pos;
    void *payload;
    size_t bytes;
    const zp_config_t *c = &k->st->cfg;
    int64_t samples = k->st->meta.n[ZP_SPLIT_TRAIN];
    int world = zp_stage_world(k->st);
    int rc = zp_ckpt_read(path, &pos, &payload, &bytes, err, sizeof err);
    if (!rc && (rc = zp_ckpt_check(&pos, path, c, samples, world, err, sizeof err)))
        free(payload);
    if (rc) {
        zp_error("cannot resume: %s", err);
        return rc;
    }
    if (bytes != k->bytes || k->be->ops->load(k->be, (uint8_t *)payload + 8, bytes - 8)) {
        zp_error("cannot resume: %s holds another model than trainer.model.hidden describes", path);
        free(payload);
        return ZP_EINVAL;
    }
    memcpy(&k->best, payload, 8);
    free(payload);
    uint64_t was = pos.world;
    if (zp_ckpt_regroup(&pos, c, samples, world))
        zp_info("resumed from %s with %d ranks, written by %llu: epoch %llu goes on at entry "
                "%llu of %lld of its permutation, step %llu", path, world,
                (unsigned long long)was, (unsigned long long)pos.epoch + 1,
                (unsigned long long)pos.from, (long long)samples, (unsigned long long)pos.step);
    *step = (int64_t)pos.step;
    *epoch = (int64_t)pos.epoch, *from = (int64_t)pos.from, *batch = (int64_t)pos.batch;
    *recorded = zp_ckpt_train_done(&pos);
    zp_info("resumed from %s: step %lld, epoch %llu, batch %llu", path, (long long)*step,
            (unsigned long long)pos.epoch + 1, (unsigned long long)pos.batch);
    return 0;
}

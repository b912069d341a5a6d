/* ckpt.c — checkpoint files: written whole beside and renamed into place, read
 * back with every header field checked against what the run allows. */
#define _GNU_SOURCE
#include "pipeline/stage/ckpt.h"
#include "pipeline/base/log.h"
#include "pipeline/dataset/sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

void zp_ckpt_path(char *buf, size_t len, const char *run_dir, const char *name)
{
    snprintf(buf, len, "%s/checkpoints/%s.ckpt", run_dir, name);
}

static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static int write_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -errno;
        p += w, n -= (size_t)w;
    }
    return 0;
}

/* fsync of the folder holding `path`: makes a rename in it durable. */
static int fsync_dir(const char *path)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    int fd = open(dir[0] ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) ? -errno : 0;
    close(fd);
    return rc;
}

int64_t zp_ckpt_epoch_batches(const zp_config_t *c, int64_t samples, int world)
{
    int64_t b = zp_sampler_shard_batches(samples, 0, world, c->batch_size, c->drop_last);
    return c->limit_train_batches && b > c->limit_train_batches ? c->limit_train_batches : b;
}

int zp_ckpt_check(const zp_ckpt_pos_t *pos, const char *path, const zp_config_t *c,
                  int64_t samples, int world, char *err, size_t errlen)
{
    uint64_t e = c->epochs > 0 ? (uint64_t)c->epochs : 0, n = samples > 0 ? (uint64_t)samples : 0;
    uint64_t w = pos->world ? pos->world : (uint64_t)world;
    uint64_t b = 0, one = (uint64_t)zp_ckpt_epoch_batches(c, samples, 1);
    if (pos->from <= n && w >= 1 && w <= ZP_CKPT_WORLD_MAX)
        b = (uint64_t)zp_ckpt_epoch_batches(c, samples - (int64_t)pos->from, (int)w);
    uint64_t most; /* steps before this position: epoch * one + ceil(from / batch) + batch */
    uint64_t bs = c->batch_size > 0 ? (uint64_t)c->batch_size : 1;
    uint64_t before = pos->from <= n ? (pos->from + bs - 1) / bs : 0;
    if (pos->epoch > e)
        snprintf(err, errlen, "%s: epoch %llu: the run has epochs 0..%llu (trainer.epochs %llu; "
                 "%llu: the run is over)", path, (unsigned long long)pos->epoch,
                 (unsigned long long)e - (e > 0), (unsigned long long)e, (unsigned long long)e);
    else if (pos->from > n || (pos->epoch == e && pos->from))
        snprintf(err, errlen, "%s: from %llu of epoch %llu: an epoch's permutation has entries "
                 "0..%llu (the epoch after the last starts at 0)", path,
                 (unsigned long long)pos->from, (unsigned long long)pos->epoch,
                 (unsigned long long)n);
    else if (pos->flags & ~(uint64_t)ZP_CKPT_TRAIN_RECORDED)
        snprintf(err, errlen, "%s: flags %#llx: this build knows bit 0 only", path,
                 (unsigned long long)pos->flags);
    else if (w < 1 || w > ZP_CKPT_WORLD_MAX)
        snprintf(err, errlen, "%s: world %llu: a run has 1..%d ranks", path,
                 (unsigned long long)pos->world, ZP_CKPT_WORLD_MAX);
    else if (pos->batch > b || (pos->epoch == e && pos->batch))
        snprintf(err, errlen, "%s: batch %llu of epoch %llu: an epoch has train batches 0..%llu "
                 "(%llu: after its last; the epoch after the last has none)", path,
                 (unsigned long long)pos->batch, (unsigned long long)pos->epoch,
                 (unsigned long long)b - (b > 0), (unsigned long long)b);
    else if (__builtin_mul_overflow(pos->epoch, one, &most) ||
             __builtin_add_overflow(most, before + pos->batch, &most) || pos->step > most)
        snprintf(err, errlen, "%s: step %llu at epoch %llu, batch %llu: at most %llu steps come "
                 "before it (%llu train batches an epoch on one rank)", path,
                 (unsigned long long)pos->step, (unsigned long long)pos->epoch,
                 (unsigned long long)pos->batch, (unsigned long long)most, (unsigned long long)one);
    else
        return 0;
    return ZP_EDATA;
}

int64_t zp_ckpt_offset(const zp_ckpt_pos_t *pos, const zp_config_t *c, int64_t samples, int world,
                       int64_t *repeats)
{
    int w = pos->world ? (int)pos->world : world;
    return zp_sampler_position((int64_t)pos->from, samples - (int64_t)pos->from, w, c->batch_size,
                               c->drop_last, NULL, (int64_t)pos->batch, repeats);
}

int zp_ckpt_regroup(zp_ckpt_pos_t *pos, const zp_config_t *c, int64_t samples, int world)
{
    return zp_ckpt_rebatch(pos, c, c, samples, world);
}

int zp_ckpt_rebatch(zp_ckpt_pos_t *pos, const zp_config_t *was, const zp_config_t *c,
                    int64_t samples, int world)
{
    if ((!pos->world || pos->world == (uint64_t)world) && was->batch_size == c->batch_size) {
        pos->world = (uint64_t)world;
        return 0;
    }
    int64_t repeats, at = zp_ckpt_offset(pos, was, samples, world, &repeats);
    int64_t epoch_steps = zp_ckpt_epoch_batches(c, samples, world);
    pos->step = pos->epoch * (uint64_t)epoch_steps + (uint64_t)(at / (c->batch_size * world));
    pos->from = (uint64_t)at, pos->batch = 0, pos->world = (uint64_t)world;
    return 1;
}

int zp_ckpt_train_done(const zp_ckpt_pos_t *pos)
{
    return (pos->flags & ZP_CKPT_TRAIN_RECORDED) != 0;
}

int zp_ckpt_write(const char *path, const zp_ckpt_pos_t *pos, const void *payload, size_t bytes)
{
    uint8_t h[ZP_CKPT_HDR] = {0};
    memcpy(h, "ZPCKPT01", 8);
    uint32_t hb = ZP_CKPT_HDR, ver = ZP_CKPT_VERSION;
    memcpy(h + 8, &hb, 4);
    memcpy(h + 12, &ver, 4);
    put64(h + 16, bytes);
    put64(h + 24, XXH3_64bits(payload, bytes));
    put64(h + 32, pos->step);
    put64(h + 40, pos->epoch);
    put64(h + 48, pos->batch);
    put64(h + 56, pos->seed);
    put64(h + 64, pos->from);
    put64(h + 72, pos->world);
    put64(h + 80, pos->flags);
    put64(h + 88, XXH3_64bits(h, 88));
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int rc = write_all(fd, h, sizeof h);
    if (!rc)
        rc = write_all(fd, payload, bytes);
    if (!rc && fsync(fd))
        rc = -errno;
    close(fd);
    if (!rc && rename(tmp, path))
        rc = -errno;
    if (rc)
        unlink(tmp);
    else
        rc = fsync_dir(path);
    return rc;
}

int zp_ckpt_read(const char *path, zp_ckpt_pos_t *pos, void **payload, size_t *bytes, char *err,
                 size_t errlen)
{
    if (payload)
        *payload = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -ENOENT;
    }
    struct stat st;
    uint8_t h[ZP_CKPT_HDR];
    int rc = ZP_EDATA;
    if (fstat(fileno(f), &st) || fread(h, 1, 16, f) != 16 || memcmp(h, "ZPCKPT01", 8)) {
        snprintf(err, errlen, "%s: not a zeus-pipe checkpoint (bad magic or shorter than its header)", path);
        goto out;
    }
    uint32_t hb, ver;
    memcpy(&hb, h + 8, 4);
    memcpy(&ver, h + 12, 4);
    size_t sum_at = ver == 2 ? 64 : 88; /* version 2: 72 bytes, no from, world and flags */
    if (!(hb == ZP_CKPT_HDR && ver == ZP_CKPT_VERSION) && !(hb == 72 && ver == 2)) {
        snprintf(err, errlen, "%s: checkpoint format version %u (header %u bytes), this build "
                 "reads 2 and %d", path, ver, hb, ZP_CKPT_VERSION);
        goto out;
    }
    if (fread(h + 16, 1, hb - 16, f) != hb - 16) {
        snprintf(err, errlen, "%s: shorter than its %u-byte header", path, hb);
        goto out;
    }
    if (XXH3_64bits(h, sum_at) != get64(h + sum_at)) {
        snprintf(err, errlen, "%s: header checksum mismatch (corrupt step, epoch, batch, seed, "
                 "from, world or flags)", path);
        goto out;
    }
    uint64_t n = get64(h + 16);
    if ((uint64_t)st.st_size != hb + n) {
        snprintf(err, errlen, "%s: truncated or extended: %lld bytes, the header says %llu", path,
                 (long long)st.st_size, (unsigned long long)(hb + n));
        goto out;
    }
    pos->step = get64(h + 32), pos->epoch = get64(h + 40), pos->batch = get64(h + 48);
    pos->seed = get64(h + 56);
    pos->from = ver == 2 ? 0 : get64(h + 64);
    pos->world = ver == 2 ? 0 : get64(h + 72);
    pos->flags = ver == 2 ? 0 : get64(h + 80);
    if (bytes)
        *bytes = n;
    if (!payload) {
        rc = 0;
        goto out;
    }
    void *p = malloc(n ? n : 1);
    if (!p || fread(p, 1, n, f) != n || XXH3_64bits(p, n) != get64(h + 24)) {
        snprintf(err, errlen, "%s: %s", path, p ? "payload checksum mismatch (corrupt)" : "out of memory");
        free(p);
        goto out;
    }
    *payload = p;
    rc = 0;
out:
    fclose(f);
    return rc;
}

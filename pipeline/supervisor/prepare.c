/* prepare.c — what the supervisor checks and makes before any stage starts:
 * the config and its dataset, the cache, room in /dev/shm, a resumed run's
 * checkpoint, and the run's CURVE keys. */
#define _GNU_SOURCE
#include "pipeline/image/augment.h"
#include "pipeline/cachedb/cachedb.h"
#include "pipeline/cachedb/cachedb_admin.h"
#include "pipeline/stage/ckpt.h"
#include "pipeline/net/keys.h"
#include "pipeline/base/log.h"
#include "pipeline/base/resources.h"
#include "pipeline/ring/ring.h"
#include "pipeline/source/source.h"
#include "pipeline/stage/stage.h"
#include "pipeline/supervisor/supervisor.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int zp_sup_load(int nargs, char **args, const char *force, zp_config_t *cfg, zp_dataset_t **ds)
{
    const char *file = NULL;
    char *over[256];
    int nover = 0;
    *ds = NULL;
    for (int i = 1; i < nargs; i++) {
        if (strchr(args[i], '=') && nover < 255)
            over[nover++] = args[i];
        else if (!file && args[i][0] != '-')
            file = args[i];
        else
            return -1;
    }
    if (!file)
        return -1;
    if (force)
        over[nover++] = (char *)force;
    char err[1024];
    if (zp_config_load(cfg, file, over, nover, err, sizeof err) ||
        zp_source_config(cfg, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    if (zp_source_probe(ds, cfg, err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: %s\n", err);
        return 2;
    }
    return 0;
}

/* Creates the cache or checks that it was built from this dataset and
 * transform, before any stage starts (and so before any fork). */
int zp_sup_prepare_cache(const zp_config_t *cfg, const zp_dataset_meta_t *meta)
{
    zp_cachedb_t db;
    char err[2048], who[400], busy[600];
    /* alone, to record or rebuild; while another run writes, only to use it as it is */
    snprintf(who, sizeof who, "zeus-pipe pid %d, %.300s", (int)getpid(), cfg->file);
    int lock = zp_cachedb_lock(cfg->cache_path, 1, who, busy, sizeof busy);
    if (lock < 0 && lock != -EBUSY) {
        fprintf(stderr, "zeus-pipe: cache.path: %s\n", busy);
        return lock;
    }
    int rc = zp_cachedb_open(&db, cfg, meta, 0, err, sizeof err);
    if (!rc) {
        rc = zp_cachedb_check(&db, cfg, meta, lock >= 0 ? NULL : busy, err, sizeof err);
        zp_cachedb_close(&db);
    }
    if (lock >= 0)
        close(lock);
    if (rc)
        fprintf(stderr, "zeus-pipe: %s\n", err);
    return rc;
}

int zp_sup_cache_size(const zp_config_t *cfg, const zp_dataset_meta_t *meta)
{
    double files = (double)(meta->files_bytes[ZP_SPLIT_TRAIN] + meta->files_bytes[ZP_SPLIT_TEST]);
    if (!cfg->cache_enabled || cfg->cache_encoding != ZP_ENC_RAW || !zp_augment_whole(cfg) ||
        files <= 0) /* zp_augment_whole: an image source cropped at assembly */
        return 0;
    zp_cachedb_t db;
    char err[1024];
    if (zp_cachedb_open(&db, cfg, meta, 1, err, sizeof err))
        return 0; /* nothing cached yet: nothing measured */
    char name[ZP_SPLITS][96];
    memcpy(name, db.name, sizeof name);
    zp_cachedb_close(&db);
    static zp_cachedb_admin_stat_t st; /* large */
    if (zp_cachedb_admin_stat(cfg->cache_path, &st, err, sizeof err))
        return 0;
    double whole = 0;
    for (int i = 0; i < st.n; i++)
        for (int s = 0; s < ZP_SPLITS; s++)
            if (!strcmp(st.db[i].name, name[s]) && st.db[i].per_sample)
                whole += (double)st.db[i].per_sample * (double)meta->n[s];
    if (whole <= 4 * files)
        return 0;
    fprintf(stderr, "zeus-pipe: cache: the whole images kept raw take about %.0f MiB once every "
            "sample is cached, for %.0f MiB of image files (%.1fx): cache.encoding: jpeg keeps "
            "them as JPEG, about a fifth of that, which the prefetch readers decode\n",
            whole / 1048576, files / 1048576, whole / files);
    return 1;
}

int zp_sup_say_cache(const zp_config_t *cfg, const zp_dataset_meta_t *meta)
{
    if (!cfg->cache_enabled)
        return 0;
    if (cfg->cache_default[0])
        fprintf(stderr, "zeus-pipe: cache: %s (cache.path unset: the default folder, %s)\n",
                cfg->cache_path, cfg->cache_default);
    else
        fprintf(stderr, "zeus-pipe: cache: %s\n", cfg->cache_path);
    return zp_sup_cache_size(cfg, meta);
}

/* The rings of this host's ranks fit in /dev/shm: said now, before any stage
 * starts, instead of a prefetch killed by SIGBUS. */
int zp_sup_shm_room(const zp_sup_t *s)
{
    char err[1024];
    int rings = s->slurm.world > 1 ? 1 : (int)s->cfg.gpus;
    if (!zp_ring_check_room(rings, (uint32_t)s->cfg.depth, s->cfg.batch_size, s->ds->meta.sample_bytes,
                            err, sizeof err))
        return 0;
    fprintf(stderr, "zeus-pipe: %s\n", err);
    return 2;
}

/* `up --resume RUN trainer.gpus=N`: RUN/config.yaml says N from now on (the
 * stages read it, and so does the next resume), written beside and renamed
 * into place. 0, or 1 with the error printed. */
static int rewrite_config(const zp_sup_t *s)
{
    char path[PATH_MAX + 32], tmp[PATH_MAX + 48];
    snprintf(path, sizeof path, "%s/config.yaml", s->run_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    int bad = !f;
    if (f) {
        zp_config_print(&s->cfg, f);
        bad = fflush(f) || fsync(fileno(f));
        bad |= fclose(f) != 0;
    }
    if (bad || rename(tmp, path)) {
        fprintf(stderr, "zeus-pipe: %s: cannot write: %s\n", path, strerror(errno));
        unlink(tmp);
        return 1;
    }
    return 0;
}

/* What an `up --resume RUN KEY=VALUE ...` may change, or 2 naming what not:
 * outside Slurm trainer.gpus (another number of ranks), loader.workers and
 * prefetch.batch_size (where batch_size x ranks stays: batch_kept); under
 * Slurm nothing (the tasks are the ranks, and every task would write the
 * run's config). */
static int resume_overrides_ok(const zp_sup_t *s)
{
    for (int i = 0; i < s->resume_noverrides; i++) {
        const char *o = s->resume_overrides[i];
        int gpus = !strncmp(o, "trainer.gpus=", 13), loaders = !strncmp(o, "loader.workers=", 15);
        int batch = !strncmp(o, "prefetch.batch_size=", 20);
        if (s->slurm.world > 1 || (!gpus && !loaders && !batch)) {
            fprintf(stderr, "zeus-pipe: up --resume %s: '%s': %s\n", s->run_dir, o,
                    s->slurm.world > 1
                    ? "under Slurm a resume takes no KEY=VALUE: its ranks are the job's tasks "
                      "(srun -n N), and its config is the run's"
                    : "a resumed run keeps its config (RUN/config.yaml); only trainer.gpus=N "
                      "(another number of ranks), loader.workers=N and prefetch.batch_size=N "
                      "(that keeps batch_size x ranks) can change");
            return 2;
        }
    }
    return 0;
}

/* A batch size changed on resume keeps the global batch (batch_size x
 * ranks: the steps of an epoch and what the learning rate was tuned for);
 * 0, or 2 naming the batch size that would. */
static int batch_kept(const zp_sup_t *s, const zp_config_t *was)
{
    int64_t global = was->batch_size * was->gpus;
    if (was->batch_size == s->cfg.batch_size || s->cfg.batch_size * s->cfg.gpus == global)
        return 0;
    char hint[80] = "";
    if (global % s->cfg.gpus == 0)
        snprintf(hint, sizeof hint, " (with %lld rank%s: prefetch.batch_size=%lld)",
                 (long long)s->cfg.gpus, s->cfg.gpus == 1 ? "" : "s",
                 (long long)(global / s->cfg.gpus));
    fprintf(stderr, "zeus-pipe: cannot resume %s with prefetch.batch_size=%lld and %lld ranks: its "
            "global batch was %lld x %lld = %lld samples a step, and the batch size may change "
            "only where that stays%s\n", s->run_dir, (long long)s->cfg.batch_size,
            (long long)s->cfg.gpus, (long long)was->batch_size, (long long)was->gpus,
            (long long)global, hint);
    return 2;
}

/* The regrouped position written back into last.ckpt (its payload as it
 * was) before the stages read it: they count its batches in the new batch
 * size. 0, or 1 with the error printed. */
static int rewrite_ckpt(const char *path, const zp_ckpt_pos_t *pos, const void *payload,
                        size_t bytes)
{
    int rc = zp_ckpt_write(path, pos, payload, bytes);
    if (rc)
        fprintf(stderr, "zeus-pipe: %s: cannot write: %s\n", path, strerror(-rc));
    return rc ? 1 : 0;
}

/* The checks of the position read back, and where it goes on (regrouped,
 * and rewritten where the batch size changed). 0, 1 or 2 with the error
 * printed. */
static int resume_position(zp_sup_t *s, const zp_config_t *was, zp_ckpt_pos_t *pos,
                           const char *path, const void *payload, size_t bytes)
{
    char err[1024];
    int world = s->slurm.world > 1 ? s->slurm.world : (int)s->cfg.gpus;
    int64_t n = s->ds->meta.n[ZP_SPLIT_TRAIN];
    /* its batches are counted in the batch size it was saved with */
    if (zp_ckpt_check(pos, path, was, n, world, err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: cannot resume: %s\n", err);
        return 2;
    }
    s->resume_world = pos->world ? (int)pos->world : world;
    if (pos->seed != (uint64_t)s->cfg.seed) {
        fprintf(stderr, "zeus-pipe: cannot resume: %s was written with seed %llu, the run's config says %lld\n",
                path, (unsigned long long)pos->seed, (long long)s->cfg.seed);
        return 2;
    }
    if (!pos->world && s->slurm.world < 2 && was->gpus != s->cfg.gpus) {
        fprintf(stderr, "zeus-pipe: cannot resume %s with trainer.gpus=%lld: its checkpoint is of "
                "format 2, which does not say how many ranks wrote it; resume it with its own "
                "trainer.gpus (%lld) first: the checkpoints that run writes can go on with "
                "another number\n", s->run_dir, (long long)s->cfg.gpus, (long long)was->gpus);
        return 2;
    }
    if (s->resume_world != world && s->cfg.limit_train_batches) {
        fprintf(stderr, "zeus-pipe: cannot resume %s with %d ranks where it had %d: "
                "trainer.limit_train_batches limits each rank's batches, which another number "
                "of ranks would not keep; resume it with %d\n", s->run_dir, world,
                s->resume_world, s->resume_world);
        return 2;
    }
    s->resume_batch = was->batch_size;
    if (zp_ckpt_rebatch(pos, was, &s->cfg, n, world) && was->batch_size != s->cfg.batch_size)
        return rewrite_ckpt(path, pos, payload, bytes);
    return 0;
}

int zp_sup_resume_config(zp_sup_t *s, zp_ckpt_pos_t *pos, char *path, size_t len)
{
    char err[1024];
    snprintf(path, len, "%s/config.yaml", s->run_dir);
    if (resume_overrides_ok(s))
        return 2;
    static zp_config_t was; /* the run's own, for the ranks a version 2 checkpoint had */
    if (zp_config_load_run(&was, path, err, sizeof err) ||
        zp_config_load_run_with(&s->cfg, path, s->resume_overrides, s->resume_noverrides, err,
                                sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    if (zp_source_probe(&s->own, &s->cfg, err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: %s\n", err);
        return 2;
    }
    s->ds = s->own;
    if (s->cfg.trainer_command.n) { /* its checkpoints are the program's own */
        fprintf(stderr, "zeus-pipe: cannot resume %s: its trainer is trainer.command, whose "
                "checkpoints are its own: start a new run (`zeus-pipe up CONFIG`) and resume in "
                "the program, with zeus_pipe's load_state_dict() from the state_dict() it "
                "saved\n", s->run_dir);
        return 2;
    }
    if (batch_kept(s, &was))
        return 2;
    void *payload;
    size_t bytes;
    zp_ckpt_path(path, len, s->run_dir, "last");
    if (zp_ckpt_read(path, pos, &payload, &bytes, err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: cannot resume: %s\n", err);
        return 2;
    }
    int rc = resume_position(s, &was, pos, path, payload, bytes);
    free(payload);
    if (!rc && s->resume_noverrides && rewrite_config(s)) /* last: a refused resume changes nothing */
        rc = 1;
    return rc;
}

int zp_sup_reopen(zp_sup_t *s, const char *dir)
{
    int rc;
    zp_rundir_cleanup(dir); /* what its killed supervisor left */
    zp_resources_clear_stopped(dir);
    if ((rc = zp_rundir_subdirs(dir))) {
        fprintf(stderr, "zeus-pipe: %s: cannot make sock/ or logs/: %s\n", dir, zp_strerror(rc));
        return 1;
    }
    if ((rc = zp_resources_start(dir))) {
        fprintf(stderr, "zeus-pipe: %s/resources: cannot write: %s\n", dir, zp_strerror(rc));
        return 1;
    }
    if (zp_sup_shm_room(s)) /* with the dead run's ring gone */
        return 2;
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/supervisor.pid", dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
    }
    return 0;
}

int zp_sup_find_stopped(zp_sup_t *s, const char *run, int live_check)
{
    if (zp_rundir_find(run, s->run_dir, sizeof s->run_dir))
        return 2;
    pid_t pid = live_check ? zp_rundir_live_pid(s->run_dir) : 0;
    if (pid) {
        fprintf(stderr, "zeus-pipe: %s is running (supervisor pid %d)\n", s->run_dir, (int)pid);
        return 2;
    }
    return 0;
}

int zp_sup_prepare_resume(zp_sup_t *s, const char *run)
{
    if (zp_sup_find_stopped(s, run, 1))
        return 2;
    char path[PATH_MAX + 64];
    int rc = zp_sup_resume_config(s, &s->resume, path, sizeof path);
    if (rc)
        return rc;
    if (s->cfg.cache_enabled && zp_sup_prepare_cache(&s->cfg, &s->ds->meta))
        return 2;
    if ((rc = zp_sup_reopen(s, s->run_dir)))
        return rc;
    zp_sup_say_resuming(s);
    s->procs.mode = ZP_MODE_RESUME;
    return 0;
}

void zp_sup_say_resuming(const zp_sup_t *s)
{
    fprintf(stderr, "zeus-pipe: resuming %s at epoch %llu, batch %llu (step %llu)", s->run_dir,
            (unsigned long long)s->resume.epoch + 1, (unsigned long long)s->resume.batch,
            (unsigned long long)s->resume.step);
    if (s->resume_batch && s->resume_batch != s->cfg.batch_size)
        fprintf(stderr, " with batch size %lld where it had %lld (the same %lld samples a step)",
                (long long)s->cfg.batch_size, (long long)s->resume_batch,
                (long long)(s->cfg.batch_size * (int64_t)s->resume.world));
    if (s->resume_world != (int)s->resume.world)
        fprintf(stderr, " with %llu ranks where it had %d: the rest of the epoch is sharded anew "
                "from entry %llu of its %lld\n", (unsigned long long)s->resume.world,
                s->resume_world, (unsigned long long)s->resume.from,
                (long long)s->ds->meta.n[ZP_SPLIT_TRAIN]);
    else
        fprintf(stderr, "\n");
}

/* The run's key pair RUN/NAME.key and NAME.pub, made once (kept across
 * --resume); with ranks > 1, one pair per rank 1..ranks-1 (keys.h). */
int zp_sup_run_key(const zp_sup_t *s, const char *name, int ranks)
{
    char base[PATH_MAX + 16], path[PATH_MAX + 32], err[PATH_MAX + 200];
    snprintf(base, sizeof base, "%s/%s", s->run_dir, name);
    snprintf(path, sizeof path, "%s.key", base);
    if (access(path, F_OK) && (ranks > 1 ? zp_keys_generate_ranks(base, ranks, err, sizeof err)
                                         : zp_keys_generate(base, err, sizeof err))) {
        fprintf(stderr, "zeus-pipe: %s\n", err);
        return ZP_EINVAL;
    }
    return 0;
}

/* transport.kind tcp: the run's CURVE key pair (kept across --resume). */
int zp_sup_server_keys(const zp_sup_t *s)
{
    char base[PATH_MAX + 16];
    snprintf(base, sizeof base, "%s/server", s->run_dir);
    if (zp_sup_run_key(s, "server", 0))
        return 2;
    fprintf(stderr, "zeus-pipe: remote loaders: zeus-pipe loader --connect HOST:%s --server-key "
                    "%s.pub --key NAME.key CONFIG (NAME.pub in %s)\n",
            strrchr(s->cfg.bind, ':') ? strrchr(s->cfg.bind, ':') + 1 : s->cfg.bind, base,
            s->cfg.allowed_keys);
    return 0;
}

/* cmd_up.c — `zeus-pipe up CONFIG [KEY=VALUE ...]`: the supervisor.
 *
 * Validates the config before anything starts, creates the run directory,
 * starts every stage as `zeus-pipe stage NAME`, watches them, and stops them
 * all — TERM, then KILL — when training ends, when a stage dies, on
 * SIGINT/SIGTERM or on `zeus-pipe down`. Signal handlers only set a flag; the
 * loop acts on it. Nothing it created (shared memory, sockets) outlives it. */
#define _GNU_SOURCE
#include "pipeline/cachedb.h"
#include "pipeline/ckpt.h"
#include "pipeline/cli/cmd.h"
#include "pipeline/config.h"
#include "pipeline/dataset.h"
#include "pipeline/keys.h"
#include "pipeline/log.h"
#include "pipeline/supervisor/proc.h"
#include "pipeline/ring.h"
#include "pipeline/records.h"
#include "pipeline/supervisor/rundir.h"
#include "pipeline/slurm.h"
#include "pipeline/sock.h"
#include "pipeline/stage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

char *openblas_get_corename(void);

typedef struct {
    zp_config_t cfg;
    char run_dir[PATH_MAX];
    zp_procs_t procs;
    void *zctx, *control;
    int64_t window_start; /* ns: the minute whose loader restarts are counted */
    int64_t restarts;     /* restarts in that minute */
    int loaders_wanted;   /* `scale` moves it */
    int trainers;         /* ranks here: the run is done when every trainer has finished */
    int loader_base;      /* the first loader instance number: 256 x the Slurm rank */
    zp_slurm_t slurm;     /* slurm.world > 1: this supervisor is one rank of `srun zeus-pipe up` */
    char meet[PATH_MAX + 64]; /* rank 0: the rendezvous file, removed at the end */
    char watch[PATH_MAX + 64]; /* rank r > 0: rank 0's rendezvous; gone when rank 0's run ended */
    int64_t watch_next, gone_since; /* ns */
} sup_t;

static volatile sig_atomic_t g_signal;
static void on_signal(int sig) { g_signal = sig; }

static int usage(FILE *out, int status)
{
    fprintf(out,
            "usage: zeus-pipe up CONFIG [KEY=VALUE ...]\n"
            "       zeus-pipe up --resume RUN\n\n"
            "Runs the training pipeline described by CONFIG: loaders, cache, prefetch,\n"
            "trainer and logger processes. KEY=VALUE overrides a config key, e.g.\n"
            "loader.workers=4 trainer.optimizer.lr=0.05 (see `zeus-pipe config --keys`).\n"
            "The run's files go to run.dir/run.name (default runs/<config name>).\n"
            "--resume RUN goes on from RUN's checkpoints/last.ckpt, in the same run\n"
            "directory and with its config: the same batches an uninterrupted run trains on.\n"
            "Ctrl-C stops every stage within 2 s. Exit: 0 done, 1 a stage failed,\n"
            "2 bad config, 128+N stopped by signal N.\n\n"
            "Under Slurm (`srun zeus-pipe up CONFIG`, with SLURM_PROCID, SLURM_NTASKS,\n"
            "SLURM_LOCALID and SLURM_NODELIST set) every task is one rank: rank 0 runs\n"
            "the cache and logger on tcp (transport.bind's port and the next three, with\n"
            "CURVE), the others run their loaders, prefetch and trainer in RUN/rank-<r>/\n"
            "and connect to it. run.dir must be on a filesystem every node sees.\n");
    return status;
}

/* Debian's OpenBLAS 0.3.21 does not know newer CPUs and picks older kernels
 * for them (Haswell's on an AVX-512 machine: about 3x slower on a GEMM). Pick
 * the newest core type the CPU supports unless the user chose one. */
static void tune_openblas(void)
{
    const char *env = getenv("OPENBLAS_CORETYPE");
    const char *core = env ? env : openblas_get_corename();
    if (!core)
        return;
    __builtin_cpu_init();
    static const char *old[] = {"Prescott", "Core2", "Nehalem", "Sandybridge", "Haswell", "Zen"};
    int is_old = 0;
    for (size_t i = 0; i < sizeof old / sizeof old[0]; i++)
        is_old |= !strcasecmp(core, old[i]);
    const char *pick = NULL;
    if (is_old && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
        pick = "SkylakeX";
    else if (is_old && strcasecmp(core, "Haswell") && strcasecmp(core, "Zen") &&
             __builtin_cpu_supports("avx2"))
        pick = "Haswell";
    if (pick && env)
        fprintf(stderr, "zeus-pipe: note: OPENBLAS_CORETYPE=%s is older than this CPU; the cpu "
                        "trainer's GEMMs would run faster with OPENBLAS_CORETYPE=%s\n", env, pick);
    else if (pick) {
        setenv("OPENBLAS_CORETYPE", pick, 1);
        fprintf(stderr, "zeus-pipe: OpenBLAS picked %s kernels; this CPU runs %s kernels "
                        "(set OPENBLAS_CORETYPE to choose)\n", core, pick);
    }
}

static void cleanup(sup_t *s)
{
    zp_rundir_cleanup(s->procs.run_dir);
    if (s->meet[0])
        unlink(s->meet);
}

static int loaders_running(const sup_t *s)
{
    int n = 0;
    for (int i = 0; i < s->procs.nchild; i++) {
        const zp_child_t *c = &s->procs.child[i];
        n += !strcmp(c->stage, "loader") && (c->pid > 0 || c->restart_at) && !c->retiring;
    }
    return n;
}

/* `scale loader=N|+K|-K`: starts new loaders or retires the newest ones.
 * Returns 0, or an error for the requester in err. */
static int scale(sup_t *s, const char *arg, char *err, size_t len)
{
    const char *v = !strncmp(arg, "loader=", 7) ? arg + 7 : NULL;
    char *end = NULL;
    long k = v ? strtol(v, &end, 10) : 0;
    if (!v || end == v || *end || k < -1000 || k > 1000) {
        snprintf(err, len, "expected loader=N, loader=+K or loader=-K (got %.60s)", arg);
        return ZP_EINVAL;
    }
    int now = loaders_running(s);
    long want = v[0] == '+' || v[0] == '-' ? now + k : k;
    if (want < 1 || want > 256) {
        snprintf(err, len, "loader count must stay within 1..256 (asked for %ld)", want);
        return ZP_EINVAL;
    }
    for (int next = s->loader_base; now < want && next < s->loader_base + 1024; next++) {
        /* the lowest free instance numbers */
        int taken = 0;
        for (int i = 0; i < s->procs.nchild; i++) {
            zp_child_t *c = &s->procs.child[i];
            taken |= !strcmp(c->stage, "loader") && c->instance == next && (c->pid > 0 || c->restart_at);
        }
        if (!taken && zp_procs_spawn(&s->procs, "loader", next, 0) == 0)
            now++;
    }
    for (int i = s->procs.nchild - 1; i >= 0 && now > want; i--) { /* the newest retire */
        zp_child_t *c = &s->procs.child[i];
        if (strcmp(c->stage, "loader") || c->retiring || (!c->pid && !c->restart_at))
            continue;
        if (c->pid)
            kill(c->pid, SIGUSR1), c->retiring = 1;
        else
            c->restart_at = 0; /* a pending restart is simply not done */
        now--;
    }
    s->loaders_wanted = (int)want;
    fprintf(stderr, "zeus-pipe: scaled to %ld loader(s)\n", want);
    return 0;
}

/* Answers one control request; returns 1 when it asks the run to stop. */
static int on_control(sup_t *s)
{
    zp_frames_t f;
    zp_frames_init(&f);
    if (zp_frames_recv(&f, s->control, ZMQ_DONTWAIT))
        return 0;
    zp_msg_t m;
    char why[256];
    int rc = zp_frames_decode(&f, 0, &m, why, sizeof why);
    zp_msg_t rep = {.type = ZP_MSG_CTL_REP};
    int down = !rc && m.type == ZP_MSG_CTL && !strcmp(m.cmd, "down");
    if (!rc && m.type == ZP_MSG_CTL && !strncmp(m.cmd, "scale ", 6)) {
        if (scale(s, m.cmd + 6, rep.error, sizeof rep.error))
            rep.present |= ZP_B(error);
    } else if (!down) {
        rep.present |= ZP_B(error);
        snprintf(rep.error, sizeof rep.error, "unknown request: %.200s", rc ? why : m.cmd);
    }
    zp_send(s->control, NULL, &rep, NULL, NULL, 0, 0);
    zp_msg_release(&m);
    zp_frames_close(&f);
    return down;
}

/* Every stage of this host: under Slurm rank 0's host also runs the logger
 * and the cache, and each host one rank; otherwise trainer.gpus ranks. */
static int start_all(sup_t *s)
{
    int slurm = s->slurm.world > 1, rc = 0;
    if (!slurm || s->slurm.rank == 0) {
        rc = zp_procs_spawn(&s->procs, "logger", 0, 1);
        if (!rc)
            rc = zp_procs_spawn(&s->procs, "cache", 0, 0);
    }
    s->loader_base = slurm ? 256 * s->slurm.rank : 0; /* loader.workers <= 256: no two alike */
    for (int i = 0; !rc && i < s->cfg.loader_workers; i++)
        rc = zp_procs_spawn(&s->procs, "loader", s->loader_base + i, 0);
    int first = slurm ? s->slurm.rank : 0, ranks = 1;
    if (!slurm && (s->procs.mode == ZP_MODE_TRAIN || s->procs.mode == ZP_MODE_RESUME))
        ranks = (int)s->cfg.gpus; /* as zp_stage_world() */
    for (int r = first; !rc && r < first + ranks; r++)
        rc = zp_procs_spawn(&s->procs, "prefetch", r, 0);
    for (int r = first; !rc && r < first + ranks; r++)
        rc = zp_procs_spawn(&s->procs, "trainer", r, 0);
    s->trainers = ranks;
    return rc;
}

/* Loaders that exited: retired ones are done; one that had delivered samples
 * (killed at work: the OOM killer, a preempted host) is always restarted, in
 * 50 ms; one that died before it delivered anything restarts after a
 * back-off (50 ms, doubling with each death of that loader within a minute,
 * to 1.6 s), at most loader.max_restarts_per_min in a minute: a loader that
 * crashes on start is given up on quickly. Returns 1 when no loader is left. */
static int tend_loaders(sup_t *s)
{
    int64_t now = zp_now_ns();
    if (now - s->window_start > 60000000000ll)
        s->window_start = now, s->restarts = 0;
    for (int i = 0; i < s->procs.nchild; i++) {
        zp_child_t *c = &s->procs.child[i];
        if (strcmp(c->stage, "loader"))
            continue;
        if (c->exited) {
            c->exited = 0;
            char how[128];
            zp_procs_describe(c, how, sizeof how);
            if (c->retiring) {
                fprintf(stderr, "zeus-pipe: loader[%d] retired\n", c->instance);
                c->retiring = 0;
                continue;
            }
            if (c->delivered) {
                c->deaths = 0;
                c->restart_at = now + 50000000ll;
                fprintf(stderr, "zeus-pipe: loader[%d] %s after delivering samples; restarting it in 50 ms\n",
                        c->instance, how);
                continue;
            }
            if (s->restarts >= s->cfg.max_restarts) {
                fprintf(stderr, "zeus-pipe: loader[%d] %s; not restarted: %lld restart(s) in the last "
                        "minute (loader.max_restarts_per_min); going on with %d loader(s)\n",
                        c->instance, how, (long long)s->restarts, loaders_running(s));
                continue;
            }
            int64_t delay = zp_restart_backoff(&c->deaths, &c->last_death, now);
            c->restart_at = now + delay;
            s->restarts++;
            fprintf(stderr, "zeus-pipe: loader[%d] %s; restarting it in %lld ms\n", c->instance, how,
                    (long long)(delay / 1000000));
        }
        if (c->restart_at && now >= c->restart_at && !c->pid &&
            zp_procs_spawn(&s->procs, "loader", c->instance, 0))
            c->restart_at = now + 1000000000; /* cannot fork now: try again in a second */
    }
    return loaders_running(s) == 0;
}

/* Rank r > 0: 1 when rank 0's run ended (its rendezvous file is gone) more
 * than 10 s ago while this rank still trains: stopped by `zeus-pipe down` or
 * a signal, rank 0 no longer answers the sums. Looked at once a second. */
static int rank0_gone(sup_t *s)
{
    int64_t now = zp_now_ns();
    if (!s->watch[0] || now < s->watch_next)
        return 0;
    s->watch_next = now + 1000000000ll;
    if (access(s->watch, F_OK) == 0)
        s->gone_since = 0;
    else if (!s->gone_since)
        s->gone_since = now;
    return s->gone_since && now - s->gone_since > 10000000000ll;
}

static int supervise(sup_t *s)
{
    int status = -1, trainer_done = 0;
    while (status < 0) {
        zmq_pollitem_t it = {s->control, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) > 0 && on_control(s)) {
            fprintf(stderr, "zeus-pipe: stopping: asked by zeus-pipe down\n");
            status = 0;
        }
        if (g_signal) {
            status = 128 + g_signal;
            break;
        }
        zp_child_t *bad = zp_procs_reap(&s->procs, &trainer_done);
        if (bad && g_signal) {
            status = 128 + g_signal; /* it died of the same Ctrl-C */
        } else if (bad) {
            char how[128];
            zp_procs_describe(bad, how, sizeof how);
            fprintf(stderr, "zeus-pipe: %s[%d] %s; stopping the run\n", bad->stage, bad->instance, how);
            zp_procs_log_tail(&s->procs, bad);
            status = 1;
        } else if (trainer_done >= s->trainers) {
            status = 0;
        } else if (rank0_gone(s)) {
            fprintf(stderr, "zeus-pipe: Slurm rank %d: rank 0's run has ended (%s is gone) while this "
                            "rank trains; stopping\n", s->slurm.rank, s->watch);
            status = 1;
        } else if (tend_loaders(s)) {
            fprintf(stderr, "zeus-pipe: no loader left; stopping the run\n");
            status = 1;
        }
    }
    int quick = status >= 128;
    zp_procs_stop(&s->procs, 0, quick ? 1000 : 3000);
    zp_procs_stop(&s->procs, 1, quick ? 800 : 5000);
    return status;
}

/* Creates the cache or checks that it was built from this dataset and
 * transform, before any stage starts (and so before any fork). */
int zp_cache_prepare(const zp_config_t *cfg, const zp_dataset_meta_t *meta)
{
    zp_cachedb_t db;
    char err[1024];
    int rc = zp_cachedb_open(&db, cfg, meta, 0, err, sizeof err);
    if (!rc) {
        rc = zp_cachedb_check(&db, cfg, meta, err, sizeof err);
        zp_cachedb_close(&db);
    }
    if (rc)
        fprintf(stderr, "zeus-pipe: %s\n", err);
    return rc;
}

/* The rings of this host's ranks fit in /dev/shm: said now, before any stage
 * starts, instead of a prefetch killed by SIGBUS. */
static int shm_room(const sup_t *s, const zp_dataset_meta_t *meta)
{
    char err[1024];
    int rings = s->slurm.world > 1 ? 1 : (int)s->cfg.gpus;
    if (!zp_ring_check_room(rings, (uint32_t)s->cfg.depth, s->cfg.batch_size, meta->sample_bytes,
                            err, sizeof err))
        return 0;
    fprintf(stderr, "zeus-pipe: %s\n", err);
    return 2;
}

/* `--resume RUN`: the run's own config, its directory, and a checkpoint that reads back. */
static int prepare_resume(sup_t *s, const char *run)
{
    if (zp_find_run(run, s->run_dir, sizeof s->run_dir))
        return 2;
    pid_t pid = zp_rundir_live_pid(s->run_dir);
    if (pid) {
        fprintf(stderr, "zeus-pipe: %s is running (supervisor pid %d)\n", s->run_dir, (int)pid);
        return 2;
    }
    char path[PATH_MAX + 64], err[1024];
    snprintf(path, sizeof path, "%s/config.yaml", s->run_dir);
    zp_dataset_meta_t meta;
    if (zp_config_load(&s->cfg, path, NULL, 0, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    if (zp_dataset_probe(&s->cfg, &meta, err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: %s\n", err);
        return 2;
    }
    zp_ckpt_pos_t pos;
    void *payload;
    zp_ckpt_path(path, sizeof path, s->run_dir, "last");
    if (zp_ckpt_read(path, &pos, &payload, NULL, err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: cannot resume: %s\n", err);
        return 2;
    }
    free(payload);
    if (pos.seed != (uint64_t)s->cfg.seed) {
        fprintf(stderr, "zeus-pipe: cannot resume: %s was written with seed %llu, the run's config says %lld\n",
                path, (unsigned long long)pos.seed, (long long)s->cfg.seed);
        return 2;
    }
    if (s->cfg.cache_enabled && zp_cache_prepare(&s->cfg, &meta))
        return 2;
    zp_rundir_cleanup(s->run_dir); /* what its killed supervisor left */
    int rc = zp_records_start(s->run_dir);
    if (rc) {
        fprintf(stderr, "zeus-pipe: %s/resources: cannot write: %s\n", s->run_dir, zp_strerror(rc));
        return 1;
    }
    if (shm_room(s, &meta)) /* with the dead run's ring gone */
        return 2;
    snprintf(path, sizeof path, "%s/supervisor.pid", s->run_dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
    }
    fprintf(stderr, "zeus-pipe: resuming %s at epoch %llu, batch %llu (step %llu)\n", s->run_dir,
            (unsigned long long)pos.epoch + 1, (unsigned long long)pos.batch,
            (unsigned long long)pos.step);
    s->procs.mode = ZP_MODE_RESUME;
    return 0;
}

/* The run's key pair RUN/NAME.key and NAME.pub, made once (kept across
 * --resume); with ranks > 1, one pair per rank 1..ranks-1 (keys.h). */
static int run_key(const sup_t *s, const char *name, int ranks)
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

/* ---- Slurm: every task one rank (pipeline/slurm.h) ------------------------------------------ */

/* Rank 0: the ranks' keys (a CURVE pair each; rank 0's stages let a rank's
 * key in as that rank, pipeline/zap.h) and the rendezvous, written whole
 * and then renamed. */
static int slurm_announce(sup_t *s)
{
    char path[PATH_MAX + 80];
    if (run_key(s, "ranks", s->slurm.world))
        return 2;
    zp_slurm_meet_path(s->meet, sizeof s->meet, s->cfg.run_dir, &s->slurm);
    snprintf(path, sizeof path, "%s.tmp", s->meet);
    FILE *f = fopen(path, "w");
    int ok = f && fprintf(f, "run %s\nhost %s\nbind %s\n", s->run_dir, s->slurm.host, s->cfg.bind) > 0;
    if (f && fclose(f))
        ok = 0;
    if (!ok || rename(path, s->meet)) {
        fprintf(stderr, "zeus-pipe: %s: %s\n", s->meet, strerror(errno));
        s->meet[0] = 0;
        return 2;
    }
    fprintf(stderr, "zeus-pipe: Slurm rank 0 of %d on %s: the other ranks connect to ports %s+0..3\n",
            s->slurm.world, s->slurm.host, s->cfg.bind);
    return 0;
}

/* 0 when rank 0's resolved config (RUN/config.yaml) is ours, word for word:
 * ranks that trained different models would sum nonsense. */
static int same_config(const sup_t *s, const char *run0)
{
    char path[PATH_MAX + 32], *mine = NULL, *theirs = NULL;
    size_t n = 0, m = 0;
    FILE *ms = open_memstream(&mine, &n);
    if (!ms)
        return 1;
    zp_config_print(&s->cfg, ms);
    fclose(ms);
    snprintf(path, sizeof path, "%s/config.yaml", run0);
    FILE *f = fopen(path, "r");
    int rc = !f || getdelim(&theirs, &m, 0, f) < 0;
    if (f)
        fclose(f);
    if (rc)
        fprintf(stderr, "zeus-pipe: %s: %s\n", path, strerror(errno ? errno : EIO));
    const char *a = mine, *b = theirs;
    while (!rc && (*a || *b)) {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        if (la != lb || memcmp(a, b, la)) {
            fprintf(stderr, "zeus-pipe: Slurm rank %d: its config differs from rank 0's (%s):\n"
                    "  rank 0:    %.*s\n  this rank: %.*s\n", s->slurm.rank, path, (int)lb, b, (int)la, a);
            rc = 1;
        }
        a += la + !!a[la], b += lb + !!b[lb];
    }
    free(mine);
    free(theirs);
    return rc;
}

/* Rank r > 0: waits up to trainer.comm_timeout_s for rank 0's rendezvous,
 * then makes RUN/rank-<r> its run directory, with the same resolved config. */
static int slurm_join(sup_t *s)
{
    char path[PATH_MAX + 64], line[PATH_MAX + 32], run0[PATH_MAX] = "", host[256] = "", bind[256] = "";
    zp_slurm_meet_path(path, sizeof path, s->cfg.run_dir, &s->slurm);
    fprintf(stderr, "zeus-pipe: Slurm rank %d of %d: waiting for rank 0 to announce itself in %s\n",
            s->slurm.rank, s->slurm.world, path);
    int64_t deadline = zp_now_ns() + s->cfg.comm_timeout_s * 1000000000ll;
    FILE *f;
    while (!(f = fopen(path, "r"))) {
        if (zp_now_ns() > deadline) {
            fprintf(stderr, "zeus-pipe: Slurm rank %d: no word from rank 0 within trainer.comm_timeout_s "
                    "(%lld s): did rank 0 start, and is run.dir (%s) on a filesystem every node sees?\n",
                    s->slurm.rank, (long long)s->cfg.comm_timeout_s, s->cfg.run_dir);
            return 1;
        }
        usleep(100000);
    }
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "run ", 4))
            snprintf(run0, sizeof run0, "%.4000s", line + 4);
        else if (!strncmp(line, "host ", 5))
            snprintf(host, sizeof host, "%.250s", line + 5);
        else if (!strncmp(line, "bind ", 5))
            snprintf(bind, sizeof bind, "%.250s", line + 5);
    }
    fclose(f);
    if (!run0[0] || !host[0] || strcmp(bind, s->cfg.bind)) {
        fprintf(stderr, "zeus-pipe: %s: expected run, host and bind %s (got run '%s', host '%s', bind '%s')\n",
                path, s->cfg.bind, run0, host, bind);
        return 2;
    }
    if (same_config(s, run0))
        return 2;
    snprintf(s->slurm.host, sizeof s->slurm.host, "%s", host);
    snprintf(s->watch, sizeof s->watch, "%s", path);
    char name[32];
    snprintf(name, sizeof name, "rank-%d", s->slurm.rank);
    int rc = zp_rundir_make(&s->cfg, run0, name, s->run_dir, sizeof s->run_dir);
    /* in rank 0's record: a cleanup of the run reaches this rank's leftovers */
    return rc ? rc : zp_records_add(run0, "run", s->run_dir) ? 1 : 0;
}

/* `srun zeus-pipe up CONFIG`: this task's part of the run. */
static int prepare_slurm(sup_t *s, const zp_dataset_meta_t *meta)
{
    s->cfg.transport = ZP_TRANSPORT_TCP; /* rank 0 takes the other hosts' loaders */
    const char *colon = strrchr(s->cfg.bind, ':');
    long port = colon ? strtol(colon + 1, NULL, 10) : 0;
    if (port < 1 || port > 65532) {
        fprintf(stderr, "zeus-pipe: transport.bind: under Slurm rank 0 listens on its port and the "
                        "next three; expected HOST:PORT with PORT 1..65532 (got %s)\n", s->cfg.bind);
        return 2;
    }
    if (s->cfg.gpus != 1 && s->slurm.rank == 0)
        fprintf(stderr, "zeus-pipe: note: trainer.gpus is %lld, but under Slurm each of the %d tasks is "
                        "one rank (ask Slurm for the tasks: srun --ntasks-per-node=GPUS)\n",
                (long long)s->cfg.gpus, s->slurm.world);
    if (s->slurm.rank > 0)
        return slurm_join(s); /* no cache of its own: rank 0's host holds it */
    if (s->cfg.cache_enabled && zp_cache_prepare(&s->cfg, meta))
        return 2;
    return zp_rundir_start(&s->cfg, s->cfg.run_name, s->run_dir, sizeof s->run_dir);
}

static int prepare(sup_t *s, int argc, char **argv)
{
    char why[512];
    int slurm = zp_slurm_detect(&s->slurm, why, sizeof why);
    if (slurm < 0) {
        fprintf(stderr, "zeus-pipe: Slurm: %s\n", why);
        return 2;
    }
    if (argc >= 2 && !strcmp(argv[1], "--resume") && slurm) {
        fprintf(stderr, "zeus-pipe: up --resume is not supported under Slurm yet (%d tasks); "
                        "resume with one task, or start a new run\n", s->slurm.world);
        return 2;
    }
    if (argc >= 2 && !strcmp(argv[1], "--resume"))
        return argc == 3 ? prepare_resume(s, argv[2]) : usage(stderr, 2);
    zp_dataset_meta_t meta;
    int rc = zp_cli_load(argc, argv, NULL, &s->cfg, &meta);
    if (rc)
        return rc < 0 ? usage(stderr, 2) : rc;
    if (s->cfg.fast_dev_run) {
        /* The run's config.yaml keeps these values: stages read no flag. */
        s->cfg.epochs = s->cfg.limit_train_batches = s->cfg.limit_test_batches = 1;
        s->cfg.ckpt_every_epochs = s->cfg.ckpt_every_steps = 0;
        fprintf(stderr, "zeus-pipe: fast_dev_run: one train batch, one test batch, no checkpoint\n");
    }
    if (shm_room(s, &meta))
        return 2;
    if (slurm)
        return prepare_slurm(s, &meta);
    if (s->cfg.cache_enabled && zp_cache_prepare(&s->cfg, &meta))
        return 2;
    return zp_rundir_start(&s->cfg, s->cfg.run_name, s->run_dir, sizeof s->run_dir);
}

/* Runs every stage of the run in s->run_dir until training ends; the exit status. */
static int run_stages(sup_t *s)
{
    tune_openblas();
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    char ep[ZP_ENDPOINT_MAX + 16];
    s->zctx = zmq_ctx_new();
    if (zp_endpoint(ep, sizeof ep, s->run_dir, "control")) {
        fprintf(stderr, "zeus-pipe: %s: path too long for UNIX sockets; choose a shorter run.dir\n", s->run_dir);
        cleanup(s);
        return 2;
    }
    s->control = zp_sock_open(s->zctx, ZMQ_REP, ep, 1, 0);
    fprintf(stderr, "zeus-pipe: run %s: %lld loader(s), batch %lld, %lld epoch(s)\n", s->run_dir,
            (long long)s->cfg.loader_workers, (long long)s->cfg.batch_size, (long long)s->cfg.epochs);
    int status = !s->control ? 1 : start_all(s) ? 1 : 0;
    if (status)
        fprintf(stderr, "zeus-pipe: cannot start the stages\n");
    status = status ? (zp_procs_stop(&s->procs, 0, 1000), zp_procs_stop(&s->procs, 1, 1000), 1) : supervise(s);
    zp_sock_close(&s->control);
    zmq_ctx_term(s->zctx);
    cleanup(s);
    if (status == 0)
        fprintf(stderr, "zeus-pipe: run finished: %s\n", s->run_dir);
    else if (status >= 128)
        fprintf(stderr, "zeus-pipe: stopped by signal %d; every stage stopped\n", status - 128);
    return status;
}

/* transport.kind tcp: the run's CURVE key pair (kept across --resume). */
static int server_keys(const sup_t *s)
{
    char base[PATH_MAX + 16];
    snprintf(base, sizeof base, "%s/server", s->run_dir);
    if (run_key(s, "server", 0))
        return 2;
    fprintf(stderr, "zeus-pipe: remote loaders: zeus-pipe loader --connect HOST:%s --server-key "
                    "%s.pub --key NAME.key CONFIG (NAME.pub in %s)\n",
            strrchr(s->cfg.bind, ':') ? strrchr(s->cfg.bind, ':') + 1 : s->cfg.bind, base,
            s->cfg.allowed_keys);
    return 0;
}

/* Supervises s->run_dir in `mode` until the run ends; the exit status. */
static int supervise_run(sup_t *s, int mode, const char *ckpts)
{
    zp_procs_init(&s->procs, s->run_dir);
    s->procs.mode = mode;
    s->procs.keep_loaders = 1;
    s->window_start = zp_now_ns();
    s->restarts = 0;
    snprintf(s->procs.ckpts, sizeof s->procs.ckpts, "%s", ckpts ? ckpts : "");
    if (s->cfg.transport == ZP_TRANSPORT_TCP && s->slurm.rank == 0 && server_keys(s))
        return 2;
    if (s->slurm.world > 1) {
        if (s->slurm.rank == 0 && slurm_announce(s))
            return 2;
        setenv(ZP_SLURM_ENV, s->slurm.host, 1); /* the stages are ranks' stages */
    }
    return run_stages(s);
}

int zp_pipeline_run(const zp_config_t *cfg, const char *run_dir, int mode, const char *ckpts)
{
    static sup_t s;
    s.cfg = *cfg;
    snprintf(s.run_dir, sizeof s.run_dir, "%s", run_dir);
    return supervise_run(&s, mode, ckpts);
}

int cmd_up(int argc, char **argv)
{
    if (zp_wants_help(argc, argv))
        return usage(stdout, 0);
    static sup_t s;
    int rc = prepare(&s, argc, argv);
    if (rc)
        return rc;
    return supervise_run(&s, s.procs.mode, NULL);
}

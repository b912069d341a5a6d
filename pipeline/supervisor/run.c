/* run.c — the supervisor's loop: starts every stage of this host, watches
 * them, restarts dead loaders, answers control requests (scale, down) and
 * stops them all — TERM, then KILL — when training ends, when a stage dies,
 * on SIGINT/SIGTERM or on `zeus-pipe down`. Signal handlers only set a flag;
 * the loop acts on it. Nothing it created (shared memory, sockets) outlives
 * it. The contract: supervisor.h. */
#define _GNU_SOURCE
#include "pipeline/stage/ckpt.h"
#include "pipeline/base/log.h"
#include "pipeline/base/names.h"
#include "pipeline/base/resources.h"
#include "pipeline/net/inbox.h"
#include "pipeline/net/sock.h"
#include "pipeline/stage/stage.h"
#include "pipeline/supervisor/supervisor.h"

#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

char *openblas_get_corename(void);

static volatile sig_atomic_t g_signal, g_save;
static void on_signal(int sig) { g_signal = sig; }
static void on_save(int sig) { g_save = sig; }

void zp_sup_catch_save(void)
{
    struct sigaction va = {.sa_handler = on_save};
    sigaction(SIGUSR1, &va, NULL);
}

/* SIGUSR1: every trainer of this host finishes its step and saves (under
 * Slurm it got the signal itself too; a program is told the same way, and
 * the package's zp.stop_requested() says so). The other stages go on until
 * the trainers have ended. `up --attach` leaves it to the programs that
 * attached (they are not its children): it ends when they detach. */
static void forward_save(zp_sup_t *s)
{
    for (int i = 0; i < s->procs.nchild; i++)
        if (s->procs.child[i].stage == ZP_STAGE_TRAINER && s->procs.child[i].pid > 0)
            kill(s->procs.child[i].pid, SIGUSR1);
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

/* The first trainer rank of this host: its Slurm rank, else 0. */
static int first_rank(const zp_sup_t *s) { return s->slurm.world > 1 ? s->slurm.rank : 0; }

static void cleanup(zp_sup_t *s)
{
    for (int r = first_rank(s); s->procs.run_dir[0] && r < first_rank(s) + s->trainers; r++) {
        char mark[PATH_MAX + 64]; /* the programs' attach marks: read, and no use after the run */
        zp_resources_attach_path(mark, sizeof mark, s->procs.run_dir, r);
        unlink(mark);
    }
    zp_rundir_cleanup(s->procs.run_dir);
    if (s->meet[0])
        unlink(s->meet);
    if (s->node_meet[0])
        unlink(s->node_meet);
}

/* Under Slurm, a node's other tasks run no loaders: their node's first
 * task runs them, with the node's cache stage. */
static int runs_loaders(const zp_sup_t *s)
{
    return s->slurm.world < 2 || s->slurm.local == 0;
}

int zp_sup_loaders(const zp_sup_t *s)
{
    int n = 0;
    for (int i = 0; i < s->procs.nchild; i++) {
        const zp_child_t *c = &s->procs.child[i];
        n += c->stage == ZP_STAGE_LOADER && (c->pid > 0 || c->restart_at) && !c->retiring;
    }
    return n;
}

/* `scale loader=N|+K|-K`: starts new loaders or retires the newest ones.
 * Returns 0, or an error for the requester in err. */
int zp_sup_scale(zp_sup_t *s, const char *arg, char *err, size_t len)
{
    const char *v = !strncmp(arg, "loader=", 7) ? arg + 7 : NULL;
    char *end = NULL;
    long k = v ? strtol(v, &end, 10) : 0;
    if (!v || end == v || *end || k < -1000 || k > 1000) {
        snprintf(err, len, "expected loader=N, loader=+K or loader=-K (got %.60s)", arg);
        return ZP_EINVAL;
    }
    if (!runs_loaders(s)) {
        snprintf(err, len, "node %.60s's loaders are run by its first task: scale that rank's run "
                 "(%.120s)", s->slurm.node, s->plane);
        return ZP_EINVAL;
    }
    int now = zp_sup_loaders(s);
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
            taken |= c->stage == ZP_STAGE_LOADER && c->instance == next && (c->pid > 0 || c->restart_at);
        }
        if (!taken && zp_procs_spawn(&s->procs, ZP_STAGE_LOADER, next, 0) == 0)
            now++;
    }
    for (int i = s->procs.nchild - 1; i >= 0 && now > want; i--) { /* the newest retire */
        zp_child_t *c = &s->procs.child[i];
        if (c->stage != ZP_STAGE_LOADER || c->retiring || (!c->pid && !c->restart_at))
            continue;
        if (c->pid)
            kill(c->pid, ZP_SIG_RETIRE), c->retiring = 1;
        else
            c->restart_at = 0; /* a pending restart is simply not done */
        now--;
    }
    s->loaders_wanted = (int)want;
    fprintf(stderr, "zeus-pipe: scaled to %ld loader(s)\n", want);
    return 0;
}

/* The control socket's requests: CTL "scale ..." and "down". */
typedef struct {
    zp_sup_t *s;
    int down; /* `zeus-pipe down` asked the run to stop */
} control_t;

static void reply(zp_sup_t *s, const char *error)
{
    zp_msg_t rep = {.type = ZP_MSG_CTL_REP};
    if (error) {
        rep.present |= ZP_B(error);
        snprintf(rep.error, sizeof rep.error, "%s", error);
    }
    zp_sock_send(s->control, NULL, &rep, NULL, NULL, 0, 0);
}

static int on_ctl(void *ctx, const zp_msg_t *m, zp_frames_t *f)
{
    (void)f;
    control_t *c = ctx;
    char err[sizeof ((zp_msg_t *)0)->error] = "";
    if (!strcmp(m->cmd, "down"))
        c->down = 1;
    else if (!strncmp(m->cmd, "scale ", 6))
        zp_sup_scale(c->s, m->cmd + 6, err, sizeof err);
    else
        snprintf(err, sizeof err, "unknown request: %.200s", m->cmd);
    reply(c->s, err[0] ? err : NULL);
    return 0;
}

/* A REP socket answers every request, even one it cannot read. */
static void on_bad_ctl(void *ctx, const char *why)
{
    char err[256];
    snprintf(err, sizeof err, "unknown request: %.200s", why);
    reply(((control_t *)ctx)->s, err);
}

static const zp_route_t CONTROL_ROUTES[] = {{ZP_MSG_CTL, on_ctl}};

/* Answers one control request; returns 1 when it asks the run to stop. */
static int on_control(zp_sup_t *s)
{
    static int64_t dropped;
    const zp_inbox_t in = {.routes = CONTROL_ROUTES, .nroutes = ZP_COUNT(CONTROL_ROUTES),
                           .from = "a control client", .dropped = &dropped, .on_drop = on_bad_ctl};
    control_t c = {.s = s};
    zp_frames_t f;
    zp_frames_init(&f);
    zp_inbox_recv(&in, s->control, ZMQ_DONTWAIT, &f, &c);
    zp_frames_free(&f);
    return c.down;
}

/* Every stage of this task: trainer.gpus ranks with their cache stage,
 * loaders and logger; under Slurm one rank, the logger on rank 0, and the
 * node's cache stage (cache[<rank>]) and loaders on each node's first task. */
static int start_all(zp_sup_t *s)
{
    int slurm = s->slurm.world > 1, rc = 0;
    if (!slurm || s->slurm.rank == 0)
        rc = zp_procs_spawn(&s->procs, ZP_STAGE_LOGGER, 0, 1);
    if (!rc && runs_loaders(s))
        rc = zp_procs_spawn(&s->procs, ZP_STAGE_CACHE, slurm ? s->slurm.rank : 0, 0);
    s->loader_base = slurm ? 256 * s->slurm.rank : 0; /* loader.workers <= 256: no two alike */
    for (int i = 0; !rc && runs_loaders(s) && i < s->cfg.loader_workers; i++)
        rc = zp_procs_spawn(&s->procs, ZP_STAGE_LOADER, s->loader_base + i, 0);
    int first = slurm ? s->slurm.rank : 0, ranks = 1;
    if (!slurm && (s->procs.mode == ZP_MODE_TRAIN || s->procs.mode == ZP_MODE_RESUME))
        ranks = (int)s->cfg.gpus; /* as zp_stage_world() */
    for (int r = first; !rc && r < first + ranks; r++)
        rc = zp_procs_spawn(&s->procs, ZP_STAGE_PREFETCH, r, 0);
    for (int r = first; !rc && !s->attach && r < first + ranks; r++)
        rc = zp_procs_spawn(&s->procs, ZP_STAGE_TRAINER, r, 0); /* --attach: programs attach */
    s->trainers = ranks;
    return rc;
}

/* A loader's death, told apart as nginx does: one that had delivered
 * samples is restarted in 50 ms, and so is one killed from outside before
 * its first delivery, always, however many kills (a back-off would leave
 * the loaders still alive to take every kill; a stalled run is prefetch's
 * to end, prefetch.fetch_timeout_s); one that ended itself before its first
 * delivery (a crash loop) after a back-off (50 ms, doubling with each death
 * of that loader within a minute, to 1.6 s), at most
 * loader.max_restarts_per_min such restarts in a minute. Exit
 * status 2 (a config or dataset error) never comes here: zp_procs_reap()
 * fails the run on it. */
static void loader_died(zp_sup_t *s, zp_child_t *c, int64_t now)
{
    char how[128];
    zp_procs_describe(c, how, sizeof how);
    if (c->delivered) {
        c->deaths = 0;
        c->restart_at = now + 50000000ll;
        fprintf(stderr, "zeus-pipe: loader[%d] %s after delivering samples; restarting it in 50 ms\n",
                c->instance, how);
        return;
    }
    int outside = zp_procs_killed(c);
    if (!outside && s->restarts >= s->cfg.max_restarts) {
        fprintf(stderr, "zeus-pipe: loader[%d] %s; not restarted: %lld restart(s) in the last "
                "minute (loader.max_restarts_per_min); going on with %d loader(s)\n",
                c->instance, how, (long long)s->restarts, zp_sup_loaders(s));
        return;
    }
    int64_t delay = zp_procs_restart_backoff(&c->deaths, &c->last_death, now);
    if (outside) /* not its own doing: the next start is as likely to live as the last */
        delay = 50000000ll;
    c->restart_at = now + delay;
    s->restarts += !outside;
    fprintf(stderr, "zeus-pipe: loader[%d] %s%s; restarting it in %lld ms\n", c->instance, how,
            outside ? " from outside before its first delivery" : "", (long long)(delay / 1000000));
}

/* Loaders that exited: retired ones are done, the others go to
 * loader_died(); restarts that are due are started. Returns 1 when no loader
 * has been left for prefetch.fetch_timeout_s (every one given up on as a
 * crash loop, and none scaled in since): a run served by a warm cache may
 * end meanwhile; one that needs loaders has stopped itself by then, since
 * prefetch ends a run that waits that long with no sample arriving. */
static int tend_loaders(zp_sup_t *s)
{
    int64_t now = zp_now_ns();
    if (now - s->window_start > 60000000000ll)
        s->window_start = now, s->restarts = 0;
    for (int i = 0; i < s->procs.nchild; i++) {
        zp_child_t *c = &s->procs.child[i];
        if (c->stage != ZP_STAGE_LOADER)
            continue;
        if (c->exited) {
            c->exited = 0;
            if (c->retiring) {
                fprintf(stderr, "zeus-pipe: loader[%d] retired\n", c->instance);
                c->retiring = 0;
            } else {
                loader_died(s, c, now);
            }
        }
        if (c->restart_at && now >= c->restart_at && !c->pid &&
            zp_procs_spawn(&s->procs, ZP_STAGE_LOADER, c->instance, 0))
            c->restart_at = now + 1000000000; /* cannot fork now: try again in a second */
    }
    if (!runs_loaders(s) || zp_sup_loaders(s) > 0) {
        s->no_loader_since = 0;
        return 0;
    }
    if (!s->no_loader_since) {
        s->no_loader_since = now;
        fprintf(stderr, "zeus-pipe: no loader left; the run goes on while samples come from the cache, "
                "for at most prefetch.fetch_timeout_s (%lld s)\n", (long long)s->cfg.fetch_timeout_s);
    }
    return now - s->no_loader_since > s->cfg.fetch_timeout_s * 1000000000ll;
}

/* `up --attach`: done once every prefetch has sent END and exited and no
 * program holds a rank (RUN/logs/trainer-R.attached: its last events are
 * with the logger). */
static int attach_done(const zp_sup_t *s)
{
    int prefetching = 0; /* a prefetch that saw a seek waits for another after its END */
    for (int i = 0; i < s->procs.nchild; i++)
        prefetching |= s->procs.child[i].stage == ZP_STAGE_PREFETCH && s->procs.child[i].pid > 0;
    int64_t epochs;
    for (int r = 0; r < s->trainers; r++)
        if (zp_resources_attached(s->run_dir, r) ||
            (prefetching && !zp_resources_attach_ended(s->run_dir, r) &&
             !zp_resources_attach_left(s->run_dir, r, &epochs)))
            return 0;
    fprintf(stderr, "zeus-pipe: every rank has had its END and detached\n");
    return 1;
}

/* `up --attach`: 1 when the program that started this supervisor is gone
 * (this process was handed to another parent), even when it was killed. */
static int parent_gone(const zp_sup_t *s)
{
    if (!s->attach || getppid() == s->parent)
        return 0;
    fprintf(stderr, "zeus-pipe: stopping: the program that started the run (pid %d) has exited\n",
            (int)s->parent);
    return 1;
}

/* A run whose programs ended it before its last epoch, told as what it is:
 * a loop of fewer epochs than trainer.epochs, not a failure. */
static void say_left(const zp_sup_t *s)
{
    for (int r = first_rank(s); r < first_rank(s) + s->trainers; r++) {
        int64_t read;
        if (!zp_resources_attach_left(s->run_dir, r, &read) || !s->cfg.epochs ||
            read >= s->cfg.epochs)
            continue;
        fprintf(stderr, "zeus-pipe: trainer[%d]'s program ended after epoch %lld of %lld: the "
                "pipeline's last %lld epoch(s) were not read (nothing was lost; trainer.epochs: "
                "%lld matches the loop, 0 lets the loop decide)\n", r, (long long)read,
                (long long)s->cfg.epochs, (long long)(s->cfg.epochs - read), (long long)read);
        return; /* one rank says it for all: they read the same epochs */
    }
}

/* A run stopped before it ended: RUN/stopped says why (a program waiting
 * for a batch raises it at once: zp_client_next), and trainer.command's
 * programs get a moment to end by themselves on it before they are stopped. */
static void say_stopped(zp_sup_t *s, const char *why)
{
    zp_resources_mark_stopped(s->run_dir, why);
    int64_t until = zp_now_ns() + 2000000000ll;
    for (int alive = s->procs.command != NULL; alive && zp_now_ns() < until;) {
        int done;
        usleep(20000);
        zp_procs_reap(&s->procs, &done);
        alive = 0;
        for (int i = 0; i < s->procs.nchild; i++)
            alive |= s->procs.child[i].stage == ZP_STAGE_TRAINER && s->procs.child[i].pid > 0;
    }
}

/* Whether the built-in trainer's last checkpoint is past the run's last
 * epoch: it finished (a SIGUSR1 that came as it did saved nothing more). A
 * program's run cannot tell: 0. */
static int finished(const zp_sup_t *s)
{
    char path[PATH_MAX + 64], err[512];
    zp_ckpt_pos_t pos;
    if (s->cfg.trainer_command.n || s->attach)
        return 0;
    zp_ckpt_path(path, sizeof path, s->slurm.world > 1 ? s->run0 : s->run_dir, "last");
    return !zp_ckpt_read(path, &pos, NULL, NULL, err, sizeof err) &&
           pos.epoch >= (uint64_t)zp_config_epochs(&s->cfg);
}

/* How long the trainers have to finish their step and save after SIGUSR1. */
#define ZP_SAVE_WAIT_S 60

/* The logger's time to stop on a run's ordinary end: it then writes the
 * report and the trace, each a reading of all of events.msgpack (about 50
 * MB/s each on a 2-core VM; under Slurm every rank's records are there): 5 s,
 * and 1 s more for each 25 MB of it, up to 2 minutes. */
static int logger_stop_ms(const zp_sup_t *s)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/events.msgpack", s->run_dir);
    struct stat st;
    long long mb = stat(path, &st) ? 0 : (long long)st.st_size >> 20;
    return 5000 + (int)(mb * 40 < 115000 ? mb * 40 : 115000);
}

static int supervise(zp_sup_t *s)
{
    int status = -1, trainer_done = 0, quick = 0, trained = 0;
    int64_t saving = 0; /* when SIGUSR1 came */
    char why[PATH_MAX + 200], stopped[PATH_MAX + 300] = "";
    while (status < 0) {
        zmq_pollitem_t it = {s->control, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) > 0 && on_control(s)) {
            fprintf(stderr, "zeus-pipe: stopping: asked by zeus-pipe down\n");
            snprintf(stopped, sizeof stopped, "the run was stopped by `zeus-pipe down`");
            status = ZP_EXIT_DOWN;
        }
        if (g_signal) {
            status = 128 + g_signal;
            snprintf(stopped, sizeof stopped, "the run was stopped by signal %d (%s)", g_signal,
                     strsignal(g_signal));
            break;
        }
        if (g_save && !saving && !s->attach && trainer_done < s->trainers) {
            /* (attached programs save themselves; trainers that are done have nothing to save).
             * Here, after the wait that the signal ends, before the trainers are reaped:
             * Slurm's USR1 reaches a trainer too, which may exit before the next turn */
            saving = zp_now_ns();
            fprintf(stderr, "zeus-pipe: SIGUSR1: saving: the trainer finishes its step and writes "
                            "its checkpoint, then the run stops\n");
            forward_save(s);
        }
        zp_child_t *bad = zp_procs_reap(&s->procs, &trainer_done);
        if (bad && g_signal) {
            status = 128 + g_signal; /* it died of the same Ctrl-C */
        } else if (bad) {
            char how[128];
            zp_procs_describe(bad, how, sizeof how);
            snprintf(why, sizeof why, "%s[%d] %s", zp_names_stage(bad->stage), bad->instance, how);
            fprintf(stderr, "zeus-pipe: %s%s%s; stopping the run\n", why,
                    s->slurm.world > 1 ? " on node " : "", s->slurm.world > 1 ? s->slurm.node : "");
            zp_sup_node_down(s, why);
            zp_procs_log_tail(&s->procs, bad);
            snprintf(stopped, sizeof stopped, "the run failed: %s", why);
            status = 1;
        } else if (saving && (trainer_done >= s->trainers ||
                              zp_now_ns() - saving > ZP_SAVE_WAIT_S * 1000000000ll)) {
            if (trainer_done < s->trainers)
                fprintf(stderr, "zeus-pipe: SIGUSR1: the trainer did not end within %d s of it; "
                                "stopping the run\n", ZP_SAVE_WAIT_S);
            if (trainer_done >= s->trainers && finished(s)) { /* it ended as the signal came */
                status = 0, trained = 1;
                continue;
            }
            snprintf(stopped, sizeof stopped, "the run was stopped by SIGUSR1 to save (exit status "
                     "%d)", ZP_EXIT_SAVED);
            status = ZP_EXIT_SAVED;
        } else if (s->attach ? attach_done(s) : trainer_done >= s->trainers) {
            status = 0, trained = 1;
        } else if (parent_gone(s)) {
            status = 1, quick = 1;
        } else if (zp_sup_gone(s, why, sizeof why)) {
            fprintf(stderr, "zeus-pipe: Slurm rank %d: %s; stopping\n", s->slurm.rank, why);
            snprintf(stopped, sizeof stopped, "the run stopped: %s", why);
            status = 1;
        } else if (tend_loaders(s)) {
            fprintf(stderr, "zeus-pipe: no loader left for prefetch.fetch_timeout_s; stopping the run\n");
            zp_sup_node_down(s, "no loader left");
            snprintf(stopped, sizeof stopped, "the run failed: no loader left for "
                     "prefetch.fetch_timeout_s");
            status = 1;
        } else {
            zp_sup_autoscale_tick(s);
        }
    }
    /* a signal stops quickly, but the limit's SIGTERM under Slurm, on which the
     * trainer saves (within Slurm's KillWait, 30 s by default) */
    quick |= status >= 128 && !(status == 128 + SIGTERM && getenv("SLURM_JOB_ID"));
    if (stopped[0])
        say_stopped(s, stopped);
    zp_procs_stop(&s->procs, 0, quick ? 1000 : 3000);
    if (trained || status == ZP_EXIT_SAVED) /* the other ranks end as well: their last records */
        zp_sup_wait_ranks(s, 10000, &g_signal);                  /* reach the logger */
    if (trained)
        say_left(s);
    zp_procs_stop(&s->procs, 1, quick ? 800 : logger_stop_ms(s));
    return status;
}

/* The last word of a run stopped by `zeus-pipe down` or saved on SIGUSR1:
 * where it stopped and how it goes on. The built-in trainer's position is its
 * last checkpoint (what `up --resume` starts from); a program's is the
 * state_dict() it saved. */
static void say_down(const zp_sup_t *s, int status)
{
    char path[PATH_MAX], err[512], how[PATH_MAX + 300];
    zp_ckpt_pos_t pos;
    void *payload = NULL;
    const char *run = s->slurm.world > 1 ? s->run0 : s->run_dir; /* rank 0's has the checkpoints */
    zp_ckpt_path(path, sizeof path, run, "last");
    if (s->attach || s->cfg.trainer_command.n)
        snprintf(how, sizeof how, "the program goes on from the zeus_pipe state_dict() it saved, "
                 "in a new run (load_state_dict)");
    else if (!zp_ckpt_read(path, &pos, &payload, NULL, err, sizeof err))
        snprintf(how, sizeof how, "its last checkpoint goes on at epoch %llu, batch %llu (step %llu): "
                 "resume with `%szeus-pipe up --resume %s`%s", (unsigned long long)pos.epoch + 1,
                 (unsigned long long)pos.batch, (unsigned long long)pos.step,
                 s->slurm.world > 1 ? "srun " : "", run,
                 s->slurm.world > 1 ? " (with any number of tasks)" : "");
    else
        snprintf(how, sizeof how, "no checkpoint was written before it stopped "
                 "(trainer.checkpoint.every_epochs, .every_steps): `zeus-pipe up CONFIG` starts "
                 "again from the first epoch");
    free(payload);
    fprintf(stderr, "zeus-pipe: stopped by %s (exit status %d): %s; %s\n",
            status == ZP_EXIT_SAVED ? "SIGUSR1 after saving" : "zeus-pipe down", status, s->run_dir,
            how);
}

/* ---- slurm.requeue ------------------------------------------------------------------- */

/* run.dir/.slurm-<job>.requeue: the run a requeued job resumes ("run DIR"). */
static int requeue_mark(char *buf, size_t len, const char *run_dir)
{
    const char *job = getenv("SLURM_JOB_ID");
    if (!job || !*job || strchr(job, '/'))
        return -1;
    snprintf(buf, len, "%s/.slurm-%.40s.requeue", run_dir, job);
    return 0;
}

/* Rank 0 after a save under sbatch with slurm.requeue: the mark (only where
 * the run has a checkpoint to go on from: a job saved before its first step
 * starts again from the beginning), then `scontrol requeue JOB`, the last
 * thing it does: Slurm ends the job's processes and queues it again. */
static int requeue(const zp_sup_t *s)
{
    char mark[PATH_MAX + 80], tmp[PATH_MAX + 90], ckpt[PATH_MAX + 64];
    const char *job = getenv("SLURM_JOB_ID");
    if (!s->cfg.slurm_requeue || s->slurm.rank != 0)
        return 0;
    if (requeue_mark(mark, sizeof mark, s->cfg.run_dir)) {
        fprintf(stderr, "zeus-pipe: slurm.requeue: no SLURM_JOB_ID to requeue\n");
        return -1;
    }
    zp_ckpt_path(ckpt, sizeof ckpt, s->run_dir, "last");
    if (access(ckpt, R_OK) == 0) {
        snprintf(tmp, sizeof tmp, "%s.tmp", mark);
        FILE *f = fopen(tmp, "w");
        int ok = f && fprintf(f, "run %s\n", s->run_dir) > 0;
        if ((f && fclose(f)) || !ok || rename(tmp, mark)) {
            fprintf(stderr, "zeus-pipe: slurm.requeue: %s: %s; not requeued\n", mark, strerror(errno));
            return -1;
        }
    }
    fprintf(stderr, "zeus-pipe: slurm.requeue: requeueing job %s (scontrol requeue %s): %s\n", job,
            job, access(ckpt, R_OK) == 0 ? "it resumes the run by itself"
                                         : "no checkpoint yet, so it starts the run again");
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        execlp("scontrol", "scontrol", "requeue", job, (char *)NULL);
        fprintf(stderr, "zeus-pipe: slurm.requeue: cannot run scontrol: %s\n", strerror(errno));
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "zeus-pipe: slurm.requeue: scontrol requeue %s failed (a job started by "
                        "srun alone cannot be requeued: submit it with sbatch); resume with `srun "
                        "zeus-pipe up --resume %s`\n", job, s->run_dir);
        unlink(mark);
        return -1;
    }
    return 0;
}

/* The run a job requeued by slurm.requeue goes on with: 1 with its folder in
 * buf, 0 when this is no such job (or its first start). */
static int requeued_run(const zp_config_t *cfg, char *buf, size_t len)
{
    const char *restart = getenv("SLURM_RESTART_COUNT");
    char mark[PATH_MAX + 80], line[PATH_MAX + 16];
    if (!cfg->slurm_requeue || !restart || atoi(restart) < 1 ||
        requeue_mark(mark, sizeof mark, cfg->run_dir))
        return 0;
    FILE *f = fopen(mark, "r");
    int ok = f && fgets(line, sizeof line, f) && !strncmp(line, "run ", 4);
    if (f)
        fclose(f);
    if (!ok)
        return 0;
    line[strcspn(line, "\n")] = 0;
    size_t n = strlen(line + 4);
    if (n >= len)
        return 0;
    memcpy(buf, line + 4, n + 1);
    fprintf(stderr, "zeus-pipe: Slurm job %s, restart %s (slurm.requeue): resuming %s with its own "
                    "config\n", getenv("SLURM_JOB_ID"), restart, buf);
    return 1;
}

/* Runs every stage of the run in s->run_dir until training ends; the exit status. */
static int run_stages(zp_sup_t *s)
{
    if (!s->attach && !s->cfg.trainer_command.n && s->cfg.backend == ZP_BACKEND_CPU)
        tune_openblas(); /* only the built-in cpu trainer's GEMMs care */
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    zp_sup_catch_save();
    char ep[ZP_ENDPOINT_MAX + 16];
    s->zctx = zmq_ctx_new();
    if (zp_sock_endpoint(ep, sizeof ep, s->run_dir, zp_names_sock(ZP_SOCK_CONTROL))) {
        fprintf(stderr, "zeus-pipe: %s: path too long for UNIX sockets; choose a shorter run.dir\n", s->run_dir);
        cleanup(s);
        return 2;
    }
    zp_sock_create(&s->control, s->zctx, ZMQ_REP, ep, 1, 0); /* NULL: no scale nor down; logged */
    int status = zp_sup_autoscale_open(s); /* loader.workers clamped first */
    char epochs[48] = "epochs as the program's loop asks"; /* trainer.epochs 0: no cap */
    if (s->cfg.epochs)
        snprintf(epochs, sizeof epochs, "%lld epoch(s)", (long long)s->cfg.epochs);
    fprintf(stderr, "zeus-pipe: run %s: %lld loader(s), batch %lld, %s\n", s->run_dir,
            (long long)s->cfg.loader_workers, (long long)s->cfg.batch_size, epochs);
    if (s->attach) { /* the folder to attach to, for the program that started `up --attach` */
        printf("ZP_RUN=%s\n", s->run_dir);
        fflush(stdout);
    }
    status = status || !s->control ? 1 : start_all(s) ? 1 : 0;
    if (status)
        fprintf(stderr, "zeus-pipe: cannot start the stages\n");
    status = status ? (zp_procs_stop(&s->procs, 0, 1000), zp_procs_stop(&s->procs, 1, 1000), 1) : supervise(s);
    zp_sup_autoscale_close(s);
    zp_sock_destroy(&s->control);
    zmq_ctx_term(s->zctx);
    cleanup(s);
    if (!s->cache_size_said && s->ds)
        zp_sup_cache_size(&s->cfg, &s->ds->meta);
    if (status == 0)
        fprintf(stderr, "zeus-pipe: run finished: %s\n", s->run_dir);
    else if (status == ZP_EXIT_DOWN || status == ZP_EXIT_SAVED)
        say_down(s, status);
    char mark[PATH_MAX + 80];
    if (status == 0 && s->slurm.rank == 0 && s->cfg.slurm_requeue &&
        !requeue_mark(mark, sizeof mark, s->cfg.run_dir))
        unlink(mark); /* the requeued run is done: a later start of the job is a new run */
    if (status == ZP_EXIT_SAVED && getenv("SLURM_JOB_ID") && s->cfg.slurm_requeue)
        status = requeue(s) ? ZP_EXIT_SAVED /* not requeued: said, and the run is saved */
                            : 0; /* the job goes on, requeued: no task of this attempt failed (a
                                    4 would make `srun --kill-on-bad-exit` kill rank 0 before it
                                    requeues) */
    else if (status >= 128)
        fprintf(stderr, "zeus-pipe: stopped by signal %d; every stage stopped\n", status - 128);
    return status;
}

/* Supervises s->run_dir in `mode` until the run ends; the exit status. */
static int supervise_run(zp_sup_t *s, int mode, const char *ckpts)
{
    zp_procs_init(&s->procs, s->run_dir, &s->cfg);
    s->procs.mode = mode;
    s->procs.keep_loaders = 1;
    s->window_start = zp_now_ns();
    s->restarts = 0;
    snprintf(s->procs.ckpts, sizeof s->procs.ckpts, "%s", ckpts ? ckpts : "");
    if (s->cfg.transport == ZP_TRANSPORT_TCP && s->slurm.rank == 0 && zp_sup_server_keys(s))
        return 2;
    if (s->slurm.world > 1) {
        if (s->slurm.rank == 0 && zp_sup_announce(s))
            return 2;
        setenv(ZP_SLURM_ENV, s->slurm.host, 1); /* the stages are ranks' stages */
        setenv(ZP_PLANE_ENV, s->plane, 1);       /* of this node's data plane */
    }
    zp_command_t *command = NULL;
    int training = mode == ZP_MODE_TRAIN || mode == ZP_MODE_RESUME;
    if (training && s->cfg.trainer_command.n > 0) {
        int rc = zp_command_create(&command, s);
        if (rc) {
            cleanup(s);
            return rc;
        }
        s->procs.command = command;
    }
    int status = run_stages(s);
    s->procs.command = NULL;
    zp_command_destroy(&command);
    return status;
}

/* A run of this host: its description of the dataset, then its stages. */
static int describe_and_run(zp_sup_t *s, int mode, const char *ckpts)
{
    char err[PATH_MAX + 200];
    if (zp_dataset_write(s->ds, s->run_dir, err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: %s\n", err);
        zp_rundir_cleanup(s->run_dir);
        return 1;
    }
    return supervise_run(s, mode, ckpts);
}

int zp_pipeline_run(const zp_config_t *cfg, const zp_dataset_t *ds, const char *run_dir, int mode,
                    const char *ckpts)
{
    static zp_sup_t s;
    memset(&s, 0, sizeof s);
    s.cfg = *cfg;
    s.ds = ds;
    snprintf(s.run_dir, sizeof s.run_dir, "%s", run_dir);
    return describe_and_run(&s, mode, ckpts);
}

/* Slurm's variables, read once: 0 alone, 1 one rank of several, 2 after an error. */
static int detect_slurm(zp_sup_t *s)
{
    char why[512];
    int slurm = zp_slurm_detect(&s->slurm, why, sizeof why);
    if (slurm < 0)
        fprintf(stderr, "zeus-pipe: Slurm: %s\n", why);
    return slurm < 0 ? 2 : slurm ? 1 : 0;
}

/* `up --attach`: trainer.command left out (the programs that attach are the
 * trainers: one config serves `up` with trainer.command, whose program
 * attaches, and that program started alone); refused under Slurm. 0 or 2. */
static int attach_check(zp_sup_t *s, int slurm)
{
    if (slurm) {
        fprintf(stderr, "zeus-pipe: up --attach: not under Slurm (%d tasks): run `srun zeus-pipe "
                        "up CONFIG` with trainer.command instead\n", s->slurm.world);
        return 2;
    }
    if (s->cfg.trainer_command.n > 0)
        fprintf(stderr, "zeus-pipe: up --attach: trainer.command not started: the programs that "
                        "attach are the trainers\n");
    s->cfg.trainer_command.n = 0; /* and the run's config.yaml says so */
    signal(SIGPIPE, SIG_IGN); /* the output's reader may die first: we go on, and stop */
    s->parent = getppid();
    return 0;
}

static int up(const zp_config_t *cfg, const zp_dataset_t *ds, int attach)
{
    char again[PATH_MAX];
    if (!attach && requeued_run(cfg, again, sizeof again))
        return zp_up_resume(again, NULL, 0);
    static zp_sup_t s;
    memset(&s, 0, sizeof s);
    s.cfg = *cfg;
    s.ds = ds;
    s.attach = attach;
    int slurm = detect_slurm(&s);
    if (slurm == 2 || (attach && attach_check(&s, slurm)))
        return 2;
    if (s.cfg.fast_dev_run) {
        /* The run's config.yaml keeps these values: stages read no flag. */
        s.cfg.epochs = s.cfg.limit_train_batches = s.cfg.limit_test_batches = 1;
        s.cfg.ckpt_every_epochs = s.cfg.ckpt_every_steps = 0;
        fprintf(stderr, "zeus-pipe: fast_dev_run: one train batch, one test batch, no checkpoint\n");
    }
    if (zp_sup_shm_room(&s))
        return 2;
    char prog[PATH_MAX], cwd[PATH_MAX];
    if (s.cfg.trainer_command.n > 0 && zp_command_check(&s.cfg, prog, sizeof prog, cwd, sizeof cwd))
        return 2; /* before the run directory, the cache or any stage */
    if (s.cfg.trainer_command.n > 0 && strchr(s.cfg.trainer_command.v[0], '/')) {
        size_t plen = strlen(prog); /* config.yaml keeps the absolute path, for --resume */
        if (plen < sizeof s.cfg.trainer_command.v[0])
            memcpy(s.cfg.trainer_command.v[0], prog, plen + 1);
    }
    s.cache_size_said = zp_sup_say_cache(&s.cfg, &ds->meta);
    int rc = slurm ? zp_sup_prepare_slurm(&s)
             : s.cfg.cache_enabled && zp_sup_prepare_cache(&s.cfg, &ds->meta)
                 ? 2
                 : zp_rundir_start(&s.cfg, s.cfg.run_name, s.run_dir, sizeof s.run_dir);
    return rc ? rc : describe_and_run(&s, ZP_MODE_TRAIN, NULL);
}

int zp_up(const zp_config_t *cfg, const zp_dataset_t *ds) { return up(cfg, ds, 0); }

int zp_up_attach(const zp_config_t *cfg, const zp_dataset_t *ds) { return up(cfg, ds, 1); }

/* `srun zeus-pipe up --resume RUN`, with any number of tasks: every rank
 * reads RUN's config and last checkpoint; rank 0 reopens RUN and announces
 * where it goes on, rank r > 0 reopens RUN/rank-<r> once it agrees. */
static int resume_slurm(zp_sup_t *s, const char *run)
{
    if (zp_sup_find_stopped(s, run, s->slurm.rank == 0)) /* rank 0's supervisor.pid is its own */
        return 2;
    char path[PATH_MAX + 64];
    int rc = zp_sup_resume_config(s, &s->resume, path, sizeof path);
    if (rc)
        return rc;
    s->resuming = 1;
    s->procs.mode = ZP_MODE_RESUME;
    if ((rc = zp_sup_prepare_slurm(s)))
        return rc;
    if (s->slurm.rank == 0)
        zp_sup_say_resuming(s);
    return 0;
}

int zp_up_resume(const char *run, char *const *overrides, int n)
{
    static zp_sup_t s;
    memset(&s, 0, sizeof s);
    s.resume_overrides = overrides, s.resume_noverrides = n;
    int slurm = detect_slurm(&s), rc = 2;
    if (slurm == 1)
        rc = resume_slurm(&s, run);
    else if (slurm == 0)
        rc = zp_sup_prepare_resume(&s, run);
    if (!rc)
        rc = describe_and_run(&s, ZP_MODE_RESUME, NULL);
    zp_dataset_destroy(&s.own);
    return rc;
}

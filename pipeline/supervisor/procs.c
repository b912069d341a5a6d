/* procs.c — starting, watching and stopping stage processes (for `up`, `warm`
 * and `loader`): fork and exec `zeus-pipe stage NAME`, reap, TERM then KILL. */
#define _GNU_SOURCE
#include "pipeline/base/log.h"
#include "pipeline/base/names.h"
#include "pipeline/dataset/python.h"
#include "pipeline/source/source.h"
#include "pipeline/stage/stage.h"
#include "pipeline/supervisor/supervisor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

void zp_procs_init(zp_procs_t *s, const char *run_dir, const zp_config_t *cfg)
{
    memset(s, 0, sizeof *s);
    snprintf(s->run_dir, sizeof s->run_dir, "%s", run_dir);
    s->python = zp_source_ops(cfg->dataset_source)->python ? cfg->py_interp : NULL;
    ssize_t n = readlink("/proc/self/exe", s->exe, sizeof s->exe - 1);
    if (n > 0)
        s->exe[n] = 0;
    else
        snprintf(s->exe, sizeof s->exe, "/proc/self/exe");
}

/* ZP_STAGE_WRAPPER="valgrind --leak-check=full" runs every stage under that
 * command (split at spaces); the words go into args. Returns their count. */
static int wrapper_args(char **args, int max)
{
    static char buf[1024];
    const char *w = getenv("ZP_STAGE_WRAPPER");
    int n = 0;
    if (!w || !*w)
        return 0;
    snprintf(buf, sizeof buf, "%s", w);
    for (char *save = NULL, *t = strtok_r(buf, " ", &save); t && n < max; t = strtok_r(NULL, " ", &save))
        args[n++] = t;
    return n;
}

/* `name` when it holds a '/', else its first executable match on PATH (as
 * execvp would find it, but before the fork: execvp may allocate). */
static void resolve(const char *name, char *out, size_t len)
{
    snprintf(out, len, "%s", name);
    const char *path = getenv("PATH");
    if (strchr(name, '/') || !path)
        return;
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        char cand[PATH_MAX];
        snprintf(cand, sizeof cand, "%.*s/%s", (int)(n ? n : 1), n ? p : ".", name);
        if (access(cand, X_OK) == 0) {
            snprintf(out, len, "%s", cand);
            return;
        }
        p += n + (p[n] == ':');
    }
}

/* Everything the child needs, made before the fork: between fork and exec
 * the child only makes async-signal-safe calls on it. */
typedef struct {
    char prog[PATH_MAX], mode[16], inst[16], fail[PATH_MAX + 64], nodir[PATH_MAX + 64];
    char *args[56];
    char *const *env; /* NULL: this process's */
    const char *cwd;  /* NULL: this process's */
    int log, keep_stdout, group, handled[64], nhandled;
    int ignore_save; /* a program: SIGUSR1 ignored until the zeus_pipe package takes it */
    pid_t parent;
    sigset_t mask; /* the child's: what stays blocked until its handlers are up (below) */
} spawn_t;

/* trainer.command's program as trainer `instance`: its own arguments,
 * environment and folder, in a process group of its own. */
static void command_prepare(spawn_t *p, const zp_command_t *c, int instance)
{
    memcpy(p->args, c->args, sizeof c->args);
    snprintf(p->prog, sizeof p->prog, "%s", c->prog);
    p->env = zp_command_env(c, instance);
    p->cwd = c->cwd;
    p->group = 1;
    snprintf(p->nodir, sizeof p->nodir, "zeus-pipe: trainer[%d]: cannot enter %s\n", instance, c->cwd);
}

static void spawn_prepare(spawn_t *p, zp_procs_t *s, int stage, int instance)
{
    p->env = NULL, p->cwd = NULL, p->group = 0;
    snprintf(p->inst, sizeof p->inst, "%d", instance);
    snprintf(p->mode, sizeof p->mode, "%d", s->mode);
    int n = wrapper_args(p->args, 36);
    char *head[] = {s->exe, "stage", (char *)zp_names_stage(stage)};
    char *python[] = {(char *)s->python, "-m", "zeus_pipe._loader_process"}; /* same arguments after these */
    int py = stage == ZP_STAGE_LOADER && s->python;
    p->group = py; /* a Python loader leads a group: what its Dataset starts stops with it */
    memcpy(p->args + n, py ? python : head, sizeof head);
    n += 3;
    char *tail[] = {"--run", s->run_dir, "--instance", p->inst, "--mode", p->mode, "--ckpts", s->ckpts};
    memcpy(p->args + n, tail, sizeof tail);
    n += (int)(sizeof tail / sizeof tail[0]);
    for (int i = 0; i < 7 && s->extra[i]; i++)
        p->args[n++] = s->extra[i];
    p->args[n] = NULL;
    resolve(p->args[0], p->prog, sizeof p->prog);
    if (py)
        p->env = zp_python_env(s->python); /* the package on PYTHONPATH, ZP_LIBRARY; NULL: this one's */
    if (stage == ZP_STAGE_TRAINER && s->command)
        command_prepare(p, s->command, instance);
    snprintf(p->fail, sizeof p->fail, "zeus-pipe: %s[%d]: cannot exec %s\n", zp_names_stage(stage), instance, p->prog);
    p->parent = getpid();
    /* A loader starts with ZP_SIG_RETIRE (`scale`'s retire) blocked, not ignored: one
     * sent before its handler is up (a Python loader imports its Dataset
     * first) stays pending until zp_stage_start unblocks it, instead of
     * being lost and leaving a loader that never retires. */
    sigemptyset(&p->mask);
    if (stage == ZP_STAGE_LOADER)
        sigaddset(&p->mask, ZP_SIG_RETIRE);
    /* So does SIGUSR1 (save: Slurm's --signal, or `kill -USR1` forwarded),
     * whose default would kill a stage that has no handler yet; not in a
     * program (trainer.command), which keeps the signals it is given. */
    if (!(stage == ZP_STAGE_TRAINER && s->command))
        sigaddset(&p->mask, SIGUSR1);
    /* A program starts with SIGUSR1 ignored: Slurm's warning while it still
     * imports torch would kill it; the package takes the signal over (it is
     * started by zeus-pipe: $ZP_RUN), and a program without it goes on. */
    p->ignore_save = stage == ZP_STAGE_TRAINER && s->command;
    p->nhandled = 0; /* signals with a handler here: back to default in the child */
    for (int sig = 1; sig < 64 && sig < NSIG; sig++) {
        struct sigaction old;
        if (sigaction(sig, NULL, &old) == 0 && old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)
            p->handled[p->nhandled++] = sig;
    }
}

/* The child, between fork and exec: async-signal-safe calls only. */
static void spawn_child(const spawn_t *p)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != p->parent)
        _exit(1);
    if (p->log >= 0)
        dup2(p->log, STDERR_FILENO);
    if (p->log >= 0 && !p->keep_stdout)
        dup2(p->log, STDOUT_FILENO);
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    for (int i = 0; i < p->nhandled; i++)
        sigaction(p->handled[i], &dfl, NULL); /* a TERM before exec stops it, as it should */
    struct sigaction ign = {.sa_handler = SIG_IGN};
    if (p->ignore_save)
        sigaction(SIGUSR1, &ign, NULL);
    sigprocmask(SIG_SETMASK, &p->mask, NULL);
    if (p->group)
        setpgid(0, 0);
    if (p->cwd && chdir(p->cwd) != 0) {
        ssize_t w = write(STDERR_FILENO, p->nodir, strlen(p->nodir));
        (void)w;
        _exit(127);
    }
    execve(p->prog, p->args, p->env ? p->env : environ);
    ssize_t w = write(STDERR_FILENO, p->fail, strlen(p->fail));
    (void)w;
    _exit(127);
}

int zp_procs_spawn(zp_procs_t *s, int stage, int instance, int keep_stdout)
{
    zp_child_t *slot = NULL;
    for (int i = 0; i < s->nchild && !slot; i++)
        if (!s->child[i].pid && s->child[i].instance == instance && s->child[i].stage == stage)
            slot = &s->child[i];
    if (!slot && s->nchild == ZP_CHILDREN_MAX)
        return ZP_EFULL;
    static spawn_t p; /* large; the supervisor spawns from one thread */
    char logpath[PATH_MAX + 64];
    snprintf(logpath, sizeof logpath, "%s/logs/%s-%d.log", s->run_dir, zp_names_stage(stage), instance);
    int log = s->inherit ? -1 : open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log < 0 && !s->inherit)
        return -errno;
    /* trainer.command: its output goes through a pipe that the relay tees into the log */
    int relay[2] = {-1, -1}, piped = stage == ZP_STAGE_TRAINER && s->command && !s->inherit;
    if (piped && pipe2(relay, O_CLOEXEC)) {
        int e = errno;
        close(log);
        return -e;
    }
    p.log = piped ? relay[1] : log;
    p.keep_stdout = keep_stdout;
    spawn_prepare(&p, s, stage, instance);
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old); /* no handler of ours runs in the child */
    pid_t pid = fork();
    if (pid == 0)
        spawn_child(&p);
    int e = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (p.log >= 0)
        close(p.log);
    if (piped && pid > 0)
        zp_command_relay(s->command, instance, relay[0], log);
    else if (piped)
        close(relay[0]), close(log);
    if (pid < 0)
        return -e;
    if (p.group)
        setpgid(pid, pid); /* as the child does: no signal to the group misses it */
    if (!slot)
        slot = &s->child[s->nchild++], *slot = (zp_child_t){.stage = stage, .instance = instance};
    slot->pid = pid;
    slot->group = p.group;
    slot->status = slot->exited = slot->retiring = 0;
    slot->restart_at = 0;
    return 0;
}

int64_t zp_procs_restart_backoff(int *deaths, int64_t *last_death, int64_t now)
{
    *deaths = now - *last_death < 60000000000ll ? *deaths + 1 : 1;
    *last_death = now;
    return 50000000ll << (*deaths - 1 < 5 ? *deaths - 1 : 5);
}

int zp_procs_killed(const zp_child_t *c)
{
    return WIFSIGNALED(c->status) && (WTERMSIG(c->status) == SIGKILL || WTERMSIG(c->status) == SIGTERM);
}

void zp_procs_describe(const zp_child_t *c, char *buf, size_t len)
{
    if (WIFEXITED(c->status))
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(c->status));
    else if (WIFSIGNALED(c->status))
        snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(c->status),
                 strsignal(WTERMSIG(c->status)));
    else
        snprintf(buf, len, "stopped");
}

void zp_procs_log_tail(zp_procs_t *s, const zp_child_t *c)
{
    char path[PATH_MAX + 64], lines[8][400];
    if (c->stage == ZP_STAGE_TRAINER && s->command)
        zp_command_drain(s->command, c->instance, 1000); /* the relay has written it all */
    snprintf(path, sizeof path, "%s/logs/%s-%d.log", s->run_dir, zp_names_stage(c->stage), c->instance);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    int n = 0;
    while (fgets(lines[n % 8], sizeof lines[0], f))
        n++;
    fclose(f);
    fprintf(stderr, "zeus-pipe: last lines of %s:\n", path);
    for (int i = n > 8 ? n - 8 : 0; i < n; i++)
        fprintf(stderr, "  %s", lines[i % 8]);
}

zp_child_t *zp_procs_reap(zp_procs_t *s, int *trainer_done)
{
    zp_child_t *bad = NULL;
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (int i = 0; i < s->nchild; i++) {
            zp_child_t *c = &s->child[i];
            if (c->pid != pid)
                continue;
            if (c->group) /* what it started dies with it (a Dataset's helpers, say) */
                kill(-pid, SIGKILL);
            c->pid = 0;
            c->status = status;
            c->delivered = c->stage == ZP_STAGE_LOADER && zp_rundir_delivered(s->run_dir, c->instance, pid);
            int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
            int config_error = WIFEXITED(status) && WEXITSTATUS(status) == 2;
            if (ok && c->stage == ZP_STAGE_TRAINER)
                ++*trainer_done;
            else if (s->keep_loaders && c->stage == ZP_STAGE_LOADER && !config_error)
                c->exited = 1;
            else if (!(ok && c->stage == ZP_STAGE_PREFETCH) && !bad)
                bad = c;
        }
    }
    return bad;
}

static int is_logger(const zp_child_t *c) { return c->stage == ZP_STAGE_LOGGER; }

static int alive(zp_procs_t *s, int logger)
{
    int n = 0;
    for (int i = 0; i < s->nchild; i++)
        n += s->child[i].pid > 0 && is_logger(&s->child[i]) == logger;
    return n;
}

/* A program of trainer.command, or a Python loader, leads a group: what it
 * started stops with it. */
static void signal_child(const zp_child_t *c, int sig)
{
    if (!c->group || kill(-c->pid, sig) != 0)
        kill(c->pid, sig);
}

/* TERM the chosen children, wait up to `ms`, then KILL what is left. */
void zp_procs_stop(zp_procs_t *s, int logger, int ms)
{
    for (int i = 0; i < s->nchild; i++)
        if (s->child[i].pid > 0 && is_logger(&s->child[i]) == logger)
            signal_child(&s->child[i], SIGTERM);
    int dummy;
    int64_t until = zp_now_ns() + (int64_t)ms * 1000000;
    while (alive(s, logger) && zp_now_ns() < until) {
        usleep(10000);
        zp_procs_reap(s, &dummy);
    }
    for (int i = 0; i < s->nchild; i++)
        if (s->child[i].pid > 0 && is_logger(&s->child[i]) == logger) {
            fprintf(stderr, "zeus-pipe: %s[%d] did not stop in time; killing it%s%s%s\n",
                    zp_names_stage(s->child[i].stage), s->child[i].instance,
                    logger ? " (the run's report and trace may be missing: `zeus-pipe report " : "",
                    logger ? s->run_dir : "", logger ? " --trace` writes them)" : "");
            signal_child(&s->child[i], SIGKILL);
        }
    for (int i = 0; i < s->nchild; i++) { /* wait for exactly those killed */
        zp_child_t *c = &s->child[i];
        if (c->pid > 0 && is_logger(c) == logger) {
            while (waitpid(c->pid, &c->status, 0) < 0 && errno == EINTR)
                ;
            c->pid = 0;
        }
    }
}

/* command.c — trainer.command: a user's program as each rank's trainer.
 *
 * The program is checked before anything starts (zp_command_check), its
 * arguments and environment are made once per run (zp_command_create), and
 * its output is relayed by one thread of the supervisor: every byte into
 * logs/trainer-R.log, every line to the supervisor's stderr as
 * "trainer[R]: LINE". procs.c starts it where it would start
 * `zeus-pipe stage trainer`. The contract: supervisor.h. */
#define _GNU_SOURCE
#include "pipeline/base/log.h"
#include "pipeline/dataset/python.h"
#include "pipeline/supervisor/supervisor.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

/* `name` on PATH, as execvp would find it; 0 when found. */
static int on_path(const char *name, char *out, size_t len)
{
    const char *path = getenv("PATH");
    for (const char *p = path ? path : ""; *p;) {
        size_t n = strcspn(p, ":");
        snprintf(out, len, "%.*s/%s", (int)(n ? n : 1), n ? p : ".", name);
        if (access(out, X_OK) == 0)
            return 0;
        p += n + (p[n] == ':');
    }
    return -1;
}

/* A program run by a Python interpreter (`prog` is one: python, python3,
 * python3.11) reads the ring through the zeus_pipe package, which needs
 * torch: an interpreter without it is named before anything starts, not
 * after the stages, by a traceback in the program's log. 0, or 2 said. */
static int python_has_torch(const char *prog, const char *name)
{
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", prog);
    if (strncmp(basename(copy), "python", 6) || zp_python_has_module(prog, "'torch'") != 0)
        return 0;
    char where[PATH_MAX + 64] = "";
    if (!strchr(name, '/'))
        snprintf(where, sizeof where, " (the first '%s' on PATH)", name);
    fprintf(stderr, "zeus-pipe: trainer.command: %s%s has no torch, which the zeus_pipe package "
            "needs: name the python that has it (trainer.command: [/path/to/venv/bin/python3, "
            "...]; Debian: /usr/bin/python3 with python3-torch), or put its folder first on PATH "
            "(PATH=/usr/bin:$PATH zeus-pipe up ...)\n", prog, where);
    return 2;
}

int zp_command_check(const zp_config_t *cfg, char *prog, size_t len, char *cwd, size_t cwdlen)
{
    const char *name = cfg->trainer_command.v[0];
    zp_config_folder(cfg, cwd, cwdlen);
    if (!strchr(name, '/')) {
        if (on_path(name, prog, len) == 0)
            return python_has_torch(prog, name);
        fprintf(stderr, "zeus-pipe: trainer.command: '%s' is not an executable program on PATH; "
                        "install it, or write its path (relative to the config's folder %s, or "
                        "absolute)\n", name, cwd);
        return 2;
    }
    const char *rel = name;
    while (rel[0] == '.' && rel[1] == '/')
        rel += 2; /* "./train.sh": cwd/train.sh */
    if (name[0] == '/')
        snprintf(prog, len, "%s", name);
    else
        snprintf(prog, len, "%s/%s", cwd, rel);
    struct stat st;
    if (stat(prog, &st) != 0) {
        fprintf(stderr, "zeus-pipe: trainer.command: %s: %s; relative paths start from the "
                        "config's folder (%s): fix the path\n", prog, strerror(errno), cwd);
        return 2;
    }
    if (!S_ISREG(st.st_mode) || access(prog, X_OK) != 0) {
        fprintf(stderr, "zeus-pipe: trainer.command: %s: %s; make it executable (chmod +x), or "
                        "name its interpreter first (trainer.command: [sh, %s])\n", prog,
                S_ISREG(st.st_mode) ? "not executable" : "not a regular file", name);
        return 2;
    }
    return python_has_torch(prog, name);
}

/* A TCP port no one listens on now, on 127.0.0.1; 0 when none could be had. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    int port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &n) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* MASTER_PORT: under Slurm (every rank must agree without talking) or with
 * transport tcp, transport.bind's port + 4 (the pipeline holds P..P+3);
 * otherwise a port that is free now. */
static int master_port(const zp_sup_t *s)
{
    const char *colon = strrchr(s->cfg.bind, ':');
    int bound = colon ? atoi(colon + 1) : 0;
    if ((s->slurm.world > 1 || s->cfg.transport == ZP_TRANSPORT_TCP) && bound > 0 && bound < 65532)
        return bound + 4;
    return free_port();
}

/* Appends NAME=VALUE to c's environment for `slot`. */
static void put_env(zp_command_t *c, int slot, const char *name, const char *fmt, long long v,
                    const char *str)
{
    char *e = c->envbuf[slot][c->nenvbuf[slot]++];
    if (str)
        snprintf(e, sizeof c->envbuf[0][0], "%s=%s", name, str);
    else
        snprintf(e, sizeof c->envbuf[0][0], fmt, name, v);
}

/* Our names replace the inherited ones (PYTHONPATH when we set it). */
static int ours(const char *e, int pythonpath)
{
    static const char *names[] = {"ZP_RUN=", "ZP_RANK=", "ZP_WORLD=", "RANK=", "WORLD_SIZE=",
                                  "LOCAL_RANK=", "LOCAL_WORLD_SIZE=", "MASTER_ADDR=", "MASTER_PORT=",
                                  "ZP_LIBRARY="};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strncmp(e, names[i], strlen(names[i])))
            return 1;
    return pythonpath && !strncmp(e, "PYTHONPATH=", 11);
}

static int make_env(zp_command_t *c, const zp_sup_t *s, int slot, int rank, int world, int local,
                    int locals, int port)
{
    /* libzeuspipe.so and the zeus_pipe package this zeus-pipe was built or
     * installed with; the package after the user's own PYTHONPATH (which,
     * when too long to add to, is left as it is) */
    char library[PATH_MAX], pythonpath[PATH_MAX];
    zp_python_library(library, sizeof library);
    const char *base = strrchr(c->prog, '/') ? strrchr(c->prog, '/') + 1 : c->prog;
    /* a python interpreter is asked whether it has a zeus_pipe of its own */
    int set_pythonpath = zp_python_path(strncmp(base, "python", 6) ? NULL : c->prog, pythonpath,
                                        sizeof pythonpath) == 0;
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + ZP_COMMAND_ENV + 1, sizeof *env);
    if (!env)
        return ZP_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!ours(environ[i], set_pythonpath))
            env[k++] = environ[i];
    c->nenvbuf[slot] = 0;
    put_env(c, slot, "ZP_RUN", NULL, 0, s->run_dir);
    put_env(c, slot, "ZP_RANK", "%s=%lld", rank, NULL);
    put_env(c, slot, "ZP_WORLD", "%s=%lld", world, NULL);
    put_env(c, slot, "RANK", "%s=%lld", rank, NULL);
    put_env(c, slot, "WORLD_SIZE", "%s=%lld", world, NULL);
    put_env(c, slot, "LOCAL_RANK", "%s=%lld", local, NULL);
    put_env(c, slot, "LOCAL_WORLD_SIZE", "%s=%lld", locals, NULL);
    put_env(c, slot, "MASTER_ADDR", NULL, 0, s->slurm.world > 1 ? s->slurm.host : "127.0.0.1");
    put_env(c, slot, "MASTER_PORT", "%s=%lld", port, NULL);
    put_env(c, slot, "ZP_LIBRARY", NULL, 0, library); /* beside zeus-pipe, for the Python package */
    if (set_pythonpath)
        put_env(c, slot, "PYTHONPATH", NULL, 0, pythonpath);
    for (int i = 0; i < c->nenvbuf[slot]; i++)
        env[k++] = c->envbuf[slot][i];
    env[k] = NULL;
    c->env[slot] = env;
    return 0;
}

/* Fills c (zeroed, its fds -1) for the supervisor s. 0, or an exit status after printing. */
static int prepare(zp_command_t *c, const zp_sup_t *s)
{
    int rc = zp_command_check(&s->cfg, c->prog, sizeof c->prog, c->cwd, sizeof c->cwd);
    if (rc)
        return rc;
    const zp_strs_t *cmd = &s->cfg.trainer_command;
    for (int i = 0; i < cmd->n; i++)
        c->args[i] = (char *)cmd->v[i];
    c->args[cmd->n] = NULL;
    int slurm = s->slurm.world > 1;
    c->first = slurm ? s->slurm.rank : 0;
    c->ranks = slurm ? 1 : (int)s->cfg.gpus;
    int world = slurm ? s->slurm.world : (int)s->cfg.gpus;
    c->port = master_port(s);
    if (c->ranks > ZP_COMMAND_RANKS || !c->port) {
        fprintf(stderr, "zeus-pipe: trainer.command: %s\n", !c->port ? "no free TCP port for "
                "MASTER_PORT on 127.0.0.1" : "more ranks on this host than it can start");
        return 1;
    }
    for (int i = 0; i < c->ranks; i++) {
        int rank = c->first + i, local = slurm ? s->slurm.local : i;
        if ((rc = make_env(c, s, i, rank, world, local, slurm ? 1 : c->ranks, c->port)))
            return rc;
    }
    fprintf(stderr, "zeus-pipe: trainer: %s (%d rank(s) here, MASTER_ADDR %s, MASTER_PORT %d%s)\n",
            c->prog, c->ranks, slurm ? s->slurm.host : "127.0.0.1", c->port,
            slurm || s->cfg.transport == ZP_TRANSPORT_TCP ? ": transport.bind's port + 4" : ": free");
    return 0;
}

int zp_command_create(zp_command_t **out, const struct zp_sup *s)
{
    *out = NULL;
    zp_command_t *c = calloc(1, sizeof *c);
    if (!c) {
        fprintf(stderr, "zeus-pipe: trainer.command: out of memory\n");
        return 1;
    }
    for (int i = 0; i < ZP_COMMAND_RANKS; i++)
        c->fd[i] = c->log[i] = -1;
    pthread_mutex_init(&c->lock, NULL);
    int rc = prepare(c, s);
    if (rc) {
        zp_command_destroy(&c);
        return rc == ZP_ENOMEM ? 1 : rc;
    }
    *out = c;
    return 0;
}

char *const *zp_command_env(const zp_command_t *c, int rank)
{
    int slot = rank - c->first;
    return slot >= 0 && slot < c->ranks ? c->env[slot] : NULL;
}

/* ---- The relay: the programs' output into their logs and onto stderr -------------------------- */

/* Writes all of buf to fd (the log or stderr); gives up on an error. */
static void write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        buf += w, n -= (size_t)w;
    }
}

/* The slot's pending line, prefixed "trainer[R]: ", onto stderr in one write. */
static void flush_line(zp_command_t *c, int slot)
{
    if (!c->nline[slot])
        return;
    char out[sizeof c->line[0] + 32];
    int k = snprintf(out, 32, "trainer[%d]: ", c->first + slot);
    memcpy(out + k, c->line[slot], c->nline[slot]);
    size_t n = (size_t)k + c->nline[slot];
    if (out[n - 1] != '\n')
        out[n++] = '\n';
    write_all(STDERR_FILENO, out, n);
    c->nline[slot] = 0;
}

/* Closes the slot's pipe and log (under the lock: zp_command_drain reads fd). */
static void close_slot(zp_command_t *c, int slot)
{
    flush_line(c, slot);
    pthread_mutex_lock(&c->lock);
    close(c->fd[slot]);
    if (c->log[slot] >= 0)
        close(c->log[slot]);
    c->fd[slot] = c->log[slot] = -1;
    pthread_mutex_unlock(&c->lock);
}

/* What the slot's program wrote: into its log as it is, onto stderr by lines. */
static void relay_read(zp_command_t *c, int slot)
{
    char buf[4096];
    ssize_t n = read(c->fd[slot], buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) { /* end of file: the program and everything it started closed it */
        close_slot(c, slot);
        return;
    }
    if (c->log[slot] >= 0)
        write_all(c->log[slot], buf, (size_t)n);
    for (ssize_t i = 0; i < n; i++) {
        c->line[slot][c->nline[slot]++] = buf[i];
        if (buf[i] == '\n' || c->nline[slot] == sizeof c->line[0])
            flush_line(c, slot);
    }
}

static void *relay_main(void *arg)
{
    zp_command_t *c = arg;
    while (!c->stop) {
        struct pollfd pfd[ZP_COMMAND_RANKS];
        int slot[ZP_COMMAND_RANKS], n = 0;
        pthread_mutex_lock(&c->lock);
        for (int i = 0; i < c->ranks; i++)
            if (c->fd[i] >= 0)
                pfd[n] = (struct pollfd){.fd = c->fd[i], .events = POLLIN}, slot[n++] = i;
        pthread_mutex_unlock(&c->lock);
        if (poll(pfd, (nfds_t)n, 50) <= 0)
            continue;
        for (int i = 0; i < n; i++)
            if (pfd[i].revents)
                relay_read(c, slot[i]);
    }
    return NULL;
}

int zp_command_relay(zp_command_t *c, int rank, int fd, int log)
{
    int slot = rank - c->first;
    if (slot < 0 || slot >= c->ranks) {
        close(fd);
        if (log >= 0)
            close(log);
        return ZP_EINVAL;
    }
    pthread_mutex_lock(&c->lock);
    if (c->fd[slot] >= 0) /* a pipe of an earlier program of this rank: its output is over */
        close(c->fd[slot]);
    if (c->log[slot] >= 0)
        close(c->log[slot]);
    c->fd[slot] = fd, c->log[slot] = log;
    pthread_mutex_unlock(&c->lock);
    if (!c->started && pthread_create(&c->thread, NULL, relay_main, c) == 0)
        c->started = 1;
    return c->started ? 0 : ZP_ENOMEM;
}

void zp_command_drain(zp_command_t *c, int rank, int ms)
{
    int slot = rank - c->first;
    int64_t until = zp_now_ns() + (int64_t)ms * 1000000;
    while (c->started && slot >= 0 && slot < c->ranks && zp_now_ns() < until) {
        pthread_mutex_lock(&c->lock);
        int open = c->fd[slot] >= 0;
        pthread_mutex_unlock(&c->lock);
        if (!open)
            return;
        usleep(10000);
    }
}

void zp_command_destroy(zp_command_t **cp)
{
    zp_command_t *c = *cp;
    if (!c)
        return;
    for (int i = 0; i < c->ranks; i++)
        zp_command_drain(c, c->first + i, 500);
    c->stop = 1;
    if (c->started)
        pthread_join(c->thread, NULL);
    for (int i = 0; i < ZP_COMMAND_RANKS; i++) {
        if (c->fd[i] >= 0)
            close_slot(c, i);
        free(c->env[i]);
    }
    pthread_mutex_destroy(&c->lock);
    free(c);
    *cp = NULL;
}

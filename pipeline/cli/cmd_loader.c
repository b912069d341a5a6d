/* cmd_loader.c — `zeus-pipe loader --connect HOST:PORT --server-key FILE --key
 * FILE CONFIG`: loader processes on this host for a run on another one, over
 * tcp with CURVE. The run's host must list this key's .pub in its
 * transport.allowed_keys; CONFIG names the dataset as this host sees it.
 * The process that starts supervises: one child per loader, each reaped when
 * it exits and restarted unless it was retired or its config is wrong. */
#define _GNU_SOURCE
#include "pipeline/cli/cmd.h"
#include "pipeline/keys.h"
#include "pipeline/log.h"
#include "pipeline/supervisor/proc.h"
#include "pipeline/stage.h"
#include "stages/loader/loader.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_signal(int sig) { zp_stop = sig; }

#define WORKERS_MAX 256

typedef struct {
    pid_t pid;     /* 0: not running */
    int deaths;    /* within a minute of the last one: the back-off */
    int64_t last_death, restart_at; /* ns; restart_at 0: none pending */
} worker_t;

static void on_signals(int flags)
{
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = flags};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* One loader, in a child of the supervising process. Returns its exit status. */
static int run_worker(zp_stage_t *st, int instance)
{
    st->instance = instance;
    zp_log_init("loader", instance);
    on_signals(0);
    zp_info("loading for %s", st->connect);
    int rc = zp_stage_open(st) ? 1 : zp_loader_main(st);
    zp_stage_close(st);
    return rc ? rc : zp_stop ? 128 + zp_stop : 0; /* 2: a config error, not restarted */
}

/* Forks worker i. The supervising process never opens a ZeroMQ context or
 * starts a thread, so its children may run the loader without an exec. */
static int start_worker(zp_stage_t *st, worker_t *w, int i)
{
    fflush(NULL); /* nothing buffered is written twice */
    pid_t parent = getpid(), pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* stops with its supervisor */
        if (getppid() != parent)
            _exit(1);
        exit(run_worker(st, i));
    }
    w->pid = pid;
    w->restart_at = 0;
    return 0;
}

/* A worker that exited: 0 (retired) and 2 (a config error a restart cannot
 * mend) are final, anything else is restarted after a back-off (50 ms,
 * doubling with each death within a minute, to 1.6 s). Its exit status when final. */
static int on_exit_of(worker_t *w, int i, int status)
{
    zp_child_t c = {.status = status};
    char how[128];
    zp_procs_describe(&c, how, sizeof how);
    w->pid = 0;
    if (WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 2)) {
        fprintf(stderr, "zeus-pipe: loader[%d] %s%s\n", i, how,
                WEXITSTATUS(status) ? "; not restarted (configuration error)" : "");
        return WEXITSTATUS(status); /* 2: the command exits 2 too */
    }
    int64_t now = zp_now_ns();
    int64_t delay = zp_restart_backoff(&w->deaths, &w->last_death, now);
    w->restart_at = now + delay;
    fprintf(stderr, "zeus-pipe: loader[%d] %s; restarting it in %lld ms\n", i, how,
            (long long)(delay / 1000000));
    return 0;
}

/* TERM the workers, wait for them (KILL after 10 s). */
static void stop_workers(worker_t *w, int n)
{
    for (int i = 0; i < n; i++)
        if (w[i].pid > 0)
            kill(w[i].pid, SIGTERM);
    int64_t until = zp_now_ns() + 10000000000ll;
    for (int i = 0; i < n; i++) {
        while (w[i].pid > 0) {
            int status;
            pid_t r = waitpid(w[i].pid, &status, zp_now_ns() < until ? WNOHANG : 0);
            if (r == w[i].pid || (r < 0 && errno != EINTR))
                w[i].pid = 0;
            else if (r == 0 && zp_now_ns() >= until)
                kill(w[i].pid, SIGKILL);
            else if (r == 0)
                usleep(20000);
        }
    }
}

/* The supervising process: starts the workers, reaps each one that exits
 * (no zombie is left) and restarts it, until a signal or every worker is done. */
static int supervise(zp_stage_t *st, worker_t *w, int n)
{
    on_signals(0); /* no SA_RESTART: a signal ends the sleep at once */
    int failed = 0, rc = 0;
    for (int i = 0; i < n && !rc; i++)
        rc = start_worker(st, &w[i], i);
    if (rc)
        fprintf(stderr, "zeus-pipe: loader: fork: %s\n", strerror(-rc));
    while (!rc && !zp_stop) {
        int status, live = 0;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
            for (int i = 0; i < n; i++)
                if (w[i].pid == pid) {
                    int code = on_exit_of(&w[i], i, status);
                    failed = code > failed ? code : failed;
                }
        int64_t now = zp_now_ns();
        for (int i = 0; i < n; i++) {
            if (w[i].restart_at && now >= w[i].restart_at && start_worker(st, &w[i], i))
                w[i].restart_at = now + 1000000000; /* cannot fork now: again in a second */
            live += w[i].pid > 0 || w[i].restart_at;
        }
        if (!live)
            break;
        usleep(50000);
    }
    stop_workers(w, n);
    return zp_stop ? 128 + zp_stop : rc ? 1 : failed; /* 2: a loader was refused (another config) */
}

static int usage(FILE *out, int status)
{
    fprintf(out,
            "usage: zeus-pipe loader --connect HOST:PORT --server-key RUN.pub --key NAME.key\n"
            "                        [--workers N] CONFIG [KEY=VALUE ...]\n\n"
            "Runs N (default 1) loaders here for the run whose cache stage listens on\n"
            "HOST:PORT (transport.kind: tcp). --server-key is the run's server.pub (in its\n"
            "run directory); --key is this host's pair from `zeus-pipe keygen NAME`, whose\n"
            "NAME.pub the run lists in transport.allowed_keys. CONFIG must describe the\n"
            "same dataset and transform as the run's (paths as this host sees them).\n"
            "Loaders reconnect when the run's cache stage goes away; one that dies is\n"
            "restarted (after 50 ms, to 1.6 s when it keeps dying); Ctrl-C stops them.\n");
    return status;
}

int cmd_loader(int argc, char **argv)
{
    if (zp_wants_help(argc, argv))
        return usage(stdout, 0);
    const char *connect = NULL, *server = NULL, *key = NULL;
    long workers = 1;
    char *rest[256];
    int nrest = 0;
    for (int i = 0; i < argc && nrest < 256; i++) {
        if (!strcmp(argv[i], "--connect") && i + 1 < argc)
            connect = argv[++i];
        else if (!strcmp(argv[i], "--server-key") && i + 1 < argc)
            server = argv[++i];
        else if (!strcmp(argv[i], "--key") && i + 1 < argc)
            key = argv[++i];
        else if (!strcmp(argv[i], "--workers") && i + 1 < argc)
            workers = strtol(argv[++i], NULL, 10);
        else
            rest[nrest++] = argv[i];
    }
    if (!connect || !server || !key || workers < 1 || workers > WORKERS_MAX)
        return usage(stderr, 2);
    static zp_stage_t st;
    int rc = zp_cli_load(nrest, rest, NULL, &st.cfg, &st.meta);
    if (rc)
        return rc < 0 ? usage(stderr, 2) : rc;
    char err[4300];
    if (zp_keys_read_public(server, st.server_pub, err, sizeof err) ||
        zp_keys_read_pair(key, st.pub, st.sec, err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: loader: %s\n", err);
        return 2;
    }
    snprintf(st.connect, sizeof st.connect, "tcp://%s", connect);
    st.name = "loader";
    static worker_t w[WORKERS_MAX];
    return supervise(&st, w, (int)workers);
}

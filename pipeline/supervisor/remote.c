/* remote.c — `zeus-pipe loader --connect`: loaders on this host for a run on
 * another one. The same stage processes as a run's (procs.c): each loader is
 * `zeus-pipe stage loader --connect ...`, started from a private directory
 * that holds the config and the dataset as probed here, once. */
#define _GNU_SOURCE
#include "pipeline/net/keys.h"
#include "pipeline/base/log.h"
#include "pipeline/base/names.h"
#include "pipeline/stage/stage.h"
#include "pipeline/supervisor/supervisor.h"

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t g_signal;
static void on_signal(int sig) { g_signal = sig; }

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)type, (void)ftw;
    remove(path);
    return 0;
}

/* $TMPDIR/zeus-pipe-loader-XXXXXX with logs/, config.yaml and dataset/:
 * what `zeus-pipe stage loader` reads. 0, or 1 after printing why. */
static int make_home(const zp_config_t *cfg, const zp_dataset_t *ds, char *dir, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    char path[PATH_MAX + 64], err[PATH_MAX + 200];
    snprintf(dir, len, "%s/zeus-pipe-loader-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "zeus-pipe: loader: %s: %s (set TMPDIR to a writable folder)\n", dir,
                strerror(errno));
        return 1;
    }
    snprintf(path, sizeof path, "%s/logs", dir);
    int rc = mkdir(path, 0755) ? -errno : 0;
    snprintf(path, sizeof path, "%s/config.yaml", dir);
    FILE *f = rc ? NULL : fopen(path, "w");
    if (f) {
        zp_config_print(cfg, f);
        rc = fclose(f) ? -errno : 0;
    } else if (!rc) {
        rc = -errno;
    }
    if (rc)
        snprintf(err, sizeof err, "%s: %s", path, strerror(-rc));
    if (rc || zp_dataset_write(ds, dir, err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: loader: %s\n", err);
        nftw(dir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
        return 1;
    }
    return 0;
}

/* A loader that exited: 0 (retired) and 2 (refused: a config error a
 * restart cannot mend) are final, anything else restarts after a back-off.
 * Returns its status when final, else 0. */
static int on_exit_of(zp_child_t *c, int config_error)
{
    char how[128];
    zp_procs_describe(c, how, sizeof how);
    int code = WIFEXITED(c->status) ? WEXITSTATUS(c->status) : -1;
    if (config_error || code == 0) {
        fprintf(stderr, "zeus-pipe: loader[%d] %s%s\n", c->instance, how,
                code ? "; not restarted (configuration error)" : "");
        return code;
    }
    int64_t now = zp_now_ns();
    int64_t delay = zp_procs_restart_backoff(&c->deaths, &c->last_death, now);
    c->restart_at = now + delay;
    fprintf(stderr, "zeus-pipe: loader[%d] %s; restarting it in %lld ms\n", c->instance, how,
            (long long)(delay / 1000000));
    return 0;
}

/* Reaps and restarts until a signal or until no loader is left. The worst
 * final status (2: a loader was refused). */
static int tend(zp_procs_t *p)
{
    int failed = 0, dummy;
    while (!g_signal) {
        zp_child_t *bad = zp_procs_reap(p, &dummy); /* exit 2: not flagged `exited` */
        if (bad)
            failed = 2, on_exit_of(bad, 1);
        int64_t now = zp_now_ns();
        int live = 0;
        for (int i = 0; i < p->nchild; i++) {
            zp_child_t *c = &p->child[i];
            if (c->exited) {
                c->exited = 0;
                int code = on_exit_of(c, 0);
                failed = code > failed ? code : failed;
            }
            if (c->restart_at && now >= c->restart_at && zp_procs_spawn(p, ZP_STAGE_LOADER, c->instance, 0))
                c->restart_at = now + 1000000000; /* cannot fork now: again in a second */
            live += c->pid > 0 || c->restart_at;
        }
        if (!live)
            break;
        usleep(50000);
    }
    return failed;
}

int zp_remote_run(const zp_config_t *cfg, const zp_dataset_t *ds, const zp_remote_t *r)
{
    char err[4300], server[41], pub[41], sec[41], dir[PATH_MAX], connect[200];
    if (zp_keys_read_public(r->server_key, server, err, sizeof err) ||
        zp_keys_read_pair(r->key, pub, sec, err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: loader: %s\n", err);
        return 2;
    }
    if (make_home(cfg, ds, dir, sizeof dir))
        return 1;
    static zp_procs_t p;
    zp_procs_init(&p, dir, cfg);
    p.inherit = p.keep_loaders = 1;
    snprintf(connect, sizeof connect, "%s", r->connect);
    char *extra[] = {"--connect", connect, "--server-key", (char *)r->server_key, "--key",
                     (char *)r->key, NULL};
    memcpy(p.extra, extra, sizeof extra);
    struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: a signal ends the sleep */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    int rc = 0, failed = 0;
    for (int i = 0; i < r->workers && !rc; i++)
        rc = zp_procs_spawn(&p, ZP_STAGE_LOADER, i, 0);
    if (rc)
        fprintf(stderr, "zeus-pipe: loader: cannot start a loader: %s\n", zp_strerror(rc));
    else
        failed = tend(&p);
    zp_procs_stop(&p, 0, 10000);
    nftw(dir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
    return g_signal ? 128 + g_signal : rc ? 1 : failed;
}

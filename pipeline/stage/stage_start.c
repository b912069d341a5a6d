/* stage_start.c — a stage process's start from its arguments, for `zeus-pipe
 * stage NAME` and for the Python loaders of libzeuspipe.so (stage.h). */
#define _GNU_SOURCE
#include "pipeline/image/augment.h"
#include "pipeline/cachedb/cachedb.h"
#include "pipeline/net/keys.h"
#include "pipeline/base/log.h"
#include "pipeline/net/sock.h"
#include "pipeline/source/source.h"
#include "pipeline/stage/stage.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The largest frame a stage of this run is sent, twice over, and 16 MiB
 * for everything else (events, stats, a batch's indices): a task's samples
 * or its cache values (a sample, a record before a step, or a whole image,
 * raw or as a JPEG of at most twice its raw size), with their crops. */
static int64_t largest_frame(const zp_config_t *cfg, const zp_dataset_meta_t *m)
{
    int64_t one = (int64_t)m->sample_bytes, side = cfg->image_cache_side;
    if ((int64_t)m->cached.record_bytes > one)
        one = (int64_t)m->cached.record_bytes;
    if (zp_augment_whole(cfg) && 6 * side * side > one)
        one = 6 * side * side;
    int64_t n = cfg->task_size > cfg->batch_size ? cfg->task_size : cfg->batch_size;
    return 2 * n * (one + ZP_CACHE_HDR + (int64_t)sizeof(zp_crop_t)) + (16 << 20);
}

/* The dataset as the supervisor probed it; a run directory without that
 * description (made by hand, as by tests/test_trainer_ring.c) is probed here. */
static int load_dataset(zp_stage_t *st)
{
    static zp_dataset_t *ds; /* the stage's, for its life: st->meta.probed */
    char err[PATH_MAX + 200];
    int rc = zp_dataset_read(&ds, st->run_dir, err, sizeof err);
    if (rc == -ENOENT)
        rc = zp_source_probe(&ds, &st->cfg, err, sizeof err);
    if (rc) {
        zp_error("%s", err);
        return rc;
    }
    st->meta = ds->meta;
    zp_sock_set_max_msg(largest_frame(&st->cfg, &st->meta));
    return 0;
}

/* A loader of a run on another host: its cache stage's address and the CURVE keys. */
static int remote(zp_stage_t *st, const char *connect, const char *server, const char *key)
{
    char err[4300];
    if (!server || !key || zp_keys_read_public(server, st->server_pub, err, sizeof err) ||
        zp_keys_read_pair(key, st->pub, st->sec, err, sizeof err)) {
        zp_error("%s", server && key ? err : "--connect needs --server-key and --key");
        return ZP_EINVAL;
    }
    snprintf(st->connect, sizeof st->connect, "tcp://%.150s", connect);
    zp_info("loading for %s", st->connect);
    return 0;
}

static void on_signal(int sig) { zp_stop = sig; }
static void on_retire(int sig) { zp_retire = sig; }
static void on_save(int sig) { zp_save = sig; }

int zp_stage_start(zp_stage_t *st, const char *name, int argc, char **argv)
{
    const char *run = NULL, *connect = NULL, *server = NULL, *key = NULL;
    for (int i = 0; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--connect"))
            connect = argv[i + 1];
        else if (!strcmp(argv[i], "--server-key"))
            server = argv[i + 1];
        else if (!strcmp(argv[i], "--key"))
            key = argv[i + 1];
        else if (!strcmp(argv[i], "--run"))
            run = argv[i + 1];
        else if (!strcmp(argv[i], "--instance"))
            st->instance = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--mode"))
            st->mode = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--ckpts"))
            snprintf(st->ckpts, sizeof st->ckpts, "%s", argv[i + 1]);
    }
    st->name = name;
    zp_log_init(name, st->instance);
    if (!run) {
        zp_error("missing --run DIR");
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    struct sigaction ra = {.sa_handler = on_retire}, va = {.sa_handler = on_save};
    sigaction(ZP_SIG_RETIRE, &ra, NULL);
    sigaction(SIGUSR1, &va, NULL);
    /* blocked from fork until here (procs.c): a retire sent meanwhile arrives now */
    sigset_t retire;
    sigemptyset(&retire);
    sigaddset(&retire, ZP_SIG_RETIRE);
    sigaddset(&retire, SIGUSR1);
    sigprocmask(SIG_UNBLOCK, &retire, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (!realpath(run, st->run_dir)) {
        zp_error("%s: no such run directory", run);
        return 2;
    }
    char path[PATH_MAX + 32], err[1024];
    snprintf(path, sizeof path, "%s/config.yaml", st->run_dir);
    if (zp_config_load_run(&st->cfg, path, err, sizeof err)) {
        zp_error("%s", err);
        return 2;
    }
    if (load_dataset(st))
        return 1;
    if (connect && remote(st, connect, server, key))
        return 2; /* not restarted: the keys will not mend */
    if (zp_stage_slurm(st))
        return 2;
    int rc = zp_stage_open(st);
    if (rc) {
        zp_error("cannot open the stage's sockets: %s", zp_strerror(rc));
        zp_stage_close(st);
        return 1;
    }
    return 0;
}

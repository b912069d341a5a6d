/* cmd_stage.c — `zeus-pipe stage NAME --run DIR --instance I`: one stage
 * process, started by a supervisor (pipeline/supervisor/). It reads the
 * run's config.yaml and the dataset as the supervisor probed it (RUN/dataset/);
 * a loader for a run on another host (`zeus-pipe loader`) also gets
 * --connect HOST:PORT --server-key FILE --key FILE. */
#define _GNU_SOURCE
#include "pipeline/cli/cmd.h"
#include "pipeline/keys.h"
#include "pipeline/log.h"
#include "pipeline/names.h"
#include "pipeline/stage.h"
#include "stages/cache/cache.h"
#include "stages/loader/loader.h"
#include "stages/logger/logger.h"
#include "stages/prefetch/prefetch.h"
#include "stages/trainer/trainer.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* Each stage's entry point, by its ZP_STAGE_* (pipeline/names.h names them). */
static int (*const MAINS[ZP_STAGE_COUNT])(zp_stage_t *) = {
    [ZP_STAGE_LOADER] = zp_loader_main,     [ZP_STAGE_CACHE] = zp_cache_main,
    [ZP_STAGE_PREFETCH] = zp_prefetch_main, [ZP_STAGE_TRAINER] = zp_trainer_main,
    [ZP_STAGE_LOGGER] = zp_logger_main,
};

/* The dataset as the supervisor probed it; a run directory without that
 * description (made by hand, as by tests/test_trainer_ring.c) is probed here. */
static int load_dataset(zp_stage_t *st)
{
    static zp_dataset_t *ds; /* the stage's, for its life: st->meta.probed */
    char err[PATH_MAX + 200];
    int rc = zp_dataset_read(&ds, st->run_dir, err, sizeof err);
    if (rc == -ENOENT)
        rc = zp_dataset_open(&ds, &st->cfg, err, sizeof err);
    if (rc) {
        zp_error("%s", err);
        return rc;
    }
    st->meta = ds->meta;
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

int cmd_stage(int argc, char **argv)
{
    if (zp_wants_help(argc, argv) || argc < 2) {
        printf("usage: zeus-pipe stage NAME --run DIR [--instance I] [--mode M] [--ckpts A,B]\n"
               "Runs one stage of the run in DIR (started by `zeus-pipe up`).\n"
               "NAME: loader, cache, prefetch, trainer, logger\n");
        return argc < 2 ? 2 : 0;
    }
    static zp_stage_t st;
    const char *run = NULL, *connect = NULL, *server = NULL, *key = NULL;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--connect"))
            connect = argv[i + 1];
        else if (!strcmp(argv[i], "--server-key"))
            server = argv[i + 1];
        else if (!strcmp(argv[i], "--key"))
            key = argv[i + 1];
        else if (!strcmp(argv[i], "--run"))
            run = argv[i + 1];
        else if (!strcmp(argv[i], "--instance"))
            st.instance = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--mode"))
            st.mode = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--ckpts"))
            snprintf(st.ckpts, sizeof st.ckpts, "%s", argv[i + 1]);
    }
    int stage = zp_stage_of(argv[1]);
    int (*entry)(zp_stage_t *) = stage >= 0 ? MAINS[stage] : NULL;
    st.name = stage >= 0 ? zp_stage_name(stage) : NULL;
    if (!entry || !run) {
        fprintf(stderr, "zeus-pipe stage: unknown stage '%s' or missing --run\n", argv[1]);
        return 2;
    }
    zp_log_init(st.name, st.instance);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    struct sigaction ra = {.sa_handler = on_retire};
    sigaction(SIGUSR1, &ra, NULL); /* ignored from fork until here (proc.c) */
    signal(SIGPIPE, SIG_IGN);
    if (!realpath(run, st.run_dir)) {
        zp_error("%s: no such run directory", run);
        return 2;
    }
    char path[PATH_MAX + 32], err[1024];
    snprintf(path, sizeof path, "%s/config.yaml", st.run_dir);
    if (zp_config_load(&st.cfg, path, NULL, 0, err, sizeof err)) {
        zp_error("%s", err);
        return 2;
    }
    if (load_dataset(&st))
        return 1;
    if (connect && remote(&st, connect, server, key))
        return 2; /* not restarted: the keys will not mend */
    if (zp_stage_slurm(&st))
        return 2;
    int rc = zp_stage_open(&st);
    if (rc) {
        zp_error("cannot open the stage's sockets: %s", zp_strerror(rc));
        zp_stage_close(&st);
        return 1;
    }
    int status = entry(&st);
    zp_stage_close(&st);
    if (status == 0 && zp_stop)
        status = 128 + zp_stop;
    return status;
}

/* cmd_stage.c — `zeus-pipe stage NAME --run DIR --instance I`: one stage
 * process, started by a supervisor (pipeline/supervisor/). It reads the
 * run's config.yaml and the dataset as the supervisor probed it (RUN/dataset/);
 * a loader for a run on another host (`zeus-pipe loader`) also gets
 * --connect HOST:PORT --server-key FILE --key FILE. */
#define _GNU_SOURCE
#include "pipeline/cli/cmd.h"
#include "pipeline/base/log.h"
#include "pipeline/base/names.h"
#include "pipeline/stage/stage.h"
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

/* Each stage's entry point, by its ZP_STAGE_* (pipeline/base/names.h names them). */
static int (*const MAINS[ZP_STAGE_COUNT])(zp_stage_t *) = {
    [ZP_STAGE_LOADER] = zp_loader_main,     [ZP_STAGE_CACHE] = zp_cache_main,
    [ZP_STAGE_PREFETCH] = zp_prefetch_main, [ZP_STAGE_TRAINER] = zp_trainer_main,
    [ZP_STAGE_LOGGER] = zp_logger_main,
};

int cmd_stage(int argc, char **argv)
{
    if (zp_cmd_wants_help(argc, argv) || argc < 2) {
        printf("usage: zeus-pipe stage NAME --run DIR [--instance I] [--mode M] [--ckpts A,B]\n"
               "Runs one stage of the run in DIR (started by `zeus-pipe up`).\n"
               "NAME: loader, cache, prefetch, trainer, logger\n");
        return argc < 2 ? 2 : 0;
    }
    static zp_stage_t st;
    int stage = zp_names_stage_of(argv[1]);
    int (*entry)(zp_stage_t *) = stage >= 0 ? MAINS[stage] : NULL;
    if (!entry) {
        fprintf(stderr, "zeus-pipe stage: unknown stage '%s'\n", argv[1]);
        return 2;
    }
    int status = zp_stage_start(&st, zp_names_stage(stage), argc - 2, argv + 2);
    if (status)
        return status;
    status = entry(&st);
    zp_stage_close(&st);
    if (status == 0 && zp_stop)
        status = 128 + zp_stop;
    return status;
}

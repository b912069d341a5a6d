/* loader.h — the loader stage: reads and decodes samples from the dataset for the tasks the cache stage hands out.
 * `zeus-pipe stage loader` calls its entry point with the stage filled in
 * (pipeline/stage.h); the return value is the exit status. */
#ifndef ZP_STAGE_LOADER_H
#define ZP_STAGE_LOADER_H

#include "pipeline/stage.h"

int zp_loader_main(zp_stage_t *st);

#endif

/* loader.h — the loader stage: reads and decodes samples from the dataset for the tasks the cache stage hands out.
 * `zeus-pipe stage loader` calls its entry point with the stage filled in
 * (pipeline/stage/stage.h); the return value is the exit status. */
#ifndef ZP_STAGE_LOADER_H
#define ZP_STAGE_LOADER_H

#include "pipeline/stage/stage.h"
#include "pipeline/source/source.h"

/* Opens the built-in source dataset.source names and runs the loader. */
int zp_loader_main(zp_stage_t *st);
/* Runs the loader over `src` (the caller's; not destroyed) until it is
 * retired, stopped or refused, and closes the stage. The exit status: 0,
 * 1 failed, 2 refused by the run (a restart cannot mend it). */
int zp_loader_run(zp_stage_t *st, zp_source_t *src);

#endif

/* prefetch.h — the prefetch stage: assembles batches into the shared-memory ring for one rank.
 * `zeus-pipe stage prefetch` calls its entry point with the stage filled in
 * (pipeline/stage/stage.h); the return value is the exit status. */
#ifndef ZP_STAGE_PREFETCH_H
#define ZP_STAGE_PREFETCH_H

#include "pipeline/stage/stage.h"

int zp_prefetch_main(zp_stage_t *st);

#endif

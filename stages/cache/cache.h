/* cache.h — the cache stage: the broker between prefetch and the loaders, and the LMDB writer.
 * `zeus-pipe stage cache` calls its entry point with the stage filled in
 * (pipeline/stage/stage.h); the return value is the exit status. */
#ifndef ZP_STAGE_CACHE_H
#define ZP_STAGE_CACHE_H

#include "pipeline/stage/stage.h"

int zp_cache_main(zp_stage_t *st);

#endif

/* cache.h — the cache stage: the broker between prefetch and the loaders, and the LMDB writer.
 * `zeus-pipe stage cache` calls its entry point with the stage filled in
 * (pipeline/runtime/stage.h); the return value is the exit status. */
#ifndef ZP_STAGE_CACHE_H
#define ZP_STAGE_CACHE_H

#include "pipeline/runtime/stage.h"

int zp_cache_main(zp_stage_t *st);

#endif

/* logger.h — the logger stage: collects every stage's events into metrics.jsonl, stats.jsonl and events.msgpack.
 * `zeus-pipe stage logger` calls its entry point with the stage filled in
 * (pipeline/stage/stage.h); the return value is the exit status. */
#ifndef ZP_STAGE_LOGGER_H
#define ZP_STAGE_LOGGER_H

#include "pipeline/stage/stage.h"

int zp_logger_main(zp_stage_t *st);

#endif

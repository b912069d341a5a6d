/* trainer.h — the trainer stage: consumes the ring of one rank: the model, its optimizer and the epoch records.
 * `zeus-pipe stage trainer` calls its entry point with the stage filled in
 * (pipeline/stage/stage.h); the return value is the exit status. */
#ifndef ZP_STAGE_TRAINER_H
#define ZP_STAGE_TRAINER_H

#include "pipeline/stage/stage.h"

int zp_trainer_main(zp_stage_t *st);

#endif

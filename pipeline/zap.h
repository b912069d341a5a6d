/* zap.h — the ZeroMQ authentication handler (ZAP, RFC 27) of a stage's tcp
 * endpoints: a CURVE client is let in only when its public key is one of the
 * NAME.pub files in transport.allowed_keys (read at start) or, under Slurm,
 * the job's own ranks.pub in rank 0's run directory. Refusals are logged
 * with the peer's address and key. */
#ifndef ZP_ZAP_H
#define ZP_ZAP_H

#include "pipeline/stage.h"

typedef struct zp_zap zp_zap_t;

/* Loads the allowed keys and starts the handler thread on st->zctx; it must
 * run before a CURVE socket binds. Errors are logged. Under Slurm a missing
 * transport.allowed_keys folder is no error: the ranks bring their own key. */
int zp_zap_start(zp_zap_t **out, zp_stage_t *st);
/* Stops the thread; safe twice, nulls the pointer. */
void zp_zap_stop(zp_zap_t **zap);

#endif

/* comm.h — sums over the trainer ranks of a data-parallel run (trainer.gpus > 1).
 *
 * Rank 0 binds a ROUTER at the run's sock/comm.ipc; every other rank connects
 * a DEALER whose routing id is its rank number. Under Slurm the other ranks
 * connect over tcp with CURVE, and rank 0 knows each by its key instead
 * (pipeline/zap.h): a peer cannot take a rank's place by naming it. In a reduction every rank
 * sends REDUCE {id, n, elems} with its float values and double sums; rank 0
 * waits for all of them, adds them up in rank order, in double (so the result
 * does not depend on who arrives first), and sends the totals back: every rank
 * ends with the same bits. The cpu backend sums its gradients this way, and
 * every backend its metrics (the cuda backend's gradients go through NCCL).
 *
 * A message from a peer that is no rank of the run is dropped and counted. A
 * rank that sends a REDUCE of another id or size, or twice, stops the run
 * with an error naming it; so does a rank that stays silent for
 * trainer.comm_timeout_s (a rank that dies stops the run through the
 * supervisor first). Waits end early on SIGINT/SIGTERM.
 */
#ifndef ZP_COMM_H
#define ZP_COMM_H

#include "pipeline/stage.h"

#include <stddef.h>

typedef struct zp_comm zp_comm_t;

/* Rank `rank` of `world`: binds (rank 0) or connects. */
int zp_comm_open(zp_comm_t **out, zp_stage_t *st, int rank, int world);
/* Safe on NULL; nulls *c. */
void zp_comm_close(zp_comm_t **c);

/* Replaces v[0..n) and s[0..k) by their sums over all ranks. Every rank must
 * call it with the same n and k, the same number of times. 0, ZP_ESTOP,
 * ZP_ETIMEOUT, ZP_EPROTO (logged, naming the rank) or ZP_EZMQ. */
int zp_comm_sum(zp_comm_t *c, float *v, size_t n, double *s, size_t k);

#endif

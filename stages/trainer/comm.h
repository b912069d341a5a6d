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
 *
 * A world of one rank opens no socket: its sums are the values themselves,
 * so the trainer's loop sums the same way with one rank or many. A sum over
 * ranks is timed into the ZP_R_COMM region by the sum itself.
 *
 * The receive loop stays its own (not zp_inbox_recv): a peer is told from a
 * rank by its routing id or its ZAP key before anything it sent is decoded,
 * and a rank's malformed part stops the run while a stranger's is dropped.
 */
#ifndef ZP_COMM_H
#define ZP_COMM_H

#include "pipeline/stage.h"

#include <stddef.h>

typedef struct zp_comm zp_comm_t;

/* Rank `rank` of `world` (1 .. 64): binds (rank 0) or connects; world 1
 * opens nothing. Returns 0, or ZP_EINVAL (rank or world out of range),
 * ZP_ENOMEM or ZP_EZMQ with *out NULL. */
int zp_comm_open(zp_comm_t **out, zp_stage_t *st, int rank, int world);
/* Safe on NULL and twice; nulls *c. */
void zp_comm_destroy(zp_comm_t **c);

/* Replaces v[0..n) and s[0..k) by their sums over all ranks. Every rank must
 * call it with the same n and k, the same number of times. 0, ZP_ESTOP,
 * ZP_ETIMEOUT, ZP_EPROTO (logged, naming the rank) or ZP_EZMQ. */
int zp_comm_sum(zp_comm_t *c, float *v, size_t n, double *s, size_t k);
/* Nanoseconds the last zp_comm_sum took (0 with one rank). */
int64_t zp_comm_last_ns(const zp_comm_t *c);
int zp_comm_rank(const zp_comm_t *c);
int zp_comm_world(const zp_comm_t *c);

#endif

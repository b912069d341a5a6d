/* comm.h — sums over the trainer ranks of a data-parallel run (trainer.gpus > 1,
 * or the Slurm tasks), for the built-in trainer and the client library alike.
 *
 * Rank 0 binds a ROUTER at the run's sock/comm.ipc; every other rank connects
 * a DEALER whose routing id is its rank number. Under Slurm the other ranks
 * connect over tcp with CURVE, and rank 0 knows each by its key instead
 * (pipeline/stage/zap.h): a peer cannot take a rank's place by naming it. In a
 * reduction every rank sends REDUCE {id, n, elems} with its float values and
 * double sums; rank 0 waits for all of them, adds them up in rank order, in
 * double (so the result does not depend on who arrives first), and sends the
 * totals back: every rank ends with the same bits.
 *
 * Who sums what: the built-in trainer (stages/trainer/) sums each epoch's
 * coverage counts and the sampler's counts (coverage.h: zp_coverage_pack),
 * and the cpu backend its gradients and metrics (the cuda backend's gradients
 * go through NCCL). A user's program as the trainer (client.c, zeus_pipe.h)
 * sums the same epoch counts at each EPOCH_END inside zp_client_next, so its
 * rank 0 records one epoch_end of the whole epoch, as the built-in trainer's.
 *
 * A message from a peer that is no rank of the run is dropped and counted. A
 * rank that sends a REDUCE of another id or size, or twice, stops the run
 * with an error naming it; so does a rank that stays silent for
 * trainer.comm_timeout_s (a rank that dies stops the run through the
 * supervisor first). Waits end early on SIGINT/SIGTERM (zp_stop, set by a
 * stage's handler), on SIGUSR1 (zp_save: the trainer saves, and a step whose
 * sum is cut short changes nothing) and, with ZP_COMM_SIGNAL_STOPS, on any signal the process
 * handles itself (a user's program: Python turns Ctrl-C into
 * KeyboardInterrupt after the library returns ZP_ESTOP).
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

#include "pipeline/stage/stage.h"

#include <stddef.h>

typedef struct zp_comm zp_comm_t;

/* Flags of zp_comm_create. SIGNAL_STOPS: a wait interrupted by a signal
 * (EINTR) ends the sum with ZP_ESTOP, for a process whose signal handlers
 * are not zeus-pipe's (a user's program: zp_stop is never set there). */
enum { ZP_COMM_SIGNAL_STOPS = 1 };

/* Rank `rank` of `world` (1 .. 64) of the run of st (its sockets, config,
 * stats and timers: st must outlive the comm): binds (rank 0) or connects;
 * world 1 opens nothing. Returns 0, or ZP_EINVAL (rank or world out of
 * range), ZP_ENOMEM or ZP_EZMQ (logged) with *out NULL. */
int zp_comm_create(zp_comm_t **out, zp_stage_t *st, int rank, int world, int flags);
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

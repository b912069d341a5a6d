/* zap.h — the ZeroMQ authentication handler (ZAP, RFC 27) of a stage's tcp
 * endpoints. Every CURVE server socket names its ZAP domain, and each domain
 * has its own key list:
 *
 *   loaders  the cache stage's loaders (transport.bind's port): the NAME.pub
 *            files in transport.allowed_keys and, under Slurm, the job's ranks
 *            (whose loaders connect there)
 *   ranks    under Slurm, the sockets every rank shares (fetch, events, the
 *            ranks' sum): the job's rank keys in rank 0's ranks.pub only
 *
 * A request for another domain, or with a key not in the domain's list, is
 * refused and logged with the peer's address and key. A rank's key lets its
 * peer in as that rank: the reply's User-Id is "rank R", which a receiver
 * reads from every message of that connection (zp_zap_rank), so a rank is
 * the key it proved, never a routing id it chose. */
#ifndef ZP_ZAP_H
#define ZP_ZAP_H

#include "pipeline/stage/stage.h"

#include <zmq.h>

typedef struct zp_zap zp_zap_t;

/* X(enum, ZAP domain, whose keys it lets in: said in a refusal) */
#define ZP_ZAP_DOMAINS(X)                                                                          \
    X(ZP_ZAP_LOADERS, "loaders", "transport.allowed_keys")                                         \
    X(ZP_ZAP_RANKS, "ranks", "the job's rank keys (ranks.pub of rank 0's run)")

#define ZP_ZAP_ENUM(e, name, keys) e,
typedef enum { ZP_ZAP_DOMAINS(ZP_ZAP_ENUM) ZP_ZAP_COUNT } zp_zap_domain_t;
#undef ZP_ZAP_ENUM

/* Makes `sock` a CURVE server of `domain` with the run's key pair
 * (RUN/server.key), starting this process's handler first when none runs
 * (it loads the key lists). Call before the socket binds its tcp endpoint.
 * 0, or an error, logged. */
int zp_zap_serve(zp_stage_t *st, void *sock, zp_zap_domain_t domain);
/* Stops the handler; safe twice, nulls the pointer. */
void zp_zap_destroy(zp_zap_t **zap);

/* The rank 1..world-1 whose key the sender of `msg` (a frame received on a
 * ranks socket) proved, or -1: a peer of no rank key, or one that came
 * without ZAP (ipc). */
int zp_zap_rank(zmq_msg_t *msg, int world);

#endif

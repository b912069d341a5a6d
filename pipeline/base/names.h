/* names.h — the stages of a pipeline and the sockets between them, declared
 * once. Code names a stage or socket by its ZP_STAGE_* / ZP_SOCK_* constant
 * and gets the text from here: the process names in logs, `stat` and the
 * report, and the files under RUN/sock/. */
#ifndef ZP_NAMES_H
#define ZP_NAMES_H

#include <stddef.h>

/* Stages, in data-path order (the order `stat` and the report list them):
 * X(ID, "name", what it does). */
#define ZP_STAGES(X)                                                                               \
    X(LOADER, "loader", "reads, decodes and transforms samples; N processes, scalable")            \
    X(CACHE, "cache", "broker between prefetchers and loaders; the only LMDB writer")             \
    X(PREFETCH, "prefetch", "owns the sampler, assembles batches into the ring; one per rank")    \
    X(TRAINER, "trainer", "consumes one ring; one per rank")                                       \
    X(LOGGER, "logger", "collects every stage's events; writes the run's files; answers stat")

enum {
#define ZP_STAGE_ENUM(id, name, doc) ZP_STAGE_##id,
    ZP_STAGES(ZP_STAGE_ENUM)
#undef ZP_STAGE_ENUM
    ZP_STAGE_COUNT
};

/* Sockets of a run, each RUN/sock/<name>.ipc: X(ID, "name", slurm_port: its
 * tcp port's offset from transport.bind's under Slurm, where rank 0 binds it
 * for every rank (0: a host's own; work and fetch are a node's own, in its
 * leader's RUN/rank-<l>/sock/), who binds it and what goes through). */
#define ZP_SOCKETS(X)                                                                              \
    X(WORK, "work", 0, "cache, ROUTER: loaders' DEALERs take tasks and return samples")           \
    X(FETCH, "fetch", 0, "cache, ROUTER: prefetchers' DEALERs fetch misses, sync the cache")      \
    X(EVENTS, "events", 2, "logger, PULL: every stage's PUSH of events (metrics, stats, timers)") \
    X(COMM, "comm", 3, "rank 0's trainer, ROUTER: the ranks' sums (cpu backend)")      \
    X(STAT, "stat", 1, "logger, REP: `zeus-pipe stat` and autoscale ask for the latest stats")   \
    X(RING, "ring", 0, "prefetch, PAIR per rank, ring-<rank>: BATCH / FREE of ring slots")       \
    X(CONTROL, "control", 0, "the supervisor, REP: stat, scale, down")

enum {
#define ZP_SOCK_ENUM(id, name, port, doc) ZP_SOCK_##id,
    ZP_SOCKETS(ZP_SOCK_ENUM)
#undef ZP_SOCK_ENUM
    ZP_SOCK_COUNT
};

/* The name of stage ZP_STAGE_*; "?" for anything else. */
const char *zp_names_stage(int stage);
/* The ZP_STAGE_* of a name; -1 when it names no stage. */
int zp_names_stage_of(const char *name);
/* The name of socket ZP_SOCK_*; "?" for anything else. */
const char *zp_names_sock(int sock);
/* Under Slurm, the offset of socket ZP_SOCK_*'s tcp port from
 * transport.bind's: 1 or more for the sockets every rank shares, 0 for a
 * host's own. */
int zp_names_slurm_port(int sock);
/* The socket name of rank `rank`'s ring ("ring-<rank>") into buf. */
void zp_names_ring_sock(char *buf, size_t len, int rank);

#endif

/* stage.h — what every stage process has: its config, identity, ZeroMQ
 * context, event socket to the logger, and counters.
 *
 * `zeus-pipe stage NAME --run DIR --instance I` fills one of these and calls
 * the stage's entry point, whose return value is the exit status.
 */
#ifndef ZP_STAGE_H
#define ZP_STAGE_H

#include "pipeline/config/config.h"
#include "pipeline/dataset/dataset.h"
#include "pipeline/base/slurm.h"
#include "pipeline/net/inbox.h"
#include "pipeline/base/timer.h"
#include "schemas/records.h"

#include <limits.h>
#include <msgpack.h>
#include <signal.h>
#include <stdint.h>

/* What the run is for. TRAIN: the config's epochs; RESUME: the same, from
 * checkpoints/last.ckpt; EVAL: one pass over the test split with the
 * checkpoints named in `ckpts` (the run directory is <run>/eval*); OVERFIT:
 * the first train batch, repeated limit_train_batches times, no test. */
enum { ZP_MODE_TRAIN, ZP_MODE_RESUME, ZP_MODE_EVAL, ZP_MODE_OVERFIT };

/* Set by SIGINT/SIGTERM to the signal number; loops check it. */
extern volatile sig_atomic_t zp_stop;
/* A loader's retire (`zeus-pipe scale`, the autoscaler): a real-time signal
 * no one else sends. Not SIGUSR1, which Slurm's --signal sends to every
 * process of a job step. */
#define ZP_SIG_RETIRE (SIGRTMIN + 1)
/* Set by ZP_SIG_RETIRE: finish gracefully (a loader retires). */
extern volatile sig_atomic_t zp_retire;
/* Set by SIGUSR1: save and stop — the trainer finishes its step, writes its
 * checkpoint and ends; the other stages go on until the supervisor stops
 * them (Slurm's warning of a time limit or a preemption reaches them all). */
extern volatile sig_atomic_t zp_save;

enum { ZP_ST_IDLE, ZP_ST_BUSY, ZP_ST_WAIT_IN, ZP_ST_WAIT_OUT };

typedef struct {
    int64_t items, bytes, errors; /* totals */
    int64_t ns[4];                /* time per state, ZP_ST_* */
    int64_t queue;                /* current queue depth, set by the stage */
    int64_t hits, lookups;        /* cache hits among lookups (prefetch) */
    int64_t lmdb_errors;          /* LMDB errors on the hit path (prefetch): never a silent miss */
    int64_t helper_ns;            /* time its helper threads worked (prefetch's readers), set by the stage */
    int helpers;                  /* those threads (0: none, readers_busy is -1) */
    int state, final;
    int64_t since, start;
    /* the last window */
    int64_t w_start, w_items, w_bytes, w_ns[4], w_cpu_ns, w_hits, w_lookups, w_helper_ns;
    int64_t interval_ns, next_ns;
} zp_stats_t;

typedef struct {
    const char *name; /* "loader", ... */
    int instance;
    zp_config_t cfg;
    zp_dataset_meta_t meta;
    char run_dir[PATH_MAX]; /* absolute */
    void *zctx;
    void *events; /* PUSH to the logger; never blocks */
    zp_stats_t stats;
    zp_timers_t timers; /* of the stage's main thread; flushed with every stats event */
    int64_t events_dropped;
    int mode;        /* ZP_MODE_*, from `up`, `up --resume`, `eval` or `overfit` */
    /* `zeus-pipe loader --connect`: a loader of a run on another host. Its
     * run_dir is a private folder of that command (the config and the
     * dataset description), not the run's; there is no logger (events are
     * dropped and counted). */
    char connect[160]; /* tcp://host:port of the run's cache stage */
    char server_pub[41], pub[41], sec[41]; /* CURVE keys, Z85 */
    char ckpts[1024]; /* eval: comma-separated names in the evaluated run's checkpoints/ */
    /* `srun zeus-pipe up` (pipeline/base/slurm.h): slurm.world > 1. The sockets
     * every rank shares are tcp with CURVE on rank 0's host; the keys lie in
     * run0, rank 0's run directory (run_dir itself on rank 0). The node's
     * cache sockets (work, fetch) lie in plane, its leader's run directory. */
    zp_slurm_t slurm;
    char run0[PATH_MAX];
    char plane[PATH_MAX]; /* "" outside Slurm: run_dir */
    struct zp_zap *zap; /* who may connect to this process's CURVE sockets; NULL until one binds */
} zp_stage_t;

/* Charges the time since the last switch to the previous state. */
void zp_stage_stats_state(zp_stats_t *s, int state);
/* Emits a "stats" event, and the timer samples gathered since the last one
 * as "timer" events, when the interval has passed. Cheap otherwise.
 * zp_stage_close() emits a last one of each. */
void zp_stage_stats_tick(zp_stage_t *st);

/* A stage process's start (stage_start.c), for `zeus-pipe stage NAME` and
 * the Python loaders: reads argv (--run DIR, --instance I, --mode M, --ckpts
 * A,B; a remote loader's --connect HOST:PORT --server-key F --key F), sets
 * the handlers (SIGINT/SIGTERM: zp_stop; ZP_SIG_RETIRE: zp_retire; SIGUSR1:
 * zp_save), reads the
 * run's config.yaml and dataset description, the Slurm environment, and
 * opens the stage (zp_stage_open). Returns 0, or the exit status to return
 * (the error logged): 2 for what a restart cannot mend. */
int zp_stage_start(zp_stage_t *st, const char *name, int argc, char **argv);

/* Rank 0's run directory: run0 under Slurm, else run_dir. Where the run's
 * checkpoints are (rank 0 writes them; every rank resumes from them). */
const char *zp_stage_run0(const zp_stage_t *st);

/* Opens the ZeroMQ context and the event socket. */
int zp_stage_open(zp_stage_t *st);
void zp_stage_close(zp_stage_t *st);
/* Endpoint of a named socket of this run, or ZP_EINVAL with an error logged. */
int zp_stage_endpoint(const zp_stage_t *st, const char *name, char *buf, size_t len);

/* A stage's inbox for route table `routes` (a static array, ZP_STAGE_INBOX
 * counts it) of messages from `from` ("a loader"), starting at frame `first`
 * (1 after a ROUTER's identity): what it drops is counted in *dropped and in
 * the stage's stats.errors. */
zp_inbox_t zp_stage_inbox(zp_stage_t *st, const zp_route_t *routes, int nroutes, int first,
                          const char *from, int64_t *dropped);
#define ZP_STAGE_INBOX(st, routes, first, from, dropped)                                           \
    zp_stage_inbox((st), (routes), ZP_COUNT(routes), (first), (from), (dropped))
/* Opens the run's socket `name` (pipeline/base/names.h), bound or connected, with
 * LINGER linger_ms: ipc under sock/. Under Slurm the sockets every rank
 * shares (a slurm_port in names.h: events, comm) are bound on rank 0 to ipc (plain, for its own
 * stages) and to tcp with CURVE (for the other ranks', which connect there;
 * pipeline/base/slurm.h). The socket in *out; 0, or ZP_EZMQ with *out NULL and
 * the endpoint and the error logged. */
int zp_stage_socket(zp_stage_t *st, void **out, int type, const char *name, int bind, int linger_ms);
/* Binds or connects an open socket (its options set) the same way: 0 or an error, logged. */
int zp_stage_attach(zp_stage_t *st, void *sock, const char *name, int bind);
/* Fills the Slurm fields from the environment (a stage of `srun zeus-pipe
 * up`): 0, or ZP_EINVAL with the error logged. */
int zp_stage_slurm(zp_stage_t *st);

/* Data-parallel ranks of the run (trainer.gpus when training, or the Slurm
 * tasks; eval and overfit run one), and this prefetch's or trainer's rank:
 * its instance. */
int zp_stage_world(const zp_stage_t *st);

#endif

/* slurm.h — a run started as `srun zeus-pipe up CONFIG`: every Slurm task is
 * one data-parallel rank, and every node has its own data plane.
 *
 * Rank 0 runs in the run directory (run.dir/run.name) and hosts what the
 * ranks share, on tcp with CURVE (transport.bind's port P: other hosts'
 * loaders P, the logger's counters P+1, events P+2, the ranks' sum P+3). Every other
 * rank runs in RUN/rank-<r>/. The first task of each node (SLURM_LOCALID 0,
 * "the node's leader"; rank 0 is its node's) also runs that node's data
 * plane: the cache stage, with cache.path on the node's own disk, and the
 * loaders. Every rank's prefetch fetches from its node's cache stage over
 * ipc and reads that node's LMDB itself, so no sample crosses the network;
 * only events, sums and control do.
 *
 * Two rendezvous: run.dir/.slurm-<job>.<step>, which rank 0 writes once its
 * keys exist (the run directory, rank 0's host and port), and per node
 * RUN/node-<node>, which the node's leader writes once its cache is ready
 * (its rank, run directory, cache.path and pid). So run.dir must be on a
 * filesystem every node sees (as a job's submit directory usually is). */
#ifndef ZP_SLURM_H
#define ZP_SLURM_H

#include <limits.h>
#include <stddef.h>

typedef struct {
    int rank, world, local; /* SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID */
    /* where rank 0 runs: on rank 0 SLURMD_NODENAME, else the first node of
     * the step (SLURM_STEP_NODELIST or SLURM_NODELIST); the other ranks take
     * rank 0's word for it from the rendezvous */
    char host[256];
    char job[80]; /* "<SLURM_JOB_ID>.<SLURM_STEP_ID>[.r<SLURM_RESTART_COUNT>]": names the rendezvous */
    char node[256];         /* this task's node: SLURMD_NODENAME, else the host name */
} zp_slurm_t;

/* Fills s from the environment. Returns 1 under Slurm with more than one task
 * (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID and SLURM_NODELIST set), 0 when
 * not, or ZP_EINVAL with the variable and value named in why. */
int zp_slurm_detect(zp_slurm_t *s, char *why, size_t len);

/* The first host of a Slurm host list: "gpu[07-09,12],cpu1" gives "gpu07",
 * "r[1-2]-n[01-04]" gives "r1-n01". ZP_EINVAL when it does not parse or fit. */
int zp_slurm_hostlist_first(const char *list, char *out, size_t len);

/* The rendezvous file of the job step: "<run.dir>/.slurm-<job>". */
void zp_slurm_meet_path(char *buf, size_t len, const char *run_dir, const zp_slurm_t *s);

/* The supervisor of a rank tells its stages that they are one, and where
 * rank 0 runs, in this environment variable; stages without it are no rank
 * of a Slurm run, whatever SLURM_* says (`zeus-pipe eval` inside a job). */
#define ZP_SLURM_ENV "ZP_SLURM_RANK0"

/* ... and in this one the run directory of their node's leader, where the
 * node's cache stage has its sockets (RUN/rank-<l>/sock/work.ipc, fetch.ipc). */
#define ZP_PLANE_ENV "ZP_NODE_PLANE"

/* The nodes of the job step (SLURM_STEP_NUM_NODES, else SLURM_JOB_NUM_NODES,
 * else SLURM_NNODES); 1 when none says. */
int zp_slurm_nodes(void);

/* 0 when `path` (or the nearest folder above it that exists) lies on a
 * filesystem of this host's own; ZP_EINVAL with its kind named in `fs` when
 * it is a network one (NFS, Lustre, GPFS, CIFS/SMB, BeeGFS, CephFS, AFS),
 * where nodes would share one LMDB, which LMDB does not support. */
int zp_slurm_local_fs(const char *path, char *fs, size_t len);

/* Under Slurm across more than one node: 0 when cache.path `path` is on a
 * local disk, else ZP_EINVAL with a sentence saying why not and what to do
 * in why. 0 on one node. */
int zp_slurm_cache_local(const char *path, char *why, size_t len);

/* The node rendezvous of `node` in rank 0's run directory: "<run0>/node-<node>"
 * ('/' in the name becomes '_'). */
void zp_slurm_node_path(char *buf, size_t len, const char *run0, const char *node);

#endif

/* slurm.h — a run started as `srun zeus-pipe up CONFIG`: every Slurm task is
 * one data-parallel rank.
 *
 * Rank 0 runs the whole pipeline in the run directory (run.dir/run.name); it
 * hosts the cache broker, the logger and the ranks' sum on tcp with CURVE
 * (transport.bind's port P: loaders P, fetches P+1, events P+2, the ranks'
 * sum P+3). Every other rank runs its loaders, its prefetch and its trainer
 * in RUN/rank-<r>/ and connects to rank 0. The ranks meet through the file
 * run.dir/.slurm-<job>.<step>, which rank 0 writes once its keys exist: the
 * run directory, rank 0's host and port. So run.dir must be on a filesystem
 * every node sees (as a job's submit directory usually is). */
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
    char job[64];           /* "<SLURM_JOB_ID>.<SLURM_STEP_ID>": names the rendezvous */
} zp_slurm_t;

/* Fills s from the environment. Returns 1 under Slurm with more than one task
 * (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID and SLURM_NODELIST set), 0 when
 * not, or ZP_EINVAL with the variable and value named in why. */
int zp_slurm_detect(zp_slurm_t *s, char *why, size_t len);

/* The first host of a Slurm host list: "gpu[07-09,12],cpu1" gives "gpu07",
 * "r[1-2]-n[01-04]" gives "r1-n01". ZP_EINVAL when it does not parse or fit. */
int zp_hostlist_first(const char *list, char *out, size_t len);

/* The rendezvous file of the job step: "<run.dir>/.slurm-<job>". */
void zp_slurm_meet_path(char *buf, size_t len, const char *run_dir, const zp_slurm_t *s);

/* The supervisor of a rank tells its stages that they are one, and where
 * rank 0 runs, in this environment variable; stages without it are no rank
 * of a Slurm run, whatever SLURM_* says (`zeus-pipe eval` inside a job). */
#define ZP_SLURM_ENV "ZP_SLURM_RANK0"

#endif

/* rundir.h — the run directory: runs/<name>/ with config.yaml, sock/ (0700),
 * logs/, metrics.jsonl, stats.jsonl, report.txt, supervisor.pid. */
#ifndef ZP_RUNDIR_H
#define ZP_RUNDIR_H

#include "pipeline/config.h"

#include <stddef.h>
#include <sys/types.h>

/* Creates `<dir>/<name>` (or `<name>-2`, `-3`... when taken) with sock/ and
 * logs/, and writes the absolute path into out. */
int zp_rundir_create(const char *dir, const char *name, char *out, size_t len);

/* Cleans up after dead runs under cfg->run_dir, creates `<run_dir>/<name>`,
 * writes the resolved config.yaml and this process's supervisor.pid. Prints
 * what went wrong and returns non-zero on failure. */
int zp_rundir_start(const zp_config_t *cfg, const char *name, char *out, size_t len);
/* The same without the clean-up, in `dir` (a Slurm rank's RUN/rank-<r>). */
int zp_rundir_make(const zp_config_t *cfg, const char *dir, const char *name, char *out, size_t len);

/* The pid in <run>/supervisor.pid when that process is alive, else 0. */
pid_t zp_rundir_live_pid(const char *run);

#endif

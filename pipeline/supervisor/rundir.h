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

/* Resolves RUN (a run directory or a name under runs/) into an absolute run
 * directory; with RUN NULL picks the only running run under `runs/`. Prints
 * what went wrong and returns 2 on failure. */
int zp_find_run(const char *run, char *dir, size_t len);

/* Removes the shared memory, socket files and nested rank folders' leftovers
 * that the run recorded in RUN/resources (pipeline/records.h), and its pid
 * file; nothing for a run whose supervisor is on another host. */
void zp_rundir_cleanup(const char *run_dir);
/* Does that for every run under `dir` whose supervisor died without it. */
void zp_rundir_cleanup_stale(const char *dir);

/* 1 when RUN/resources says that the run belongs to another host (its
 * resources are out of reach from here), else 0. */
int zp_records_foreign(const char *run_dir);
/* Removes what RUN/resources lists and belongs to the run (nested runs
 * included, when their supervisor is dead), then the record itself. Lines
 * that name something else are left alone, counted and reported. Does
 * nothing for a run of another host. */
void zp_records_cleanup(const char *run_dir);
/* 1 when loader `instance`, process `pid`, had delivered samples before it
 * ended; removes the mark. */
int zp_records_delivered(const char *run_dir, int instance, pid_t pid);

#endif

/* cmd.h — the subcommands. Each takes argv after the command name (argv[0] is
 * the command) and returns the exit status: 0 ok, 1 runtime failure, 2 usage
 * or config error, 128+N when stopped by signal N. */
#ifndef ZP_CMD_H
#define ZP_CMD_H

#include "pipeline/config.h"
#include "pipeline/dataset.h"
#include "pipeline/sock.h"

#include <stddef.h>

int cmd_up(int argc, char **argv);
int cmd_stage(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_stat(int argc, char **argv);
int cmd_down(int argc, char **argv);
int cmd_warm(int argc, char **argv);
int cmd_cache(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_overfit(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_scale(int argc, char **argv);
int cmd_keygen(int argc, char **argv);
int cmd_loader(int argc, char **argv);

/* Runs every stage of the run in run_dir (created, config.yaml written) in
 * mode ZP_MODE_* (ckpts: for eval) until training ends, supervising them as
 * `up` does; returns the exit status. */
int zp_pipeline_run(const zp_config_t *cfg, const char *run_dir, int mode, const char *ckpts);

/* One request/reply on a run's socket (RUN/sock/NAME.ipc) with a timeout.
 * Returns 0 and the reply in f, or a ZP_E* code. */
int zp_request(const char *run_dir, const char *sock_name, const zp_msg_t *req, zp_frames_t *f,
               int timeout_ms);

/* True when argv holds -h or --help. */
int zp_wants_help(int argc, char **argv);

/* Parses `CONFIG [KEY=VALUE ...]` (plus the override `force`, when not NULL),
 * loads and validates the config and probes the dataset. Returns 0; -1 for a
 * usage error (the caller prints its usage); 2 after printing a config or
 * dataset error. */
int zp_cli_load(int argc, char **argv, const char *force, zp_config_t *cfg,
                zp_dataset_meta_t *meta);

/* Creates the LMDB cache or checks its fingerprints (cache.on_mismatch);
 * prints the error and returns non-zero when the run must not start. */
int zp_cache_prepare(const zp_config_t *cfg, const zp_dataset_meta_t *meta);

#endif

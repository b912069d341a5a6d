/* cmd.h — the subcommands. Each takes argv after the command name (argv[0] is
 * the command) and returns the exit status: 0 ok, 1 runtime failure, 2 usage
 * or config error, 3 (a run) stopped by `zeus-pipe down`, 128+N when stopped
 * by signal N. */
#ifndef ZP_CMD_H
#define ZP_CMD_H

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
int cmd_dataset(int argc, char **argv);

/* True when argv holds -h or --help. */
int zp_cmd_wants_help(int argc, char **argv);

#endif

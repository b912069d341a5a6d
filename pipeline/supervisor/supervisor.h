/* supervisor.h — the supervisor: the process that starts every stage of a
 * run, watches, restarts and stops them, and answers control requests. The
 * CLI (pipeline/cli/) parses arguments and prints; everything a command sets
 * going happens here.
 *
 * What a caller gets:
 *   - zp_sup_load: a config read and validated and its dataset probed, once,
 *     before anything starts (the stages read what was probed from the run
 *     directory, RUN/dataset/, and never probe again);
 *   - zp_up / zp_up_resume / zp_pipeline_run: a run, supervised to its end;
 *   - zp_remote_run: loaders on this host for a run on another one;
 *   - zp_warm_*, zp_sweep_*, zp_eval*, zp_eval_overfit: the engines of `warm`,
 *     `sweep`, `eval` and `overfit` (the commands parse and print);
 *   - the pieces they are made of: stage processes (zp_procs_*) and run
 *     directories (zp_rundir_*, zp_rundir_find, the RUN/resources sweep).
 *
 * What it guarantees:
 *   - every stage is `zeus-pipe stage NAME` exec'd (never a bare fork after
 *     a library opened anything), dies with its supervisor (PR_SET_PDEATHSIG)
 *     and runs under ZP_STAGE_WRAPPER when that is set;
 *   - stopping is TERM, then KILL after a grace period; signal handlers only
 *     set a flag, the loop acts on it; every child is reaped;
 *   - nothing the run created (shared memory, socket files, nested rank
 *     folders, recorded in RUN/resources) outlives it, and a run whose
 *     supervisor died is swept by the next one under the same run.dir;
 *   - loaders are restarted (a loader killed at work at once, one that dies
 *     before delivering after a back-off, at most loader.max_restarts_per_min
 *     a minute); any other stage's failure stops the run.
 *
 * Exit statuses (what zp_up, zp_up_resume, zp_pipeline_run and
 * zp_remote_run return): 0 done; 1 a stage failed or the run could not
 * start; 2 a usage, config or dataset error (printed, nothing started);
 * ZP_EXIT_DOWN (3) stopped by `zeus-pipe down`; ZP_EXIT_SAVED (4) stopped by
 * SIGUSR1 after the trainer saved; 128+N stopped by signal N.
 * Errors are printed on stderr as "zeus-pipe: ..." with what to do. */
#ifndef ZP_SUPERVISOR_H
#define ZP_SUPERVISOR_H

#include "pipeline/base/names.h"
#include "pipeline/config/config.h"
#include "pipeline/dataset/dataset.h"
#include "pipeline/report/report.h"
#include "pipeline/base/slurm.h"
#include "pipeline/stage/ckpt.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The exit status of a run stopped by `zeus-pipe down`: neither done (0),
 * so that `up ... && next` stops there, nor failed (1). */
#define ZP_EXIT_DOWN 3
/* ... by SIGUSR1 (`kill -USR1`, Slurm's --signal warning of a time limit or a
 * preemption): the trainer finished its step and saved, the run goes on with
 * `up --resume` (or, with slurm.requeue, in the job Slurm requeues). */
#define ZP_EXIT_SAVED 4

/* ---- Config and dataset --------------------------------------------------------------------- */

/* Loads `CONFIG [KEY=VALUE ...]` (args[1..nargs-1]; args[0] is the command,
 * skipped), with the override `force` last when not NULL, validates it and
 * probes its dataset. Returns 0 with *ds set (the caller destroys it); -1 for
 * a usage error (nothing printed: the caller prints its usage); 2 after
 * printing a config or dataset error (*ds NULL). */
int zp_sup_load(int nargs, char **args, const char *force, zp_config_t *cfg, zp_dataset_t **ds);

/* Creates the LMDB cache or checks its fingerprints (cache.on_mismatch),
 * before any stage starts. 0, or non-zero after printing why the run must
 * not start. */
int zp_sup_prepare_cache(const zp_config_t *cfg, const zp_dataset_meta_t *meta);
/* Says where the cache is (and which default chose the folder), then
 * zp_sup_cache_size. Nothing with the cache off. 1 when the size was said. */
int zp_sup_say_cache(const zp_config_t *cfg, const zp_dataset_meta_t *meta);
/* Whole images kept raw (cache.encoding raw, a random resized crop) take
 * their decoded size: when the cache's bytes a sample, measured on what it
 * holds, make over 4x the image files once every sample is cached, says so
 * and names cache.encoding: jpeg. 1 when said; 0 when not over, or nothing
 * is cached yet to measure. */
int zp_sup_cache_size(const zp_config_t *cfg, const zp_dataset_meta_t *meta);

/* ---- Runs ----------------------------------------------------------------------------------- */

/* `zeus-pipe up`: cfg and its probed ds (zp_sup_load; borrowed) become a new
 * run under run.dir — or, under Slurm (`srun zeus-pipe up`), this task's
 * rank of one — supervised until it ends. The exit status. */
int zp_up(const zp_config_t *cfg, const zp_dataset_t *ds);
/* `zeus-pipe up --attach`: as zp_up, but every stage except the trainers,
 * whose trainer.gpus ranks are programs that attach (zp_client_attach,
 * zeus_pipe.h) to the run directory, which is printed on stdout as one line
 * "ZP_RUN=<dir>" before any stage starts. The run ends with status 0 once
 * every prefetch has sent END and exited and every rank has detached
 * (RUN/logs/trainer-R.attached is released: pipeline/base/resources.h), and
 * stops every stage (status 1) when the process that started the supervisor
 * exits, however it exits (polled: its parent changes). SIGPIPE is ignored:
 * a reader of its output that died is no reason to stop uncleanly.
 * trainer.command is left out (noted); 2 under Slurm, before anything starts. */
int zp_up_attach(const zp_config_t *cfg, const zp_dataset_t *ds);
/* `zeus-pipe up --resume RUN`: RUN (a directory or a name, zp_rundir_find) goes
 * on from its checkpoints/last.ckpt with its own config. The exit status; 2
 * when RUN is running, has no readable checkpoint, or under Slurm. */
int zp_up_resume(const char *run, char *const *overrides, int n);

/* Catches SIGUSR1 (save and stop) from here on: `up` calls it first, so that
 * Slurm's warning during the config's load or the dataset's probe is kept
 * for the run (which then stops before its first step) instead of ending
 * the process. */
void zp_sup_catch_save(void);
/* Runs every stage of the run in run_dir (created by zp_rundir_start,
 * config.yaml written) in mode ZP_MODE_* (ckpts: the checkpoints an eval
 * evaluates, else NULL) until training ends, supervising them as `up` does.
 * Writes ds's description into run_dir first. The exit status. */
int zp_pipeline_run(const zp_config_t *cfg, const zp_dataset_t *ds, const char *run_dir, int mode,
                    const char *ckpts);

/* `zeus-pipe loader --connect`: loaders on this host for the run whose cache
 * stage listens on tcp `connect` (HOST:PORT), with CURVE: server_key is the
 * run's server.pub, key this host's pair (NAME.key). */
typedef struct {
    const char *connect, *server_key, *key;
    int workers; /* 1..256 */
} zp_remote_t;

/* Starts r->workers loaders as stages (`zeus-pipe stage loader --connect`,
 * their output on this process's stderr) from a private directory under
 * $TMPDIR (the config and the dataset description; removed at the end),
 * restarts one that dies (the back-off of zp_procs_restart_backoff) and stops
 * them on SIGINT/SIGTERM. The exit status: 128+N on signal N; 2 when a
 * loader was refused for its config (another dataset or transform: not
 * restarted); 1 when none could start; else 0 once every loader has
 * retired. */
int zp_remote_run(const zp_config_t *cfg, const zp_dataset_t *ds, const zp_remote_t *r);

/* ---- Warming the cache --------------------------------------------------------------------- */

/* `zeus-pipe warm`: the cache stage and the loaders only, in a run
 * directory <run.name>-warm, asked (as a prefetcher would ask) for every
 * sample the cache lacks; the cache stage writes them. What an earlier warm
 * committed, even a killed one, is skipped. */
typedef struct zp_warm zp_warm_t;

/* What a warm has planned and done, for its caller to print. */
typedef struct {
    const char *cache_path;         /* cache.path */
    const char *run_dir;            /* the warm's run directory ("" before it starts) */
    char db[ZP_SPLITS][96];         /* each split's database name */
    int64_t n[ZP_SPLITS];           /* samples of the split */
    int64_t cached[ZP_SPLITS];      /* of them, in the cache before the warm */
    int64_t todo[ZP_SPLITS];        /* of them, to load */
    int64_t total, done;            /* samples to load; loaded so far */
    int64_t start_ns;               /* zp_now_ns() when loading began */
    int64_t have, want;             /* once done: the cache's entries; the dataset's samples */
} zp_warm_progress_t;

/* Loads `CONFIG [KEY=VALUE ...]` as zp_sup_load does (cache.enabled forced
 * on), prepares the cache (zp_sup_prepare_cache) and plans what it lacks.
 * Returns 0 with *w (zp_warm_destroy frees it); -1 for a usage error
 * (nothing printed); 1 or 2 after printing why (*w NULL). */
int zp_warm_create(zp_warm_t **w, int nargs, char **args);
/* What w planned and has done; owned by w, valid until zp_warm_destroy. */
const zp_warm_progress_t *zp_warm_progress(const zp_warm_t *w);

/* Called about every 100 ms while loading (final 0), and once at the end
 * (final 1). */
typedef void zp_warm_progress_fn(const zp_warm_progress_t *p, int final, void *arg);

/* Starts the stages, keeps WINDOW fetches of missing samples in flight until
 * every one is loaded, stops the stages (the cache stage commits on TERM),
 * removes what the run left, then counts the cache's entries (have, want).
 * SIGINT and SIGTERM stop it. The exit status: 0 when every fetch was
 * answered (the caller compares have with want); 1 when a stage or loader
 * failed or the cache could not be read (printed); 128+N on signal N. */
int zp_warm_run(zp_warm_t *w, zp_warm_progress_fn *progress, void *arg);
/* Frees w (NULL does nothing) and sets *w to NULL. */
void zp_warm_destroy(zp_warm_t **w);

/* ---- Sweeps -------------------------------------------------------------------------------- */

/* `zeus-pipe sweep`: one run per point of a grid of config values, one
 * after another, each named after its swept values; every point is
 * validated before the first run starts. */
#define ZP_SWEEP_AXES_MAX 8
#define ZP_SWEEP_VALUES_MAX 32 /* values of an axis; more are left out */
#define ZP_SWEEP_FIXED_MAX 200
#define ZP_SWEEP_POINTS_MAX 10000

/* One swept key and its values. */
typedef struct {
    char key[128];
    char *value[ZP_SWEEP_VALUES_MAX]; /* into buf */
    int n;
    char buf[1024];
} zp_sweep_axis_t;

/* One point of the grid and how its run went. */
typedef struct {
    char name[64];        /* run.name: "<base>-lr=0.1-batch_size=128" */
    char values[256];     /* "lr=0.1 batch_size=128" */
    char dir[PATH_MAX];   /* its run directory, once it ran */
    int status;           /* its exit status */
    zp_run_summary_t sum; /* its final metrics, when status is 0 */
} zp_sweep_point_t;

typedef struct {
    const char *config;                   /* CONFIG; borrowed */
    char *fixed[ZP_SWEEP_FIXED_MAX];      /* KEY=VALUE for every run; borrowed */
    int nfixed;
    zp_sweep_axis_t axis[ZP_SWEEP_AXES_MAX];
    int naxes;
    zp_sweep_point_t *point;              /* npoints of them, once planned; owned */
    int npoints, done;                    /* points; points run so far */
    char run_dir[256], run_name[64];      /* the base config's run.dir and run.name */
} zp_sweep_t;

/* An empty sweep into *out: 0, or ZP_ENOMEM (*out NULL). */
int zp_sweep_create(zp_sweep_t **out);
/* Frees s and its points (NULL does nothing); sets *s to NULL. */
void zp_sweep_destroy(zp_sweep_t **s);

/* Splits KEY=A,B,... (arg holds a '=') into a at the commas outside
 * brackets ("[1,2]" is one value); returns the number of values. */
int zp_sweep_axis(zp_sweep_axis_t *a, const char *arg);
/* The value of each axis at point k (0..npoints-1), the last axis fastest. */
void zp_sweep_pick(const zp_sweep_t *s, int k, int pick[ZP_SWEEP_AXES_MAX]);
/* The point's name, "<base>-<leaf>=<value>-..." (a key's last component, or
 * its parent's for a `.name`: schedule.name=cosine is "schedule=cosine";
 * characters outside [A-Za-z0-9._=-] as '_'), and its values. 0, or 2 after
 * printing that the name is longer than 63 bytes. */
int zp_sweep_point_name(const char *base, const zp_sweep_axis_t *ax, int nax, const int *pick,
                        zp_sweep_point_t *pt);

/* Counts the points (2 past ZP_SWEEP_POINTS_MAX), loads the base config and
 * every point's (config and dataset, as zp_sup_load) and names them. 0, or
 * the exit status after printing why not. */
int zp_sweep_plan(zp_sweep_t *s);
/* Called before each point runs. */
typedef void zp_sweep_start_fn(const zp_sweep_t *s, int k, void *arg);
/* Runs the planned points in order, as `up` runs one, and reads each one's
 * summary; stops after a point stopped by a signal or that could not start
 * (exit 2). s->done counts the points run. The exit status: that point's,
 * else 1 when a point failed, else 0. */
int zp_sweep_run(zp_sweep_t *s, zp_sweep_start_fn *starting, void *arg);
/* Orders points best first: finished before failed, then by test accuracy
 * (higher first), then by test loss (lower first). */
void zp_sweep_rank(zp_sweep_point_t *pt, int n);

/* ---- Evaluating and overfitting ------------------------------------------------------------ */

#define ZP_EVAL_CKPTS_MAX 1024 /* checkpoints of a run looked at */

/* Sorts checkpoint names: last, best, then epoch-N by N, then any other by name. */
void zp_eval_sort(char names[][64], int n);
/* The checkpoint names in run_dir/checkpoints (file names less ".ckpt",
 * shorter than 64 bytes), sorted; their count (at most max; 0 when the
 * folder cannot be read). */
int zp_eval_list(const char *run_dir, char names[][64], int max);
/* `which` among names into out, a comma-separated list: NULL is best when
 * names has it, else last; N is epoch-N; all is every one; another word that
 * checkpoint. The name looked for in want ("all" for all). Returns how many
 * were chosen; 0 when none is there (out ""). Names that would not fit in
 * out are left out. */
int zp_eval_pick(char names[][64], int n, const char *which, char *want, size_t wlen, char *out,
                 size_t len);
/* zp_eval_pick over run_dir's checkpoints, each chosen one read back whole
 * (checksum) so that a damaged file is refused before anything starts. 0, or
 * 2 after printing which checkpoints the run has, or why one cannot be read. */
int zp_eval_choose(const char *run_dir, const char *which, char *out, size_t len);
/* `zeus-pipe eval`: the test split of run_dir's dataset (its config.yaml)
 * through the pipeline in mode ZP_MODE_EVAL and the checkpoints `ckpts`
 * (zp_eval_choose), in run_dir/eval (eval-2, ... when taken); the trainer
 * writes run_dir/eval-<checkpoint>.json and .txt. The exit status; 2 after
 * printing when the config or dataset cannot be read or has no test split. */
int zp_eval(const char *run_dir, const char *ckpts);

/* What an overfit run did: steps trained, the loss of the batch first and last. */
typedef struct {
    long long steps;
    double first, last;
} zp_overfit_t;

/* `zeus-pipe overfit`: cfg (zp_sup_load's, with its probed ds; borrowed)
 * changed to one epoch of `steps` steps on one batch, no checkpoint, a log
 * line every steps/10, run in <run.dir>/<run.name>-overfit in mode
 * ZP_MODE_OVERFIT; *out from the run's overfit.txt. The exit status: 0 with
 * *out set; 1 after printing when overfit.txt is missing or unreadable. */
int zp_eval_overfit(zp_config_t *cfg, const zp_dataset_t *ds, long steps, zp_overfit_t *out);

/* ---- A user's program as the trainer (trainer.command) ------------------------------------- */

/* With trainer.command set, `up` (train and resume modes) starts that program
 * as each rank's trainer instead of `zeus-pipe stage trainer`: in the config
 * file's folder, as a stage is started (its own process group, TERM then
 * KILL, PR_SET_PDEATHSIG), with in its environment ZP_RUN (this host's run
 * directory), ZP_RANK, ZP_WORLD, ZP_LIBRARY (the libzeuspipe.so beside the
 * zeus-pipe binary) and, as torchrun sets them, RANK,
 * WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR (127.0.0.1, or rank
 * 0's host under Slurm) and MASTER_PORT (transport.bind's port + 4 under
 * Slurm or with transport tcp, else a port free when the run starts). Its
 * stdout and stderr go through a pipe that the supervisor relays into
 * logs/trainer-R.log and, line by line as "trainer[R]: ...", onto its own
 * stderr. Its exit status counts as the built-in trainer's. */
#define ZP_COMMAND_RANKS 64 /* trainer.gpus at most */
#define ZP_COMMAND_ENV 12   /* variables set for the program */

typedef struct {
    char prog[PATH_MAX];                    /* the program, absolute (PATH searched) */
    char cwd[PATH_MAX];                     /* the config file's folder */
    char *args[ZP_STRS_MAX + 1];            /* trainer.command, NULL-terminated; into the config */
    char **env[ZP_COMMAND_RANKS];           /* each local rank's environment; owned */
    char envbuf[ZP_COMMAND_RANKS][ZP_COMMAND_ENV][PATH_MAX + 32];
    int nenvbuf[ZP_COMMAND_RANKS];
    int first, ranks, port;                 /* the ranks here: first .. first+ranks-1 */
    /* the relay; fd and log under lock */
    pthread_mutex_t lock;
    pthread_t thread;
    int started;
    atomic_int stop;
    int fd[ZP_COMMAND_RANKS], log[ZP_COMMAND_RANKS]; /* each rank's pipe and log; -1: none */
    char line[ZP_COMMAND_RANKS][1024];      /* each rank's output line so far */
    size_t nline[ZP_COMMAND_RANKS];
} zp_command_t;

/* Resolves trainer.command's program into prog (absolute): a name with a '/'
 * from the config file's folder (cwd gets that folder), a bare name on PATH.
 * 0, or 2 after printing, naming the key, the path and what to do, when it
 * does not exist, is not a regular file or is not executable. */
int zp_command_check(const zp_config_t *cfg, char *prog, size_t len, char *cwd, size_t cwdlen);
/* Makes *c for the supervisor s (its config, run directory and Slurm rank
 * set): the program checked, its arguments, each local rank's environment.
 * 0; on failure *c stays NULL and the exit status is returned after printing
 * why (2: the program, 1: out of memory or no free port). */
struct zp_sup;
int zp_command_create(zp_command_t **c, const struct zp_sup *s);
/* The environment of `rank`'s program (owned by c), NULL for a rank not here. */
char *const *zp_command_env(const zp_command_t *c, int rank);
/* Hands rank's pipe (its read end) and log to the relay thread, which owns
 * them from now on (and starts with the first). 0, or ZP_EINVAL (a rank not
 * here: both closed) or ZP_ENOMEM (no thread: the output waits in the pipe). */
int zp_command_relay(zp_command_t *c, int rank, int fd, int log);
/* Waits up to ms for rank's pipe to be at its end (its log complete). */
void zp_command_drain(zp_command_t *c, int rank, int ms);
/* Waits up to 500 ms for each rank's output to end, stops the relay, closes
 * and frees everything; NULL does nothing; sets *c to NULL. */
void zp_command_destroy(zp_command_t **c);

/* ---- Stage processes ------------------------------------------------------------------------ */

/* Each stage runs as `zeus-pipe stage NAME --run DIR --instance I`, with
 * PR_SET_PDEATHSIG so that it dies with its supervisor, and its
 * stdout/stderr in DIR/logs/NAME-I.log (the logger keeps the supervisor's
 * stdout, for the progress line; with `inherit`, every stage keeps the
 * supervisor's stdout and stderr). ZP_STAGE_WRAPPER (e.g. "valgrind
 * --leak-check=full", split at spaces, found on PATH) runs every stage under
 * that command. */
#define ZP_CHILDREN_MAX 300

typedef struct {
    int stage; /* ZP_STAGE_* (pipeline/base/names.h) */
    int instance;
    pid_t pid; /* 0 once reaped */
    int status;
    int group;    /* it leads its own process group (a trainer.command): signals go to the group */
    int exited;   /* a loader that exited, until the supervisor handles it */
    int retiring; /* a loader sent ZP_SIG_RETIRE: its exit 0 is expected */
    int deaths;   /* recent deaths (back-off) */
    int delivered; /* a loader that had returned samples before it exited */
    int64_t last_death, restart_at; /* ns; restart_at 0: none pending */
} zp_child_t;

/* A restart's back-off after a death at `now`: 50 ms, doubling with each
 * death within a minute of the previous one, to 1.6 s. Updates the count and
 * time of the deaths; returns the delay in ns. */
int64_t zp_procs_restart_backoff(int *deaths, int64_t *last_death, int64_t now);

typedef struct {
    char run_dir[PATH_MAX];
    char exe[PATH_MAX];
    zp_child_t child[ZP_CHILDREN_MAX];
    int nchild;
    int mode;          /* ZP_MODE_* of pipeline/stage/stage.h, passed to every stage */
    int keep_loaders;  /* a loader that exits is flagged `exited`, not failed */
    int inherit;       /* stages write to the supervisor's stdout/stderr, not to logs/ */
    char ckpts[1024];  /* eval: the checkpoints to evaluate */
    char *extra[8];    /* more arguments for every stage, NULL-terminated; borrowed */
    zp_command_t *command; /* trainer.command: started instead of the trainer; borrowed */
    /* dataset.source python: loaders are `INTERPRETER -m zeus_pipe._loader_process`
     * (dataset.python.interpreter, borrowed from the config); NULL: `zeus-pipe
     * stage loader` */
    const char *python;
} zp_procs_t;

/* Empties s for the run in run_dir of config cfg (which must outlive s);
 * never fails. */
void zp_procs_init(zp_procs_t *s, const char *run_dir, const zp_config_t *cfg);
/* Starts `zeus-pipe stage STAGE --instance I`; a stage/instance that ran
 * before and exited gets its entry again. 0; ZP_EFULL when ZP_CHILDREN_MAX
 * children are known; a negative errno when the log cannot be opened or
 * fork fails (nothing started). */
int zp_procs_spawn(zp_procs_t *s, int stage, int instance, int keep_stdout);
/* Reaps exited children; returns the first that exited when it should not
 * have (anything but the trainer, or prefetch, ending with status 0; with
 * keep_loaders, a loader only when it exited with status 2, a config error
 * that a restart cannot mend), and adds to *trainer_done each trainer that
 * finished. NULL when none did. */
zp_child_t *zp_procs_reap(zp_procs_t *s, int *trainer_done);
/* TERM the logger (logger = 1) or every other stage (0), wait up to ms, KILL
 * the rest; returns once every one of them is reaped. */
void zp_procs_stop(zp_procs_t *s, int logger, int ms);
/* 1 when the child was killed from outside (SIGKILL or SIGTERM: the OOM
 * killer, a preempted host, an operator), 0 when it ended itself (an exit
 * status, or a crash signal: SEGV, ABRT, BUS, ILL, FPE). */
int zp_procs_killed(const zp_child_t *c);
/* "exited with status N", "was killed by signal N (Name)" or "stopped". */
void zp_procs_describe(const zp_child_t *c, char *buf, size_t len);
/* Prints the last lines of the child's log on stderr. */
void zp_procs_log_tail(zp_procs_t *s, const zp_child_t *c);

/* ---- Run directories ------------------------------------------------------------------------ */

/* runs/<name>/ with config.yaml, sock/ (0700), logs/, dataset/ (what the
 * supervisor probed), metrics.jsonl, stats.jsonl, report.txt,
 * supervisor.pid, resources (pipeline/base/resources.h). */

/* Creates `<dir>/<name>` (or `<name>-2`, `-3`... when taken) with sock/ and
 * logs/, and writes the absolute path into out. 0, or a negative errno
 * (nothing printed). */
int zp_rundir_create(const char *dir, const char *name, char *out, size_t len);
/* Makes the run's sock/ (0700) and logs/ where they are missing: a run
 * directory copied or cleaned without them can still be resumed. 0, or a
 * negative errno (nothing printed). */
int zp_rundir_subdirs(const char *run_dir);
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
int zp_rundir_find(const char *run, char *dir, size_t len);
/* The same, but with RUN NULL and no run running, the latest run under runs/
 * (the newest folder with a config.yaml), said on stderr: for `report`. */
int zp_rundir_find_or_latest(const char *run, char *dir, size_t len);

/* Removes the shared memory, socket files and nested rank folders' leftovers
 * that the run recorded in RUN/resources (pipeline/base/resources.h), and its pid
 * file; nothing for a run whose supervisor is on another host. */
void zp_rundir_cleanup(const char *run_dir);
/* Does that for every run under `dir` whose supervisor died without it. */
void zp_rundir_cleanup_stale(const char *dir);

/* 1 when RUN/resources says that the run belongs to another host (its
 * resources are out of reach from here), else 0. */
int zp_rundir_foreign(const char *run_dir);
/* Removes what RUN/resources lists and belongs to the run (nested runs
 * included, when their supervisor is dead), then the record itself. Lines
 * that name something else are left alone, counted and reported. Does
 * nothing for a run of another host. */
void zp_rundir_remove_resources(const char *run_dir);
/* 1 when loader `instance`, process `pid`, had delivered samples before it
 * ended; removes the mark. */
int zp_rundir_delivered(const char *run_dir, int instance, pid_t pid);

/* ---- Between the supervisor's own files (run.c, prepare.c, meet.c) -------------------------- */

/* One supervisor's state: a run of this host, its children, the Slurm
 * rendezvous. Owned by zp_up / zp_up_resume / zp_pipeline_run; callers
 * outside pipeline/supervisor/ never see one. */
typedef struct zp_sup {
    zp_config_t cfg;
    const zp_dataset_t *ds; /* borrowed, or own (a resumed run's) */
    zp_dataset_t *own;
    char run_dir[PATH_MAX];
    zp_procs_t procs;
    void *zctx, *control;
    int64_t window_start; /* ns: the minute whose loader restarts are counted */
    int64_t restarts;     /* restarts in that minute */
    int64_t no_loader_since; /* ns: when the last loader was given up on; 0 while one is left */
    int loaders_wanted;   /* `scale` moves it */
    int trainers;         /* ranks here: the run is done when every trainer has finished */
    int cache_size_said;  /* zp_sup_cache_size has spoken: not again at the run's end */
    int attach;           /* `up --attach`: no trainer stage; the ranks are programs that attach */
    pid_t parent;         /* --attach: the process that started this one; the run stops without it */
    int loader_base;      /* the first loader instance number: 256 x the Slurm rank */
    zp_slurm_t slurm;     /* slurm.world > 1: this supervisor is one rank of `srun zeus-pipe up` */
    char meet[PATH_MAX + 64]; /* rank 0: the rendezvous file, removed at the end */
    char watch[PATH_MAX + 64]; /* rank r > 0: rank 0's rendezvous; gone when rank 0's run ended */
    int64_t watch_next, gone_since; /* ns */
    char run0[PATH_MAX];      /* Slurm: rank 0's run directory */
    char plane[PATH_MAX];     /* Slurm: the node's data plane, its leader's run directory */
    char node_meet[PATH_MAX + 300]; /* a node's leader: its node rendezvous, removed at the end */
    pid_t plane_pid;          /* a node's other tasks: the leader's supervisor */
    struct zp_autoscaler *autoscale; /* loader.autoscale on this node; NULL: off */
    int resuming;             /* `up --resume` (or a requeued job): at s->resume */
    zp_ckpt_pos_t resume;     /* where a resumed run goes on: its last checkpoint's position,
                               * for this run's ranks (zp_ckpt_regroup) */
    int resume_world;         /* the ranks that wrote it */
    int64_t resume_batch;     /* and their batch size */
    char *const *resume_overrides; /* `up --resume RUN trainer.gpus=N`: borrowed */
    int resume_noverrides;
} zp_sup_t;

/* run.c: `scale loader=N|+K|-K` (0, or the error for the requester in
 * err), and the loaders of this node running or about to restart. */
int zp_sup_scale(zp_sup_t *s, const char *arg, char *err, size_t len);
int zp_sup_loaders(const zp_sup_t *s);

/* autoscale_run.c: loader.autoscale (the policy: autoscale.h) on this node.
 * open: before the loaders start — resolves loader.max_workers (0: the free
 * cores), clamps loader.workers into min..max and prints both; off (0,
 * nothing done) without loader.autoscale or on a Slurm task that is not its
 * node's first (which runs the node's loaders); 1 when out
 * of memory. tick: on every turn of the loop; once an interval it reads the
 * logger's counters, decides, applies the decision as `scale` does and
 * records it (an "autoscale" metric). close: frees it; safe twice. */
int zp_sup_autoscale_open(zp_sup_t *s);
void zp_sup_autoscale_tick(zp_sup_t *s);
void zp_sup_autoscale_close(zp_sup_t *s);

/* prepare.c. Each returns 0, or an exit status after printing why. */
int zp_sup_shm_room(const zp_sup_t *s);             /* the rings fit in /dev/shm: else 2 */
int zp_sup_prepare_resume(zp_sup_t *s, const char *run); /* --resume RUN: its config, ckpt, cache */
/* RUN (a folder or a name in run.dir) into s->run_dir; with live_check, 2
 * (said) when its supervisor still runs. */
int zp_sup_find_stopped(zp_sup_t *s, const char *run, int live_check);
/* The run s->run_dir's own config (and its dataset, probed again: the files
 * may have moved since), and its last checkpoint's position, which must read
 * back with the same seed (path: the checkpoint's, for messages). */
int zp_sup_resume_config(zp_sup_t *s, zp_ckpt_pos_t *pos, char *path, size_t len);
/* A resumed run's folder `dir` (rank 0's, or RUN/rank-<r>) made ready
 * again: what its dead supervisor left removed, sock/, logs/, resources,
 * supervisor.pid, room in /dev/shm. */
int zp_sup_reopen(zp_sup_t *s, const char *dir);
void zp_sup_say_resuming(const zp_sup_t *s); /* "resuming RUN at epoch E, batch B (step S)" */
int zp_sup_run_key(const zp_sup_t *s, const char *name, int ranks); /* RUN/NAME.key, made once */
int zp_sup_server_keys(const zp_sup_t *s);           /* transport tcp: RUN/server.key */

/* meet.c: the Slurm rendezvous. */
int zp_sup_prepare_slurm(zp_sup_t *s); /* this task's part of the run: rank 0 creates, r > 0 joins */
int zp_sup_announce(zp_sup_t *s);      /* rank 0: the ranks' keys and the rendezvous file */
/* 1 with why when a node's data plane failed, or rank 0's run or this
 * node's leader is gone > 10 s */
int zp_sup_gone(zp_sup_t *s, char *why, size_t len);
/* A node's leader whose run failed: `why` into its node rendezvous
 * (rewritten whole and renamed), for rank 0 and the node's other tasks to
 * stop on; nothing before rank 0's run exists */
void zp_sup_node_down(zp_sup_t *s, const char *why);
/* Rank 0 of a run that ended well, its own stages stopped and its logger
 * not yet: waits until every other rank's supervisor has stopped its stages
 * and cleaned up (RUN/rank-<r>/supervisor.pid removed), at most `ms`, or a
 * signal (*stop set). Their stages' last records (the final stats) go to
 * this rank's logger, which would otherwise stop before they came. */
void zp_sup_wait_ranks(const zp_sup_t *s, int ms, volatile sig_atomic_t *stop);

#endif

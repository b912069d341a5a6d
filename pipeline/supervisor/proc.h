/* proc.h — the supervisor's children. Each stage runs as `zeus-pipe stage
 * NAME --run DIR --instance I`, with PR_SET_PDEATHSIG so that it dies with
 * its supervisor, and its stdout/stderr in DIR/logs/NAME-I.log (the logger
 * keeps the supervisor's stdout, for the progress line). The environment
 * variable ZP_STAGE_WRAPPER (e.g. "valgrind --leak-check=full") runs every
 * stage under that command. */
#ifndef ZP_PROC_H
#define ZP_PROC_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define ZP_CHILDREN_MAX 300

typedef struct {
    const char *stage; /* static string */
    int instance;
    pid_t pid; /* 0 once reaped */
    int status;
    int exited;   /* a loader that exited, until the supervisor handles it */
    int retiring; /* a loader sent SIGUSR1: its exit 0 is expected */
    int deaths;   /* recent deaths (back-off) */
    int delivered; /* a loader that had returned samples before it exited */
    int64_t last_death, restart_at; /* ns; restart_at 0: none pending */
} zp_child_t;

/* A restart's back-off after a death at `now`: 50 ms, doubling with each
 * death within a minute of the previous one, to 1.6 s. Updates the count and
 * time of the deaths; returns the delay in ns. */
int64_t zp_restart_backoff(int *deaths, int64_t *last_death, int64_t now);

typedef struct {
    char run_dir[PATH_MAX];
    char exe[PATH_MAX];
    zp_child_t child[ZP_CHILDREN_MAX];
    int nchild;
    int mode;          /* ZP_MODE_* of pipeline/stage.h, passed to every stage */
    int keep_loaders;  /* a loader that exits is flagged `exited`, not failed */
    char ckpts[1024];  /* eval: the checkpoints to evaluate */
} zp_procs_t;

void zp_procs_init(zp_procs_t *s, const char *run_dir);
/* Starts `zeus-pipe stage STAGE --instance I`; a stage/instance that ran
 * before and exited gets its entry again. */
int zp_procs_spawn(zp_procs_t *s, const char *stage, int instance, int keep_stdout);
/* Reaps exited children; returns the first that exited when it should not
 * have (anything but the trainer, or prefetch, ending with status 0; with
 * keep_loaders, a loader only when it exited with status 2, a config error
 * that a restart cannot mend), and adds to *trainer_done each trainer that
 * finished. */
zp_child_t *zp_procs_reap(zp_procs_t *s, int *trainer_done);
/* TERM the logger (logger = 1) or every other stage (0), wait up to ms, KILL the rest. */
void zp_procs_stop(zp_procs_t *s, int logger, int ms);
void zp_procs_describe(const zp_child_t *c, char *buf, size_t len);
void zp_procs_log_tail(zp_procs_t *s, const zp_child_t *c);

#endif

/* autoscale.h — loader.autoscale's policy: from one node's counters over a
 * window (its trainers' wait for data, its loaders' busy share, how many
 * loaders run, the memory left and a loader's size) to a decision — add a
 * loader, retire one, or neither — and the sentence that explains it.
 *
 * Pure: no process, socket or clock. The supervisor (autoscale_run.c)
 * gathers a window's figures every loader.autoscale_interval_s, asks, applies
 * the decision as `zeus-pipe scale` would and records it. One policy state
 * per node: it works on that node's counters alone, so that under Slurm each
 * node's supervisor can run its own.
 *
 * The rules, in order:
 *   - figures missing (no trainer or no loader counters yet): nothing;
 *   - the window after a change: nothing (its counters straddle the change);
 *   - fewer loaders than min: add one;
 *   - loaders busy under ZP_AUTOSCALE_IDLE for two windows in a row, more
 *     than min of them: retire one;
 *   - the trainers waiting for data more than `wait` of the window while the
 *     loaders are busy at least ZP_AUTOSCALE_BUSY: add one, unless that
 *     would pass max, or would leave less memory available than one more
 *     loader's resident size (mem_available < 2 x loader_rss), or a loader
 *     has failed to start in this run;
 *   - else nothing.
 * Every change is reported; a hold is reported when its cause is new (max
 * reached, memory short), not again while the same cause holds; a failed
 * start is reported once (zp_autoscale_start_failed) and growth stops for
 * the rest of the run, so a loader that cannot start is never retried in a
 * loop. */
#ifndef ZP_AUTOSCALE_H
#define ZP_AUTOSCALE_H

#include <stdint.h>

#define ZP_AUTOSCALE_BUSY 0.6 /* loaders at least this busy: more of them may help */
#define ZP_AUTOSCALE_IDLE 0.25 /* loaders under this busy: one can go */
#define ZP_AUTOSCALE_IDLE_WINDOWS 2

/* One window of one node's counters. */
typedef struct {
    double wait;           /* the trainers' share of the window spent waiting for data, 0..1; < 0: unknown */
    double busy;           /* the loaders' mean share of the window spent busy, 0..1; < 0: unknown */
    int workers;           /* loaders running now */
    int64_t mem_available; /* bytes (MemAvailable); < 0: unknown (no memory rule) */
    int64_t loader_rss;    /* bytes resident in the largest loader; 0: unknown (no memory rule) */
} zp_autoscale_window_t;

/* What to do, and whether to record it. */
typedef struct {
    int change;       /* +1 add a loader, -1 retire one, 0 neither */
    int report;       /* 1: worth a record (every change; a hold with a new cause) */
    char reason[256]; /* one sentence with the figures it rests on */
} zp_autoscale_decision_t;

/* The policy's settings and memory between windows; zp_autoscale_init fills it. */
typedef struct {
    int min, max;     /* loader.min_workers; loader.max_workers resolved (>= min) */
    double wait;      /* loader.autoscale_wait */
    int idle;         /* idle windows in a row */
    int settle;       /* windows still to skip after a change */
    int start_failed; /* a loader could not start: no more growth */
    int held;         /* the cause of the current hold (0: none), reported when it began */
} zp_autoscale_t;

/* Settles a for a node with loaders min..max (max >= min >= 1) and the wait
 * threshold `wait` (0..1). */
void zp_autoscale_init(zp_autoscale_t *a, int min, int max, double wait);

/* The decision for window w (see the rules above); updates a. */
void zp_autoscale_decide(zp_autoscale_t *a, const zp_autoscale_window_t *w,
                         zp_autoscale_decision_t *d);

/* A loader could not start (why: what happened, e.g. "loader[3] exited with
 * status 1 before delivering a sample"): no loader is added after this.
 * d->report is 1 the first time, 0 after (the caller records it once). */
void zp_autoscale_start_failed(zp_autoscale_t *a, const char *why, zp_autoscale_decision_t *d);

#endif

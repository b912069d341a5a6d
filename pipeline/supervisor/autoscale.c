/* autoscale.c — loader.autoscale's policy: a window of one node's counters
 * in, a decision out. The rules and their order: autoscale.h. */
#include "pipeline/supervisor/autoscale.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { HOLD_NONE, HOLD_MAX, HOLD_MEMORY, HOLD_FAILED };

void zp_autoscale_init(zp_autoscale_t *a, int min, int max, double wait)
{
    memset(a, 0, sizeof *a);
    a->min = min;
    a->max = max < min ? min : max;
    a->wait = wait;
}

/* Fills d: the change, whether to record it, and the reason. */
__attribute__((format(printf, 4, 5)))
static void decide(zp_autoscale_decision_t *d, int change, int report, const char *fmt, ...)
{
    d->change = change;
    d->report = report;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->reason, sizeof d->reason, fmt, ap);
    va_end(ap);
}

/* A hold on growth for `cause`: reported when the cause is new. */
static void hold(zp_autoscale_t *a, zp_autoscale_decision_t *d, int cause, const char *why)
{
    decide(d, 0, cause != a->held, "%s", why);
    a->held = cause;
}

/* The trainers wait and the loaders are busy: one more loader, when allowed. */
static void grow(zp_autoscale_t *a, const zp_autoscale_window_t *w, zp_autoscale_decision_t *d)
{
    char why[256];
    if (a->start_failed) {
        decide(d, 0, 0, "a loader could not start earlier in this run: none is added");
        return;
    }
    if (w->workers >= a->max) {
        snprintf(why, sizeof why, "the trainer waited %.0f%% for data with loaders %.0f%% busy, "
                 "but %d loader(s) is the most allowed (loader.max_workers)", 100 * w->wait, 100 * w->busy,
                 a->max);
        hold(a, d, HOLD_MAX, why);
        return;
    }
    if (w->mem_available >= 0 && w->loader_rss > 0 && w->mem_available < 2 * w->loader_rss) {
        snprintf(why, sizeof why, "the trainer waited %.0f%% for data with loaders %.0f%% busy, "
                 "but %lld MiB available is under twice a loader's %lld MiB",
                 100 * w->wait, 100 * w->busy, (long long)(w->mem_available >> 20),
                 (long long)(w->loader_rss >> 20));
        hold(a, d, HOLD_MEMORY, why);
        return;
    }
    decide(d, +1, 1, "the trainer waited %.0f%% of the window for data (over %.0f%%) while the "
           "loaders were %.0f%% busy: one more loader", 100 * w->wait, 100 * a->wait, 100 * w->busy);
    a->held = HOLD_NONE;
    a->settle = 1;
}

void zp_autoscale_decide(zp_autoscale_t *a, const zp_autoscale_window_t *w,
                         zp_autoscale_decision_t *d)
{
    if (w->wait < 0 || w->busy < 0) {
        decide(d, 0, 0, "no counters of the trainer or of the loaders in this window");
        return;
    }
    if (a->settle > 0) {
        a->settle--;
        decide(d, 0, 0, "the window after a change: its counters straddle it");
        return;
    }
    if (w->workers < a->min && !a->start_failed) {
        decide(d, +1, 1, "%d loader(s) is under loader.min_workers %d: one more loader",
               w->workers, a->min);
        a->settle = 1;
        return;
    }
    if (w->busy < ZP_AUTOSCALE_IDLE && w->workers > a->min) {
        if (++a->idle < ZP_AUTOSCALE_IDLE_WINDOWS) {
            decide(d, 0, 0, "loaders idle in one window: waiting for a second");
            return;
        }
        decide(d, -1, 1, "the loaders were %.0f%% busy (under %.0f%%) %d windows in a row: one "
               "retires (loader.min_workers %d)", 100 * w->busy, 100 * ZP_AUTOSCALE_IDLE,
               a->idle, a->min);
        a->idle = 0;
        a->held = HOLD_NONE;
        a->settle = 1;
        return;
    }
    a->idle = 0;
    if (w->wait > a->wait && w->busy >= ZP_AUTOSCALE_BUSY) {
        grow(a, w, d);
        return;
    }
    if (a->held != HOLD_FAILED)
        a->held = HOLD_NONE; /* the cause of a hold is over: a new one is reported again */
    decide(d, 0, 0, "the trainer waited %.0f%% for data, the loaders were %.0f%% busy: no change",
           100 * w->wait, 100 * w->busy);
}

void zp_autoscale_start_failed(zp_autoscale_t *a, const char *why, zp_autoscale_decision_t *d)
{
    decide(d, 0, !a->start_failed, "%s: autoscale adds no loader for the rest of the run", why);
    a->start_failed = 1;
    a->held = HOLD_FAILED;
}

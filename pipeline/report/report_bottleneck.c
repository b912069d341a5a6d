/* report_bottleneck.c — which stage limits a run, and what to try
 * (report_bottleneck.h). */
#include "pipeline/report/report_bottleneck.h"
#include "pipeline/base/names.h"

#include <stdio.h>

const char *zp_report_bottleneck_phase_name(int phase)
{
    return phase == ZP_PHASE_COLD ? "cold" : phase == ZP_PHASE_WARM ? "warm" : "run";
}

/* The loaders' sentence: what to try depends on whether the epochs measured
 * read through the loaders while the cache fills (cold), from the cache
 * (warm), or are the whole run's. */
static void loaders_advice(const zp_data_stages_t *d, double wait, char *buf, size_t len)
{
    int n = snprintf(buf, len, "The loaders are the bottleneck: the trainer waited for data "
                     "%.1f%% of its time while the %d loader(s) were busy %.0f%% of theirs; ",
                     100 * wait, d->loaders, 100 * d->busy[0]);
    if (n < 0 || (size_t)n >= len)
        return;
    if (d->phase == ZP_PHASE_COLD)
        snprintf(buf + n, len - (size_t)n, "warm the cache first (zeus-pipe warm CONFIG): warm "
                 "epochs read from LMDB, not from the loaders; or more loaders "
                 "(loader.workers=%d) for cold epochs.", 2 * d->loaders);
    else if (d->phase == ZP_PHASE_WARM)
        snprintf(buf + n, len - (size_t)n, "the cache's misses still go through them: try more "
                 "loaders (loader.workers=%d).", 2 * d->loaders);
    else
        snprintf(buf + n, len - (size_t)n, "try more loaders (loader.workers=%d) or warm the "
                 "cache (zeus-pipe warm CONFIG) so that epochs read from LMDB.", 2 * d->loaders);
}

int zp_report_bottleneck(const zp_data_stages_t *d, double wait, char *stage, size_t slen,
                         char *buf, size_t len)
{
    snprintf(stage, slen, "%s", "unknown");
    if (wait < 0) {
        snprintf(buf, len, "No trainer timings yet: the run has not finished an epoch.");
        return -1;
    }
    if (d->seconds < ZP_ADVICE_MIN_S) {
        snprintf(buf, len, "The trainer waited for data %.1f%% of its time over %.1f s of epochs: "
                 "too short a run for its shares to name a bottleneck (start-up weighs on "
                 "them); a run of %.0f s or more gets advice.", 100 * wait, d->seconds,
                 ZP_ADVICE_MIN_S);
        return -1;
    }
    if (wait < 0.10) {
        snprintf(stage, slen, "%s", zp_names_stage(ZP_STAGE_TRAINER));
        snprintf(buf, len, "The trainer is the bottleneck: it waited for data %.1f%% of its time, so "
                 "the data pipeline keeps up; a faster step (trainer.threads, a GPU backend) "
                 "speeds the run up.", 100 * wait);
        return 3;
    }
    int hot = 0; /* the busiest data stage: loader, cache or prefetch */
    for (int i = 1; i < 3; i++)
        if (d->busy[i] > d->busy[hot])
            hot = i;
    if (d->busy[hot] < 0.5) { /* nothing measured says which setting helps: none is advised */
        snprintf(buf, len, "The trainer waited for data %.1f%% of its time while no data stage was "
                 "busy half of its (loaders %.0f%%, cache %.0f%%, prefetch %.0f%%): the time goes "
                 "between the stages, in the hand-off of each batch, which no setting is known to "
                 "shorten; trace.json (zeus-pipe report RUN --trace) shows where a batch's time goes.",
                 100 * wait, 100 * d->busy[0], 100 * d->busy[1], 100 * d->busy[2]);
        return -1;
    }
    snprintf(stage, slen, "%s", zp_names_stage(hot)); /* the data stages lead names.h */
    if (hot == 0)
        loaders_advice(d, wait, buf, len);
    else if (hot == 1)
        snprintf(buf, len, "The cache stage is the bottleneck: the trainer waited for data %.1f%% "
                 "of its time while the cache stage was busy %.0f%% of its; try a larger "
                 "loader.task_size (fewer, bigger messages) or a larger cache.commit_every.",
                 100 * wait, 100 * d->busy[1]);
    else
        snprintf(buf, len, "The prefetch stage is the bottleneck: the trainer waited for data "
                 "%.1f%% of its time while the prefetch stage was busy %.0f%% of its, assembling "
                 "batches; try more prefetch.readers (up to the cores), which share a batch's "
                 "crops, decodes and reads of over 512 KiB a thread (zeus-pipe stat's READERS "
                 "column shows how busy they are).", 100 * wait, 100 * d->busy[2]);
    return hot;
}

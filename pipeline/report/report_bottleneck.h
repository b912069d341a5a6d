/* report_bottleneck.h — the rule that names the stage limiting a run, or a
 * phase of one, and what to try, from the figures the run model holds
 * (model.h) or the live rows of `zeus-pipe stat`. A pure function of its
 * figures, whatever the machine's timings were: every report of a run
 * (report.txt, report.json, report.html) says the sentence the model
 * computed with it once, and `zeus-pipe stat` the one it computes from its
 * rows at each refresh: one rule for one judgement. */
#ifndef ZP_REPORT_BOTTLENECK_H
#define ZP_REPORT_BOTTLENECK_H

#include <stddef.h>

/* What the figures are of. A cold phase's epochs read through the loaders
 * (the prefetch's cache hit rate under ZP_PHASE_WARM_HIT_RATE), a warm
 * phase's from the cache; a run's are of the whole run, the cache on or off. */
enum {
    ZP_PHASE_RUN,  /* the whole run: no phases told apart (the cache off, or one kind of epoch) */
    ZP_PHASE_COLD, /* epochs that read through the loaders while the cache fills */
    ZP_PHASE_WARM, /* epochs that read from the warm cache */
};

/* The cache hit rate (0..1) from which epochs are warm: under it, cold. */
#define ZP_PHASE_WARM_HIT_RATE 0.9

/* The figures the bottleneck is named from: the data stages' shares of time
 * busy (loader, cache, prefetch; averaged over each stage's instances). */
typedef struct {
    double busy[3];
    int loaders;    /* loader instances */
    double seconds; /* the trainer's epochs, in all: too few and no advice is given */
    int phase;      /* ZP_PHASE_*: what the figures are of (0, ZP_PHASE_RUN, by default) */
} zp_data_stages_t;

/* The least epoch time (seconds) whose figures name a bottleneck: a start-up
 * dominates a shorter run's shares. */
#define ZP_ADVICE_MIN_S 10.0

/* Names the stage that limits a run (or the phase d->phase says) from the
 * trainer's share of time waiting for data (`wait`, 0..1; negative when
 * unknown) and the data stages' busy shares (no advice for epochs of under
 * ZP_ADVICE_MIN_S seconds in all): the trainer when it waits under 10%; else
 * the busiest data stage when it is busy at least half its time; else none,
 * and no setting is advised: a deeper ring (prefetch.depth, .window) was
 * once advised there and made a cuda run wait longer (32% to 41%), so the
 * sentence says only what was measured and where to look. A busy prefetch is
 * advised more prefetch.readers, not a deeper ring: a busy stage is not
 * sped up by more room. Busy loaders are advised more loaders and a warm
 * cache; in a cold phase the warm cache first, since the epochs after it
 * read from LMDB and not from the loaders (more loaders shorten the cold
 * epochs only); in a warm phase more loaders, for the cache's misses.
 * tests/integration/test_report.py follows the loader and the prefetch
 * advice on reproducible runs: the trainer waits a quarter less at least
 * (loaders), and no longer beyond the machine's noise (readers); and reports
 * a cold-then-warm run phase by phase.
 * Writes the stage's name ("trainer", "loader", "cache", "prefetch" or
 * "unknown") to `stage` and one sentence of advice to `buf`; returns 3 for
 * the trainer, 0..2 for a data stage, -1 for none. */
int zp_report_bottleneck(const zp_data_stages_t *d, double wait, char *stage, size_t slen,
                         char *buf, size_t len);

/* The phase's name in reports: "cold", "warm", or "run" (ZP_PHASE_RUN). */
const char *zp_report_bottleneck_phase_name(int phase);

#endif

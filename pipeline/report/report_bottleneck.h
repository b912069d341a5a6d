/* report_bottleneck.h — the rule that names the stage limiting a run, and
 * what to try, from the figures the run model holds (model.h). A pure
 * function of its figures, whatever the machine's timings were: every
 * report of a run (report.txt, report.json, report.html) says the sentence
 * the model computed with it once. */
#ifndef ZP_REPORT_BOTTLENECK_H
#define ZP_REPORT_BOTTLENECK_H

#include <stddef.h>

/* The figures the bottleneck is named from: the data stages' shares of time
 * busy (loader, cache, prefetch; averaged over each stage's instances). */
typedef struct {
    double busy[3];
    int loaders;    /* loader instances */
    double seconds; /* the trainer's epochs, in all: too few and no advice is given */
} zp_data_stages_t;

/* The least epoch time (seconds) whose figures name a bottleneck: a start-up
 * dominates a shorter run's shares. */
#define ZP_ADVICE_MIN_S 10.0

/* Names the stage that limits a run from the trainer's share of time waiting
 * for data (`wait`, 0..1; negative when unknown) and the data stages' busy
 * shares (no advice for epochs of under ZP_ADVICE_MIN_S seconds in all):
 * the trainer when it waits under 10%; else the busiest data stage
 * when it is busy at least half its time; else none, and no setting is
 * advised: a deeper ring (prefetch.depth, .window) was once advised there
 * and made a cuda run wait longer (32% to 41%), so the sentence says only
 * what was measured and where to look. A busy prefetch is advised more
 * prefetch.readers, not a deeper ring: a busy stage is not sped up by more
 * room. tests/integration/test_report.py follows the loader and the prefetch
 * advice on reproducible runs: the trainer waits a quarter less at least
 * (loaders), and no longer beyond the machine's noise (readers).
 * Writes the stage's name ("trainer", "loader", "cache", "prefetch" or
 * "unknown") to `stage` and one sentence of advice to `buf`; returns 3 for
 * the trainer, 0..2 for a data stage, -1 for none. */
int zp_report_bottleneck(const zp_data_stages_t *d, double wait, char *stage, size_t slen,
                         char *buf, size_t len);

#endif

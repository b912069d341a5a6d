/* report.h — the report of a run, computed from its events.msgpack (every
 * event the logger received, as it came off the wire).
 *
 * It holds the per-epoch metrics; per stage and region, the statistics of
 * the timer samples of all its instances (count, min, mean, median, max,
 * stdev, total, in milliseconds); per stage, items, throughput and the share
 * of time busy, waiting for input and waiting on output; the share of the
 * trainer's time spent waiting for data (io / epoch); and one sentence that
 * names the bottleneck and what to try.
 *
 * The logger writes it at the end of a run; `zeus-pipe report RUN` computes
 * it again at any time, also while the run goes on.
 */
#ifndef ZP_REPORT_H
#define ZP_REPORT_H

#include <stddef.h>
#include <stdio.h>

/* Reads <run_dir>/events.msgpack and prints the report as text to `text`
 * and as JSON to `json` (either may be NULL). A record torn by a kill or
 * garbled is skipped, and the report says how many bytes and records it
 * skipped. 0, or an error in err (-ENOENT: no events file; ZP_EPROTO: not
 * one event record in it). */
int zp_report(const char *run_dir, FILE *text, FILE *json, char *err, size_t errlen);

/* The final figures of a run, for tables of many runs (`zeus-pipe sweep`). */
typedef struct {
    int epochs;                      /* train epochs finished */
    double train_loss, test_loss, test_acc; /* of the last epoch; -1 when absent */
    double best_test_acc;            /* -1 when no test epoch */
    double seconds;                  /* train epochs' time */
} zp_run_summary_t;

/* Reads <run_dir>/events.msgpack into `out`; 0 or an error in err. */
int zp_run_summary(const char *run_dir, zp_run_summary_t *out, char *err, size_t errlen);

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
 * when it is busy at least half its time; else none (a latency problem).
 * Writes the stage's name ("trainer", "loader", "cache", "prefetch" or
 * "unknown") to `stage` and one sentence of advice to `buf`; returns 3 for
 * the trainer, 0..2 for a data stage, -1 for none. */
int zp_report_bottleneck(const zp_data_stages_t *d, double wait, char *stage, size_t slen,
                         char *buf, size_t len);

/* zp_report() into <run_dir>/report.txt and report.json (both written
 * beside and renamed over the old ones), and as text to `out` (NULL: no
 * copy). Returns 0, or a negative errno with the error logged and the
 * previous report files left as they were. */
int zp_report_write(const char *run_dir, FILE *out);

#endif

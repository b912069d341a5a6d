/* report.h — the report of a run as text (report.txt) and JSON
 * (report.json): renderers of its run model (model.h).
 *
 * It holds the per-epoch metrics; per stage and region, the statistics of
 * the timer samples of all its instances (count, min, mean, median, max,
 * stdev, total, in milliseconds); per stage, items, throughput and the share
 * of time busy, waiting for input and waiting on output; the share of the
 * trainer's time spent waiting for data (io / epoch); and the bottleneck with
 * what to try (report_bottleneck.h): one sentence for a run of one kind of
 * epoch, one per phase (cold epochs, warm epochs) for a run with the cache
 * filling and then read (model.h).
 *
 * The logger writes it at the end of a run; `zeus-pipe report RUN` computes
 * it again at any time, also while the run goes on.
 */
#ifndef ZP_REPORT_H
#define ZP_REPORT_H

#include "pipeline/report/model.h"

#include <stddef.h>
#include <stdio.h>

/* The report of the model as text, and as one line of JSON. */
void zp_report_text(const zp_model_t *m, FILE *out);
void zp_report_json(const zp_model_t *m, FILE *out);

/* Loads the model of <run_dir> and prints the report as text to `text`
 * and as JSON to `json` (either may be NULL). A record torn by a kill or
 * garbled is skipped, and the report says how many bytes and records it
 * skipped; so is a record the model cannot use (model.h). 0, or an error
 * in err (zp_model_load's: -ENOENT, no events file; ZP_EPROTO, not one
 * event record in it; ZP_ENOMEM). */
int zp_report(const char *run_dir, FILE *text, FILE *json, char *err, size_t errlen);

/* The final figures of a run, for tables of many runs (`zeus-pipe sweep`). */
typedef struct {
    int epochs;                      /* train epochs finished */
    double train_loss, test_loss, test_acc; /* of the last epoch; -1 when absent */
    double best_test_acc;            /* -1 when no test epoch */
    double seconds;                  /* train epochs' time */
} zp_run_summary_t;

/* The summary of <run_dir>'s model into `out` (its epochs with a train
 * split); 0 or zp_model_load's error in err (`out` then says no epoch). */
int zp_report_summary(const char *run_dir, zp_run_summary_t *out, char *err, size_t errlen);

/* <run_dir>'s model, loaded once, into report.txt, report.json and
 * report.html (each written beside and renamed over the old one), and as
 * text to `out` (NULL: no copy): what the logger leaves at a run's end.
 * Returns 0, or zp_model_load's error or a negative errno with the error
 * logged; a file not written keeps its previous version. */
int zp_report_write(const char *run_dir, FILE *out);

#endif

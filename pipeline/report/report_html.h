/* report_html.h — RUN/report.html: the report of a run as one
 * self-contained page (inline CSS and SVG; no script, nothing fetched), for
 * any browser, without a network.
 *
 * It holds the bottleneck sentence (as report.txt's); loss and accuracy
 * curves (train and test per epoch, and train per `step` record); each
 * stage's items/s over time (the sum of its instances' latest stats records;
 * one <g class="series" data-stage="NAME"> per stage); the trainer's share
 * of time waiting for data over time; the time per stage and region as bars;
 * the epoch table; the coverage proof of each split and epoch (samples,
 * expected, skipped, distinct, the index checksum checked against the
 * indices 0..n-1 less the skipped ones); skipped samples and lost loaders.
 * A renderer of the run model (model.h): a run without events.msgpack is
 * drawn from metrics.jsonl and stats.jsonl, and the page says what is
 * missing, as report.txt does.
 *
 * Bounded: every series is drawn from at most ZP_SVG_BUCKETS buckets (svg.h)
 * and the tables hold the first and last ZP_HTML_ROWS/2 epochs, so a run of
 * a million steps gets a page of a few hundred kB. Every string from the
 * run (names, errors, paths) goes through zp_escape_html.
 */
#ifndef ZP_REPORT_HTML_H
#define ZP_REPORT_HTML_H

#include "pipeline/report/model.h"

#include <stddef.h>
#include <stdio.h>

#define ZP_HTML_ROWS 200

/* The page of the model to `out`. */
void zp_report_html_page(const zp_model_t *m, FILE *out);

/* The page of <run_dir> to `out`. 0, or zp_model_load's error in err:
 * -ENOENT or ZP_EPROTO when the run holds nothing to read, ZP_ENOMEM. */
int zp_report_html(const char *run_dir, FILE *out, char *err, size_t errlen);

/* zp_report_html into <run_dir>/report.html, written beside and renamed
 * over (a page that cannot be made leaves the previous one). 0, or a
 * negative errno or ZP_E* code with the path and the reason in err. */
int zp_report_html_write(const char *run_dir, char *err, size_t errlen);

#endif

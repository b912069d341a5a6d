/* page.h — the parts the HTML pages share (report.html,
 * report_html.h; a sweep's page, report_sweep.h): the page's head (title
 * and inline style) and foot, and the run model's tables of epochs and of
 * coverage. Every string from data goes through zp_escape_html. */
#ifndef ZP_PAGE_H
#define ZP_PAGE_H

#include "pipeline/report/model.h"

#include <stdio.h>

/* <!DOCTYPE html> ... <body><h1>: `title` then `name` (from data) in <code>. */
void zp_page_head(FILE *out, const char *title, const char *name);
/* The page's end, saying which command (a constant) writes it again. */
void zp_page_foot(FILE *out, const char *again);

/* The table of the model's epochs (those with an epoch_end): loss and
 * accuracy of each split, samples/s and seconds. Past ZP_HTML_ROWS epochs,
 * the first and the last ZP_HTML_ROWS/2 and a row saying how many are left
 * out. */
void zp_page_epochs(FILE *out, const zp_model_t *m);

/* The coverage proof of every epoch and split: samples, expected, skipped,
 * distinct, the index checksum, and whether it is the checksum of the
 * indices 0..samples+skipped-1 less the skipped ones (the model's skipped
 * samples of that split, when it kept every one the epochs count). */
void zp_page_coverage(FILE *out, const zp_model_t *m);

#endif

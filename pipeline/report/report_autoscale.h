/* report_autoscale.h — the report's section on loader.autoscale: every
 * decision the supervisor recorded (an "autoscale" metric, records.h), with
 * the figures it rested on, as text (report.txt) and JSON (report.json's
 * "autoscale" array) and HTML (report.html). The run model (model.h) feeds
 * it the records it reads; the reports render it. Under Slurm each node's
 * first task decides for its node: a row names it by that task's rank. */
#ifndef ZP_REPORT_AUTOSCALE_H
#define ZP_REPORT_AUTOSCALE_H

#include <msgpack.h>
#include <stdint.h>
#include <stdio.h>

#define ZP_REPORT_AUTOSCALE_MAX 1000 /* decisions kept; later ones are counted */

typedef struct {
    double time; /* wall clock, seconds */
    int64_t node; /* the deciding supervisor's instance: under Slurm its node's first rank */
    int change, before, after;
    double wait, busy;
    char reason[256];
} zp_report_autoscale_row_t;

/* The decisions of one run, in the order recorded. Zeroed before the first add. */
typedef struct {
    zp_report_autoscale_row_t *row; /* owned; n of them */
    int n;
    int64_t left_out; /* past ZP_REPORT_AUTOSCALE_MAX */
} zp_report_autoscale_t;

/* Adds the autoscale record `body` (its head's time and instance). 0, or ZP_ENOMEM. */
int zp_report_autoscale_add(zp_report_autoscale_t *l, const msgpack_object *body);
/* "Loader autoscale" and a line per decision, times in seconds after t0;
 * nothing without decisions. */
void zp_report_autoscale_text(const zp_report_autoscale_t *l, double t0, FILE *out);
/* The same as an HTML section (report.html), every string escaped. */
void zp_report_autoscale_html(const zp_report_autoscale_t *l, double t0, FILE *out);
/* "autoscale":[{...},...], (with its trailing comma) for report.json. */
void zp_report_autoscale_json(const zp_report_autoscale_t *l, double t0, FILE *out);
/* Frees the rows; l can be added to again. */
void zp_report_autoscale_free(zp_report_autoscale_t *l);

#endif

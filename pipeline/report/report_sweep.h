/* report_sweep.h — the comparison page of a sweep (`zeus-pipe sweep`): its
 * runs ranked and linked to their own report.html, and their test curves,
 * each from the run's model (model.h), overlaid. One self-contained page,
 * as report.html is (report_html.h). */
#ifndef ZP_REPORT_SWEEP_H
#define ZP_REPORT_SWEEP_H

#include "pipeline/report/report.h"

#include <stddef.h>

/* One run of a sweep, as the comparison page shows it. */
typedef struct {
    const char *name;   /* the run's name; its page is name/report.html beside the sweep's */
    const char *values; /* "lr=0.1 batch_size=128" */
    const char *dir;    /* its run directory: the curves are read from it */
    int status;         /* its exit status; 0 finished */
    zp_run_summary_t sum;
} zp_report_sweep_run_t;

/* The comparison page of a sweep at `path`: the ranked table of its n runs
 * (in the order given) with relative links to each run's report.html, and
 * every run's test accuracy and test loss per epoch overlaid (one series
 * per run, data-run="NAME"). Written beside and renamed over. 0, or a
 * negative errno with the path and the reason in err. */
int zp_report_sweep_write(const char *path, const char *title, const zp_report_sweep_run_t *runs,
                          int n, char *err, size_t errlen);

#endif

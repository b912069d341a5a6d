/* cmd_overfit.c — `zeus-pipe overfit CONFIG [--steps N] [--target LOSS]`: trains
 * on the first train batch again and again. A model wired right to its data
 * drives the loss of one batch towards zero; one that does not (labels
 * shuffled against images, a broken transform, a learning rate far off)
 * shows it here in seconds instead of after an epoch. The run is zp_eval_overfit
 * (pipeline/supervisor/supervisor.h); this file parses and prints the verdict. */
#define _GNU_SOURCE
#include "pipeline/cli/cmd.h"
#include "pipeline/supervisor/supervisor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(FILE *out, int status)
{
    fprintf(out,
            "usage: zeus-pipe overfit CONFIG [--steps N] [--target LOSS] [KEY=VALUE ...]\n\n"
            "Trains CONFIG's model on one fixed batch (the first of the train split), N\n"
            "times (default 300), with no test and no checkpoint, in runs/<name>-overfit.\n"
            "Exit 0 when the loss ends below LOSS (default 0.05): model and data are wired\n"
            "right; 1 when it does not.\n");
    return status;
}

int cmd_overfit(int argc, char **argv)
{
    if (zp_cmd_wants_help(argc, argv))
        return usage(stdout, 0);
    long steps = 300;
    double target = 0.05;
    char *rest[300];
    int nrest = 0;
    for (int i = 0; i < argc && nrest < 300; i++) {
        char *end = NULL;
        if (!strcmp(argv[i], "--steps") && i + 1 < argc) {
            steps = strtol(argv[++i], &end, 10);
            if (*end || steps < 1 || steps > 100000000)
                return usage(stderr, 2);
        } else if (!strcmp(argv[i], "--target") && i + 1 < argc) {
            target = strtod(argv[++i], &end);
            if (*end || !(target > 0))
                return usage(stderr, 2);
        } else {
            rest[nrest++] = argv[i];
        }
    }
    zp_config_t cfg;
    zp_dataset_t *ds;
    int rc = zp_sup_load(nrest, rest, NULL, &cfg, &ds);
    if (rc)
        return rc < 0 ? usage(stderr, 2) : rc;
    zp_overfit_t r;
    int status = zp_eval_overfit(&cfg, ds, steps, &r);
    zp_dataset_destroy(&ds);
    if (status)
        return status;
    if (r.last < target) {
        printf("overfit: the loss of one batch fell from %.4f to %.4f in %lld steps "
               "(target < %g): model and data are wired right\n", r.first, r.last, r.steps, target);
        return 0;
    }
    printf("overfit: the loss of one batch went from %.4f to %.4f in %lld steps, not below %g: "
           "check that labels match their samples, the normalization (dataset.mean/std) and "
           "trainer.optimizer.lr, or give it more --steps\n", r.first, r.last, r.steps, target);
    return 1;
}

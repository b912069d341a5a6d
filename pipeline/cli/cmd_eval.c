/* cmd_eval.c — `zeus-pipe eval RUN [--ckpt last|best|N|all]`: the test split
 * through the pipeline and one or more checkpoints of a run. The pipeline
 * runs in <run>/eval (eval-2, ... when taken); the results are written to
 * <run>/eval-<checkpoint>.json and .txt and printed. The choosing and the run
 * are zp_eval_* (pipeline/supervisor/supervisor.h); this file parses and prints. */
#define _GNU_SOURCE
#include "pipeline/cli/cmd.h"
#include "pipeline/supervisor/supervisor.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static int usage(FILE *out, int status)
{
    fprintf(out,
            "usage: zeus-pipe eval RUN [--ckpt last|best|N|all]\n\n"
            "Runs the test split of RUN's dataset through the pipeline and the chosen\n"
            "checkpoints of RUN (default: best, else last; N: the one of epoch N; all:\n"
            "every one, the data read once) and prints loss, accuracy, per-class accuracy\n"
            "and the confusion matrix of each; also written to RUN/eval-<checkpoint>.json\n"
            "and .txt. RUN is a run directory or a name under runs/.\n");
    return status;
}

static void print_results(const char *dir, const char *ckpts)
{
    for (const char *p = ckpts; *p;) {
        size_t l = strcspn(p, ",");
        char path[PATH_MAX + 96], buf[4096];
        snprintf(path, sizeof path, "%s/eval-%.*s.txt", dir, (int)l, p);
        FILE *f = fopen(path, "r");
        size_t got;
        printf("\n");
        while (f && (got = fread(buf, 1, sizeof buf, f)) > 0)
            fwrite(buf, 1, got, stdout);
        if (f)
            fclose(f);
        p += l + (p[l] == ',');
    }
}

int cmd_eval(int argc, char **argv)
{
    if (zp_cmd_wants_help(argc, argv))
        return usage(stdout, 0);
    const char *run = NULL, *which = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ckpt") && i + 1 < argc)
            which = argv[++i];
        else if (argv[i][0] != '-' && !run)
            run = argv[i];
        else
            return usage(stderr, 2);
    }
    if (!run)
        return usage(stderr, 2);
    char dir[PATH_MAX], ckpts[1024];
    if (zp_rundir_find(run, dir, sizeof dir) || zp_eval_choose(dir, which, ckpts, sizeof ckpts))
        return 2;
    int status = zp_eval(dir, ckpts);
    if (status == 0)
        print_results(dir, ckpts);
    return status;
}

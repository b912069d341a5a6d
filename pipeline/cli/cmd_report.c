/* cmd_report.c — `zeus-pipe report RUN [--json]`: the report of a run, from
 * its events.msgpack, finished or still running. */
#include "pipeline/cli/cmd.h"
#include "pipeline/report.h"
#include "pipeline/supervisor/supervisor.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

int cmd_report(int argc, char **argv)
{
    const char *run = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (argv[i][0] == '-' || run) {
            int help = zp_wants_help(argc, argv);
            fprintf(help ? stdout : stderr,
                    "usage: zeus-pipe report [RUN] [--json]\n\n"
                    "Prints the report of a run, finished or running: per-epoch metrics, time\n"
                    "per stage and region (count, min, mean, median, max, stdev), throughput of\n"
                    "every stage, the share of the trainer's time spent waiting for data, and\n"
                    "which stage is the bottleneck with what to try. --json prints report.json's\n"
                    "form. RUN is a run directory or a name under runs/; without it, the only\n"
                    "running run. A finished run also has it in report.txt and report.json.\n");
            return help ? 0 : 2;
        } else {
            run = argv[i];
        }
    }
    char dir[PATH_MAX], err[PATH_MAX + 128];
    int rc = zp_find_run(run, dir, sizeof dir);
    if (rc)
        return rc;
    rc = zp_report(dir, json ? NULL : stdout, json ? stdout : NULL, err, sizeof err);
    if (rc)
        fprintf(stderr, "zeus-pipe: cannot report on %s: %s\n", dir, err);
    return rc ? 1 : 0;
}

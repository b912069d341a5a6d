/* cmd_report.c — `zeus-pipe report RUN [--json | --trace | --html]`: the
 * report of a run, from its events.msgpack, finished or still running; or its
 * timeline, RUN/trace.json, or its page, RUN/report.html, written again. */
#include "pipeline/cli/cmd.h"
#include "pipeline/config/config.h"
#include "pipeline/report/report.h"
#include "pipeline/report/report_html.h"
#include "pipeline/report/trace.h"
#include "pipeline/supervisor/supervisor.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* RUN/trace.json from RUN/events.msgpack, as long as the run's config
 * (RUN/config.yaml) bounds it; the default bound when that cannot be read. */
static int write_trace(const char *dir)
{
    static zp_config_t cfg;
    char path[PATH_MAX + 32], err[PATH_MAX + 128];
    snprintf(path, sizeof path, "%s/config.yaml", dir);
    int64_t max = 200000;
    if (!zp_config_load_run(&cfg, path, err, sizeof err))
        max = cfg.trace_max_events;
    else
        fprintf(stderr, "zeus-pipe: %s: unreadable, so logger.trace_max_events is %lld\n", path, (long long)max);
    zp_trace_info_t info;
    int rc = zp_trace_write(dir, max, &info, err, sizeof err);
    if (rc) {
        fprintf(stderr, "zeus-pipe: cannot write %s/trace.json: %s\n", dir, err);
        return 1;
    }
    printf("%s/trace.json: %lld events of %lld stage instances", dir, (long long)info.events,
           (long long)info.processes);
    if (info.left_out)
        printf(", %lld left out past logger.trace_max_events=%lld", (long long)info.left_out, (long long)max);
    printf(" (open it in ui.perfetto.dev or chrome://tracing)\n");
    return 0;
}

/* RUN/report.html again; its path on stdout. */
static int write_html(const char *dir)
{
    char err[PATH_MAX + 128];
    if (zp_report_html_write(dir, err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: cannot write %s/report.html: %s\n", dir, err);
        return 1;
    }
    printf("%s/report.html\n", dir);
    return 0;
}

int cmd_report(int argc, char **argv)
{
    const char *run = NULL;
    int json = 0, trace = 0, html = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--trace")) {
            trace = 1;
        } else if (!strcmp(argv[i], "--html")) {
            html = 1;
        } else if (argv[i][0] == '-' || run) {
            int help = zp_cmd_wants_help(argc, argv);
            fprintf(help ? stdout : stderr,
                    "usage: zeus-pipe report [RUN] [--json | --trace | --html]\n\n"
                    "Prints the report of a run, finished or running: per-epoch metrics, time\n"
                    "per stage and region (count, min, mean, median, max, stdev), throughput of\n"
                    "every stage, the share of the trainer's time spent waiting for data, and\n"
                    "which stage is the bottleneck with what to try (for a run whose cache filled,\n"
                    "the cold epochs and the warm ones each). --json prints report.json's\n"
                    "form. RUN is a run directory or a name under runs/; without it, the only\n"
                    "running run, else the latest one under runs/. A finished run also has it\n"
                    "in report.txt and report.json.\n"
                    "--trace writes RUN/trace.json again instead: the run's timeline for\n"
                    "ui.perfetto.dev or chrome://tracing (the logger writes it as a run ends).\n"
                    "--html writes RUN/report.html again and prints its path: the report as one\n"
                    "page of plots and tables for any browser, no network needed.\n"
                    "A run without events.msgpack is reported from metrics.jsonl and stats.jsonl,\n"
                    "saying what that leaves out.\n");
            return help ? 0 : 2;
        } else {
            run = argv[i];
        }
    }
    char dir[PATH_MAX], err[PATH_MAX + 128];
    int rc = zp_rundir_find_or_latest(run, dir, sizeof dir);
    if (rc)
        return rc;
    if (trace)
        return write_trace(dir);
    if (html)
        return write_html(dir);
    rc = zp_report(dir, json ? NULL : stdout, json ? stdout : NULL, err, sizeof err);
    if (rc)
        fprintf(stderr, "zeus-pipe: cannot report on %s: %s\n", dir, err);
    return rc ? 1 : 0;
}

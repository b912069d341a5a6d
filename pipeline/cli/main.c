/* main.c — the zeus-pipe command table. */
#include "pipeline/cli/cmd.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} COMMANDS[] = {
    {"up", cmd_up, "run a training pipeline from a config file"},
    {"stat", cmd_stat, "show the live throughput of every stage of a run"},
    {"scale", cmd_scale, "start or retire loaders of a running pipeline"},
    {"down", cmd_down, "stop a running pipeline cleanly"},
    {"eval", cmd_eval, "evaluate checkpoints of a run on the test split"},
    {"overfit", cmd_overfit, "train on one batch until its loss is near zero (a wiring check)"},
    {"sweep", cmd_sweep, "run a grid of configs one after another and rank them"},
    {"report", cmd_report, "print the report of a run: time per stage and region, bottleneck"},
    {"dataset", cmd_dataset, "print what a config's dataset holds: splits, files, fields"},
    {"warm", cmd_warm, "fill the LMDB cache with preprocessed samples"},
    {"cache", cmd_cache, "inspect, verify or drop an LMDB cache"},
    {"loader", cmd_loader, "run loaders for a run on another host (tcp, CURVE)"},
    {"keygen", cmd_keygen, "make a CURVE key pair for loaders on other hosts"},
    {"config", cmd_config, "print the resolved config, or the table of keys"},
    {"stage", cmd_stage, "run one stage process (started by `up`; not for people)"},
};

static int usage(FILE *out)
{
    fprintf(out, "usage: zeus-pipe COMMAND [ARGS]   (zeus-pipe COMMAND --help for more)\n\n");
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        fprintf(out, "  %-8s %s\n", COMMANDS[i].name, COMMANDS[i].help);
    return out == stdout ? 0 : 2;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage(stderr);
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help"))
        return usage(stdout);
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (!strcmp(argv[1], COMMANDS[i].name))
            return COMMANDS[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "zeus-pipe: '%s' is not a command\n", argv[1]);
    return usage(stderr);
}

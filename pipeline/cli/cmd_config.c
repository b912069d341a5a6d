/* cmd_config.c — `zeus-pipe config FILE [KEY=VALUE ...]` and `config --keys`. */
#include "pipeline/cli/cmd.h"
#include "pipeline/config/config.h"
#include "pipeline/source/source.h"
#include "pipeline/base/log.h"

#include <stdio.h>
#include <string.h>

int cmd_config(int argc, char **argv)
{
    if (zp_cmd_wants_help(argc, argv) || argc < 2) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: zeus-pipe config FILE [KEY=VALUE ...]   print the resolved config as YAML\n"
                "       zeus-pipe config --keys [--markdown]     list every key, its type, default and range\n");
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--keys")) {
        zp_config_print_keys(stdout, argc > 2 && !strcmp(argv[2], "--markdown"));
        return 0;
    }
    static zp_config_t cfg;
    char err[1024];
    if (zp_config_load(&cfg, argv[1], argv + 2, argc - 2, err, sizeof err) ||
        zp_source_config(&cfg, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    zp_config_print(&cfg, stdout);
    return 0;
}

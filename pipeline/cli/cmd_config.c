/* cmd_config.c — `zeus-pipe config FILE [KEY=VALUE ...]` and `config --keys`. */
#include "pipeline/cli/cmd.h"
#include "pipeline/config.h"
#include "pipeline/dataset.h"
#include "pipeline/log.h"

#include <stdio.h>
#include <string.h>

int zp_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return 1;
    return 0;
}

int zp_cli_load(int argc, char **argv, const char *force, zp_config_t *cfg,
                zp_dataset_meta_t *meta)
{
    const char *file = NULL;
    char *over[256];
    int nover = 0;
    for (int i = 1; i < argc; i++) {
        if (strchr(argv[i], '=') && nover < 255)
            over[nover++] = argv[i];
        else if (!file && argv[i][0] != '-')
            file = argv[i];
        else
            return -1;
    }
    if (!file)
        return -1;
    if (force)
        over[nover++] = (char *)force;
    char err[1024];
    if (zp_config_load(cfg, file, over, nover, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    if (zp_dataset_probe(cfg, meta, err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: %s\n", err);
        if (cfg->dataset_source == ZP_SOURCE_IDX &&
            !strncmp(cfg->dataset_path, "/usr/share/datasets/", 20))
            fprintf(stderr, "zeus-pipe: (Fashion-MNIST comes with the Debian package "
                            "dataset-fashion-mnist)\n");
        return 2;
    }
    return 0;
}

int cmd_config(int argc, char **argv)
{
    if (zp_wants_help(argc, argv) || argc < 2) {
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
    if (zp_config_load(&cfg, argv[1], argv + 2, argc - 2, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    zp_config_print(&cfg, stdout);
    return 0;
}

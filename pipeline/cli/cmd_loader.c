/* cmd_loader.c — `zeus-pipe loader --connect HOST:PORT --server-key FILE --key
 * FILE CONFIG`: loader processes on this host for a run on another one, over
 * tcp with CURVE. The run's host must list this key's .pub in its
 * transport.allowed_keys; CONFIG names the dataset as this host sees it.
 * The arguments; the loaders are the supervisor's (zp_remote_run): stage
 * processes as a run's, restarted unless retired or refused for their config. */
#define _GNU_SOURCE
#include "pipeline/cli/cmd.h"
#include "pipeline/supervisor/supervisor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(FILE *out, int status)
{
    fprintf(out,
            "usage: zeus-pipe loader --connect HOST:PORT --server-key RUN.pub --key NAME.key\n"
            "                        [--workers N] CONFIG [KEY=VALUE ...]\n\n"
            "Runs N (default 1) loaders here for the run whose cache stage listens on\n"
            "HOST:PORT (transport.kind: tcp). --server-key is the run's server.pub (in its\n"
            "run directory); --key is this host's pair from `zeus-pipe keygen NAME`, whose\n"
            "NAME.pub the run lists in transport.allowed_keys. CONFIG must describe the\n"
            "same dataset and transform as the run's (paths as this host sees them).\n"
            "Loaders reconnect when the run's cache stage goes away; one that dies is\n"
            "restarted (after 50 ms, to 1.6 s when it keeps dying); Ctrl-C stops them.\n");
    return status;
}

int cmd_loader(int argc, char **argv)
{
    if (zp_cmd_wants_help(argc, argv))
        return usage(stdout, 0);
    const char *connect = NULL, *server = NULL, *key = NULL;
    long workers = 1;
    char *rest[256];
    int nrest = 0;
    for (int i = 0; i < argc && nrest < 256; i++) {
        if (!strcmp(argv[i], "--connect") && i + 1 < argc)
            connect = argv[++i];
        else if (!strcmp(argv[i], "--server-key") && i + 1 < argc)
            server = argv[++i];
        else if (!strcmp(argv[i], "--key") && i + 1 < argc)
            key = argv[++i];
        else if (!strcmp(argv[i], "--workers") && i + 1 < argc)
            workers = strtol(argv[++i], NULL, 10);
        else
            rest[nrest++] = argv[i];
    }
    if (!connect || !server || !key || workers < 1 || workers > 256)
        return usage(stderr, 2);
    static zp_config_t cfg;
    zp_dataset_t *ds;
    int rc = zp_sup_load(nrest, rest, NULL, &cfg, &ds);
    if (rc)
        return rc < 0 ? usage(stderr, 2) : rc;
    zp_remote_t r = {.connect = connect, .server_key = server, .key = key, .workers = (int)workers};
    rc = zp_remote_run(&cfg, ds, &r);
    zp_dataset_destroy(&ds);
    return rc;
}

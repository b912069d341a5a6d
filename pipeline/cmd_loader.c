/* cmd_loader.c — `zeus-pipe loader --connect HOST:PORT --server-key FILE --key
 * FILE CONFIG`: loader processes on this host for a run on another one, over
 * tcp with CURVE. The run's host must list this key's .pub in its
 * transport.allowed_keys; CONFIG names the dataset as this host sees it. */
#define _GNU_SOURCE
#include "pipeline/cmd.h"
#include "pipeline/keys.h"
#include "pipeline/log.h"
#include "pipeline/stage.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_signal(int sig) { zp_stop = sig; }

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
            "Loaders reconnect when the run's cache stage goes away; Ctrl-C stops them.\n");
    return status;
}

int cmd_loader(int argc, char **argv)
{
    if (zp_wants_help(argc, argv))
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
    static zp_stage_t st;
    int rc = zp_cli_load(nrest, rest, NULL, &st.cfg, &st.meta);
    if (rc)
        return rc < 0 ? usage(stderr, 2) : rc;
    char err[4300];
    if (zp_keys_read_public(server, st.server_pub, err, sizeof err) ||
        zp_keys_read_pair(key, st.pub, st.sec, err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: loader: %s\n", err);
        return 2;
    }
    snprintf(st.connect, sizeof st.connect, "tcp://%s", connect);
    st.name = "loader";
    /* N loaders: fork before any ZeroMQ context exists; each is a process of its own. */
    for (long i = 1; i < workers; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGTERM); /* stops with the first one */
            st.instance = (int)i;
            break;
        }
    }
    zp_log_init("loader", st.instance);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    zp_info("loading for %s", st.connect);
    rc = zp_stage_open(&st) ? 1 : zp_loader_main(&st);
    zp_stage_close(&st);
    if (st.instance == 0)
        while (wait(NULL) > 0)
            ;
    return rc ? rc : zp_stop ? 128 + zp_stop : 0; /* 2: refused by the run (another config) */
}

/* cmd_scale.c — `zeus-pipe scale [RUN] loader=N|+K|-K`: starts or retires
 * loaders of a running pipeline. A retiring loader finishes the tasks it was
 * given first, so no sample is lost or loaded twice. */
#define _GNU_SOURCE
#include "pipeline/cli/cmd.h"
#include "pipeline/base/log.h"
#include "pipeline/base/names.h"
#include "pipeline/net/sock.h"
#include "pipeline/supervisor/supervisor.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>


int cmd_scale(int argc, char **argv)
{
    const char *run = NULL, *what = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], "loader=", 7) && !what)
            what = argv[i];
        else if (argv[i][0] != '-' && !run && !strchr(argv[i], '='))
            run = argv[i];
        else
            what = NULL, run = argv[i], i = argc; /* usage below */
    }
    if (zp_cmd_wants_help(argc, argv) || !what) {
        int help = zp_cmd_wants_help(argc, argv);
        fprintf(help ? stdout : stderr,
                "usage: zeus-pipe scale [RUN] loader=N|+K|-K\n\n"
                "Starts loaders (loader=+2, or a count above the current one) or retires\n"
                "the newest (loader=-1): a retiring loader finishes the tasks it holds,\n"
                "then exits. `zeus-pipe stat` shows the new count within a second.\n"
                "RUN is a run directory or a name under runs/; without it, the only running run.\n");
        return help ? 0 : 2;
    }
    char dir[PATH_MAX];
    int rc = zp_rundir_find(run, dir, sizeof dir);
    if (rc)
        return rc;
    if (!zp_rundir_live_pid(dir)) {
        fprintf(stderr, "zeus-pipe: %s is not running\n", dir);
        return 1;
    }
    zp_msg_t req = {.type = ZP_MSG_CTL};
    snprintf(req.cmd, sizeof req.cmd, "scale %.24s", what);
    zp_frames_t f;
    zp_frames_init(&f);
    zp_msg_t rep;
    char why[256];
    rc = zp_sock_request(dir, zp_names_sock(ZP_SOCK_CONTROL), &req, &f, &rep, why, sizeof why, 3000);
    if (rc) {
        fprintf(stderr, "zeus-pipe: %s: the supervisor did not answer: %s\n", dir,
                rc == ZP_EPROTO ? why : zp_strerror(rc));
    } else if (rep.present & ZP_B(error)) {
        fprintf(stderr, "zeus-pipe: scale: %s\n", rep.error);
        rc = 2;
    } else {
        printf("%s: %s\n", dir, what);
    }
    zp_msg_release(&rep);
    zp_frames_free(&f);
    return rc == 2 ? 2 : rc ? 1 : 0;
}

/* cmd_down.c — `zeus-pipe down [RUN]`: asks a run's supervisor to stop. */
#define _GNU_SOURCE
#include "pipeline/cli/cmd.h"
#include "pipeline/base/log.h"
#include "pipeline/base/names.h"
#include "pipeline/net/sock.h"
#include "pipeline/supervisor/supervisor.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int cmd_down(int argc, char **argv)
{
    if (zp_cmd_wants_help(argc, argv) || argc > 2) {
        fprintf(argc > 2 ? stderr : stdout,
                "usage: zeus-pipe down [RUN]\n\n"
                "Stops a running pipeline cleanly and waits until it has stopped.\n"
                "RUN is a run directory or a name under runs/; without it, the only running run.\n");
        return argc > 2 ? 2 : 0;
    }
    char dir[PATH_MAX];
    int rc = zp_rundir_find(argc > 1 ? argv[1] : NULL, dir, sizeof dir);
    if (rc)
        return rc;
    pid_t pid = zp_rundir_live_pid(dir);
    if (!pid) {
        fprintf(stderr, "zeus-pipe: %s is not running\n", dir);
        return 1;
    }
    zp_msg_t req = {.type = ZP_MSG_CTL};
    snprintf(req.cmd, sizeof req.cmd, "down");
    zp_frames_t f;
    zp_frames_init(&f);
    zp_msg_t rep;
    char why[256];
    rc = zp_sock_request(dir, zp_names_sock(ZP_SOCK_CONTROL), &req, &f, &rep, why, sizeof why, 3000);
    zp_msg_release(&rep);
    zp_frames_free(&f);
    if (rc) {
        fprintf(stderr, "zeus-pipe: %s: the supervisor (pid %d) did not answer: %s\n", dir, (int)pid,
                rc == ZP_EPROTO ? why : zp_strerror(rc));
        return 1;
    }
    for (int i = 0; i < 200 && zp_rundir_live_pid(dir); i++)
        usleep(50000);
    if (zp_rundir_live_pid(dir)) {
        fprintf(stderr, "zeus-pipe: %s: still stopping after 10 s\n", dir);
        return 1;
    }
    printf("stopped %s\n", dir);
    return 0;
}

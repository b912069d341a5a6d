/* cmd_down.c — `zeus-pipe down [RUN]`: asks a run's supervisor to stop. */
#define _GNU_SOURCE
#include "pipeline/cli/cmd.h"
#include "pipeline/log.h"
#include "pipeline/supervisor/rundir.h"
#include "pipeline/sock.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int zp_request(const char *run_dir, const char *sock_name, const zp_msg_t *req, zp_frames_t *f,
               int timeout_ms)
{
    char ep[ZP_ENDPOINT_MAX + 16];
    if (zp_endpoint(ep, sizeof ep, run_dir, sock_name))
        return ZP_EINVAL;
    void *ctx = zmq_ctx_new();
    void *s = zp_sock_open(ctx, ZMQ_REQ, ep, 0, 0);
    int rc = s ? zp_send(s, NULL, req, NULL, NULL, 0, 0) : ZP_EZMQ;
    if (!rc) {
        zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
        rc = zmq_poll(&it, 1, timeout_ms) > 0 ? zp_frames_recv(f, s, 0) : ZP_ETIMEOUT;
    }
    zp_sock_close(&s);
    zmq_ctx_term(ctx);
    return rc;
}

int cmd_down(int argc, char **argv)
{
    if (zp_wants_help(argc, argv) || argc > 2) {
        fprintf(argc > 2 ? stderr : stdout,
                "usage: zeus-pipe down [RUN]\n\n"
                "Stops a running pipeline cleanly and waits until it has stopped.\n"
                "RUN is a run directory or a name under runs/; without it, the only running run.\n");
        return argc > 2 ? 2 : 0;
    }
    char dir[PATH_MAX];
    int rc = zp_find_run(argc > 1 ? argv[1] : NULL, dir, sizeof dir);
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
    rc = zp_request(dir, "control", &req, &f, 3000);
    zp_frames_close(&f);
    if (rc) {
        fprintf(stderr, "zeus-pipe: %s: the supervisor (pid %d) did not answer: %s\n", dir, (int)pid,
                zp_strerror(rc));
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

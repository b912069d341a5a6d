/* frames.c — a multipart message received whole into reusable frames (more
 * than a message may hold are dropped and flagged), and decoded. */
#include "pipeline/net/frames.h"
#include "schemas/errors.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void zp_frames_init(zp_frames_t *f)
{
    memset(f, 0, sizeof *f);
}

void zp_frames_free(zp_frames_t *f)
{
    for (int i = 0; i < f->n; i++)
        zmq_msg_close(&f->part[i]);
    f->n = 0;
    f->truncated = 0;
}

int zp_frames_recv(zp_frames_t *f, void *sock, int flags)
{
    zp_frames_free(f);
    int more = 1;
    while (more) {
        zmq_msg_t tmp, *dst = f->n < ZP_MAX_FRAMES + 2 ? &f->part[f->n] : &tmp;
        zmq_msg_init(dst);
        if (zmq_msg_recv(dst, sock, f->n ? 0 : flags) < 0) {
            int e = errno;
            zmq_msg_close(dst);
            zp_frames_free(f);
            if (e == EAGAIN)
                return -EAGAIN;
            return (e == EINTR || e == ETERM) ? ZP_ESTOP : ZP_EZMQ;
        }
        more = zmq_msg_more(dst);
        if (dst == &tmp) {
            zmq_msg_close(&tmp);
            f->truncated = 1;
        } else {
            f->n++;
        }
    }
    return 0;
}

int zp_frames_decode(zp_frames_t *f, int first, zp_msg_t *m, char *why, size_t len)
{
    if (f->truncated) {
        memset(m, 0, sizeof *m);
        snprintf(why, len, "too many frames");
        return ZP_EPROTO;
    }
    const void *data[ZP_MAX_FRAMES];
    size_t sizes[ZP_MAX_FRAMES];
    int n = f->n - first;
    if (n > ZP_MAX_FRAMES) {
        memset(m, 0, sizeof *m);
        snprintf(why, len, "%d frames, at most %d", n, ZP_MAX_FRAMES);
        return ZP_EPROTO;
    }
    for (int i = 0; i < n; i++) {
        data[i] = zmq_msg_data(&f->part[first + i]);
        sizes[i] = zmq_msg_size(&f->part[first + i]);
    }
    return zp_msg_decode(m, data, sizes, n, why, len);
}

/* frames.h — a received multipart ZeroMQ message kept as its frames, and
 * decoded as one of schemas/msg.h's messages. */
#ifndef ZP_FRAMES_H
#define ZP_FRAMES_H

#include "schemas/msg.h"

#include <stddef.h>
#include <zmq.h>

/* A received multipart message: frames stay owned here until zp_frames_free()
 * or the next zp_frames_recv(). An identity frame (ROUTER) can be peeled first. */
typedef struct {
    zmq_msg_t part[ZP_MAX_FRAMES + 2];
    int n;         /* frames kept */
    int truncated; /* more frames arrived than fit; they were dropped */
} zp_frames_t;

void zp_frames_init(zp_frames_t *f);
/* Receives one whole message. Returns 0, ZP_ESTOP on EINTR/ETERM, -EAGAIN with DONTWAIT. */
int zp_frames_recv(zp_frames_t *f, void *sock, int flags);
void zp_frames_free(zp_frames_t *f);
/* Decodes frames [first, n) as a message; counts nothing, logs nothing. */
int zp_frames_decode(zp_frames_t *f, int first, zp_msg_t *m, char *why, size_t len);

#endif

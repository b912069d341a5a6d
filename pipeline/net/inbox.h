/* inbox.h — a socket's messages, each received whole, decoded and handed to
 * the route for its type; what does not decode, or has no route, dropped and
 * counted, never fatal. */
#ifndef ZP_INBOX_H
#define ZP_INBOX_H

#include "pipeline/net/frames.h"

#include <stdint.h>

/* What a stage does with one type of message it receives: ctx is the stage's
 * own state; m and the frames behind it are valid during the call. Returns
 * 0 or an error code that ends the stage's loop. */
typedef int (*zp_on_msg_fn)(void *ctx, const zp_msg_t *m, zp_frames_t *f);
typedef struct {
    int type; /* ZP_MSG_* */
    zp_on_msg_fn on;
} zp_route_t;
/* Entries of a static array (a route table). */
#define ZP_COUNT(a) ((int)(sizeof(a) / sizeof *(a)))

/* Where a socket's messages go: the routes by type, the frame the message
 * starts at (1 after a ROUTER's identity frame), who sends them (for the
 * warning) and the count of those dropped. */
typedef struct {
    const zp_route_t *routes;
    int nroutes;
    int first;
    const char *from; /* "the cache stage", "a loader", ... */
    int64_t *dropped; /* malformed or unexpected messages, dropped and counted */
    int64_t *errors;  /* also counted here when not NULL: the stage's stats.errors */
    /* Called after a message is dropped, when not NULL: a REP socket must
     * answer every request, even one it cannot read. */
    void (*on_drop)(void *ctx, const char *why);
} zp_inbox_t;

/* Receives one message from sock into f (flags: 0 or ZMQ_DONTWAIT), decodes
 * it and calls the route for its type. A message that does not decode, or of
 * a type with no route, is dropped: counted in *in->dropped and warned about
 * (zp_warn_limited), naming in->from; counted in *in->errors too when set,
 * and handed to in->on_drop when set.
 * Returns the route's result; 0 when
 * nothing was waiting (ZMQ_DONTWAIT) or the message was dropped; ZP_ESTOP or
 * ZP_EZMQ when the socket failed. */
int zp_inbox_recv(const zp_inbox_t *in, void *sock, int flags, zp_frames_t *f, void *ctx);
/* Counts and warns about a message dropped for a reason its route found
 * (in->errors too when set). */
void zp_inbox_drop(const zp_inbox_t *in, const char *why);

#endif

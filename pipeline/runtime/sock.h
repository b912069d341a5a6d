/* sock.h — ZeroMQ plumbing shared by the stages: endpoints under the run's
 * sock/ folder, multipart receive into a reusable frame set, and send helpers
 * that pair a msgpack header with raw payload frames. */
#ifndef ZP_SOCK_H
#define ZP_SOCK_H

#include "schemas/msg.h"

#include <stddef.h>
#include <zmq.h>

#define ZP_ENDPOINT_MAX 112 /* sun_path is 108 bytes */

/* "ipc://<run_dir>/sock/<name>.ipc" into buf; ZP_EINVAL when the path does not
 * fit a UNIX socket address (choose a shorter run.dir). run_dir is absolute. */
int zp_endpoint(char *buf, size_t len, const char *run_dir, const char *name);

/* Creates a socket of `type` into *out, binds (bind != 0) or connects it.
 * LINGER is set to `linger_ms`. Returns 0, or ZP_EZMQ with *out NULL and the
 * endpoint and the zmq error logged. Close it with zp_sock_destroy. */
int zp_sock_create(void **out, void *ctx, int type, const char *endpoint, int bind, int linger_ms);
/* Closes the socket (its LINGER applies). Safe on NULL; nulls *sock. */
void zp_sock_destroy(void **sock);


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

/* This thread's buffer `which` (a message header being sent, an event being
 * built), emptied: reused, so steady state does no allocation, and freed when
 * the thread exits (a client program, or a test, may send from several
 * threads). NULL when out of memory. Valid until this thread's next call with
 * the same `which`. */
enum { ZP_BUF_HEADER, ZP_BUF_EVENT, ZP_BUF_COUNT };
msgpack_sbuffer *zp_thread_buffer(int which);

/* Sends an optional routing identity, the header `m` encodes, and `nparts`
 * payload buffers (copied by zmq). Returns 0 or ZP_EZMQ / -EAGAIN. */
int zp_send(void *sock, const zmq_msg_t *identity, const zp_msg_t *m, const void *const *parts,
            const size_t *sizes, int nparts, int flags);
/* Sends the header `m` encodes, then `nparts` messages whose ownership moves
 * to ZeroMQ (no copy; each is left empty). The caller sends any identity
 * frame first with ZMQ_SNDMORE. */
int zp_send_parts(void *sock, const zp_msg_t *m, zmq_msg_t *parts, int nparts);
/* Same, with a prebuilt header buffer. */
int zp_send_raw(void *sock, const zmq_msg_t *identity, const void *hdr, size_t hdr_len,
                const void *const *parts, const size_t *sizes, int nparts, int flags);

/* One request and its reply on a run's socket RUN/sock/NAME.ipc (a REP:
 * the supervisor's "control", the logger's "stat"), in a context of its own.
 * Returns 0 with the reply decoded into rep (a CTL_REP for a CTL, a STAT_REP
 * for a STAT_REQ; it points into f, the caller's, zp_frames_init'ed: release
 * rep, then close f); ZP_EINVAL when the path is too long for a socket,
 * ZP_EZMQ when it cannot connect or send, ZP_ETIMEOUT when no reply came
 * within timeout_ms, ZP_EPROTO when the reply is malformed or of another
 * type (the reason in why). */
int zp_request(const char *run_dir, const char *sock_name, const zp_msg_t *req, zp_frames_t *f,
               zp_msg_t *rep, char *why, size_t whylen, int timeout_ms);

#endif

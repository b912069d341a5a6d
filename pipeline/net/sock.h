/* sock.h — ZeroMQ sockets as the stages use them: endpoints under the run's
 * sock/ folder, sockets created and destroyed, send helpers that pair a
 * msgpack header with raw payload frames, and one request with its reply.
 * Receiving is frames.h (a message's frames) and inbox.h (decode, drop,
 * dispatch). */
#ifndef ZP_SOCK_H
#define ZP_SOCK_H

#include "pipeline/net/frames.h"
#include "schemas/msg.h"

#include <stddef.h>
#include <zmq.h>

#define ZP_ENDPOINT_MAX 112 /* sun_path is 108 bytes */

/* "ipc://<run_dir>/sock/<name>.ipc" into buf; ZP_EINVAL when the path does not
 * fit a UNIX socket address (choose a shorter run.dir). run_dir is absolute. */
int zp_sock_endpoint(char *buf, size_t len, const char *run_dir, const char *name);

/* The largest message frame this process's sockets accept (ZMQ_MAXMSGSIZE),
 * set once by a stage from its run's largest legitimate frame: a peer that
 * announces a bigger one is disconnected by libzmq before anything is
 * allocated for it. 0 (the default): no bound. */
void zp_sock_set_max_msg(int64_t bytes);
/* Applies that bound to socket s (zp_sock_create does). */
void zp_sock_limit(void *s);

/* Creates a socket of `type` into *out, binds (bind != 0) or connects it.
 * LINGER is set to `linger_ms`, ZMQ_MAXMSGSIZE to the process's bound.
 * Returns 0, or ZP_EZMQ with *out NULL and the endpoint and the zmq error
 * logged. Close it with zp_sock_destroy. */
int zp_sock_create(void **out, void *ctx, int type, const char *endpoint, int bind, int linger_ms);
/* Closes the socket (its LINGER applies). Safe on NULL; nulls *sock. */
void zp_sock_destroy(void **sock);

/* This thread's buffer `which` (a message header being sent, an event being
 * built), emptied: reused, so steady state does no allocation, and freed when
 * the thread exits (a client program, or a test, may send from several
 * threads). NULL when out of memory. Valid until this thread's next call with
 * the same `which`. */
enum { ZP_BUF_HEADER, ZP_BUF_EVENT, ZP_BUF_COUNT };
msgpack_sbuffer *zp_sock_thread_buffer(int which);

/* Sends an optional routing identity, the header `m` encodes, and `nparts`
 * payload buffers (copied by zmq). Returns 0 or ZP_EZMQ / -EAGAIN. */
int zp_sock_send(void *sock, const zmq_msg_t *identity, const zp_msg_t *m, const void *const *parts,
            const size_t *sizes, int nparts, int flags);
/* Sends the header `m` encodes, then `nparts` messages whose ownership moves
 * to ZeroMQ (no copy; each is left empty). The caller sends any identity
 * frame first with ZMQ_SNDMORE. */
int zp_sock_send_parts(void *sock, const zp_msg_t *m, zmq_msg_t *parts, int nparts);
/* Same, with a prebuilt header buffer. */
int zp_sock_send_raw(void *sock, const zmq_msg_t *identity, const void *hdr, size_t hdr_len,
                const void *const *parts, const size_t *sizes, int nparts, int flags);

/* One request and its reply on a run's socket RUN/sock/NAME.ipc (a REP:
 * the supervisor's "control", the logger's "stat"), in a context of its own.
 * Returns 0 with the reply decoded into rep (a CTL_REP for a CTL, a STAT_REP
 * for a STAT_REQ; it points into f, the caller's, zp_frames_init'ed: release
 * rep, then close f); ZP_EINVAL when the path is too long for a socket,
 * ZP_EZMQ when it cannot connect or send, ZP_ETIMEOUT when no reply came
 * within timeout_ms, ZP_EPROTO when the reply is malformed or of another
 * type (the reason in why). */
int zp_sock_request(const char *run_dir, const char *sock_name, const zp_msg_t *req, zp_frames_t *f,
               zp_msg_t *rep, char *why, size_t whylen, int timeout_ms);

#endif

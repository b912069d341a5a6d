/* sock.c — endpoints, sockets, sends with a msgpack header and raw payload
 * frames, each thread's reusable send buffers, and one request with its reply. */
#define _GNU_SOURCE
#include "pipeline/net/sock.h"
#include "pipeline/base/log.h"
#include "pipeline/base/resources.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

int zp_sock_endpoint(char *buf, size_t len, const char *run_dir, const char *name)
{
    int n = snprintf(buf, len, "ipc://%s/sock/%s.ipc", run_dir, name);
    if (n < 0 || (size_t)n >= len || n - 6 >= 107)
        return ZP_EINVAL;
    return 0;
}

static int64_t max_msg; /* zp_sock_set_max_msg */

void zp_sock_set_max_msg(int64_t bytes) { max_msg = bytes; }

void zp_sock_limit(void *s)
{
    if (max_msg > 0)
        zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max_msg, sizeof max_msg);
}

int zp_sock_create(void **out, void *ctx, int type, const char *endpoint, int bind, int linger_ms)
{
    void *s = *out = zmq_socket(ctx, type);
    if (!s) {
        zp_error("zmq_socket: %s", zmq_strerror(errno));
        return ZP_EZMQ;
    }
    zmq_setsockopt(s, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
    zp_sock_limit(s);
    if (bind && zp_resources_add_endpoint(endpoint)) { /* recorded before the file exists */
        zp_sock_destroy(out);
        return ZP_EZMQ;
    }
    if (bind ? zmq_bind(s, endpoint) : zmq_connect(s, endpoint)) {
        zp_error("%s %s: %s", bind ? "bind" : "connect", endpoint, zmq_strerror(errno));
        zp_sock_destroy(out);
        return ZP_EZMQ;
    }
    return 0;
}

void zp_sock_destroy(void **sock)
{
    if (sock && *sock) {
        zmq_close(*sock);
        *sock = NULL;
    }
}

int zp_sock_send_raw(void *sock, const zmq_msg_t *identity, const void *hdr, size_t hdr_len,
                const void *const *parts, const size_t *sizes, int nparts, int flags)
{
    if (identity) {
        zmq_msg_t id;
        zmq_msg_init(&id);
        zmq_msg_copy(&id, (zmq_msg_t *)identity);
        if (zmq_msg_send(&id, sock, ZMQ_SNDMORE | flags) < 0) {
            int e = errno;
            zmq_msg_close(&id);
            return e == EAGAIN ? -EAGAIN : ZP_EZMQ;
        }
    }
    if (zmq_send(sock, hdr, hdr_len, (nparts ? ZMQ_SNDMORE : 0) | flags) < 0)
        return errno == EAGAIN ? -EAGAIN : ZP_EZMQ;
    for (int i = 0; i < nparts; i++)
        if (zmq_send(sock, parts[i], sizes[i], (i + 1 < nparts ? ZMQ_SNDMORE : 0)) < 0)
            return ZP_EZMQ;
    return 0;
}

/* ---- header buffers, one per thread -------------------------------------------------------- */

static pthread_key_t g_buf_key[ZP_BUF_COUNT];
static pthread_once_t g_buf_once = PTHREAD_ONCE_INIT;

static void buf_free(void *p) { msgpack_sbuffer_free(p); }
static void buf_keys(void)
{
    for (int i = 0; i < ZP_BUF_COUNT; i++)
        pthread_key_create(&g_buf_key[i], buf_free);
}

msgpack_sbuffer *zp_sock_thread_buffer(int which)
{
    pthread_once(&g_buf_once, buf_keys);
    msgpack_sbuffer *b = pthread_getspecific(g_buf_key[which]);
    if (!b && (b = msgpack_sbuffer_new()) && pthread_setspecific(g_buf_key[which], b)) {
        msgpack_sbuffer_free(b);
        b = NULL;
    }
    if (b)
        b->size = 0;
    return b;
}

int zp_sock_send_parts(void *sock, const zp_msg_t *m, zmq_msg_t *parts, int nparts)
{
    msgpack_sbuffer *sb = zp_sock_thread_buffer(ZP_BUF_HEADER);
    int rc = sb ? zp_msg_encode(m, sb) : ZP_ENOMEM;
    if (rc)
        return rc;
    if (zmq_send(sock, sb->data, sb->size, nparts ? ZMQ_SNDMORE : 0) < 0)
        return ZP_EZMQ;
    for (int i = 0; i < nparts; i++)
        if (zmq_msg_send(&parts[i], sock, i + 1 < nparts ? ZMQ_SNDMORE : 0) < 0)
            return ZP_EZMQ;
    return 0;
}

int zp_sock_send(void *sock, const zmq_msg_t *identity, const zp_msg_t *m, const void *const *parts,
            const size_t *sizes, int nparts, int flags)
{
    msgpack_sbuffer *sb = zp_sock_thread_buffer(ZP_BUF_HEADER);
    int rc = sb ? zp_msg_encode(m, sb) : ZP_ENOMEM;
    if (!rc)
        rc = zp_sock_send_raw(sock, identity, sb->data, sb->size, parts, sizes, nparts, flags);
    return rc;
}

int zp_sock_request(const char *run_dir, const char *sock_name, const zp_msg_t *req, zp_frames_t *f,
               zp_msg_t *rep, char *why, size_t whylen, int timeout_ms)
{
    memset(rep, 0, sizeof *rep);
    snprintf(why, whylen, "no reply");
    char ep[ZP_ENDPOINT_MAX + 16];
    if (zp_sock_endpoint(ep, sizeof ep, run_dir, sock_name))
        return ZP_EINVAL;
    void *ctx = zmq_ctx_new(), *s = NULL;
    int rc = !ctx || zp_sock_create(&s, ctx, ZMQ_REQ, ep, 0, 0) ? ZP_EZMQ
                                                                  : zp_sock_send(s, NULL, req, NULL, NULL, 0, 0);
    if (!rc) {
        zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
        rc = zmq_poll(&it, 1, timeout_ms) > 0 ? zp_frames_recv(f, s, 0) : ZP_ETIMEOUT;
    }
    zp_sock_destroy(&s);
    if (ctx)
        zmq_ctx_term(ctx);
    if (rc)
        return rc;
    uint32_t want = req->type == ZP_MSG_STAT_REQ ? ZP_MSG_STAT_REP : ZP_MSG_CTL_REP;
    if (zp_frames_decode(f, 0, rep, why, whylen))
        return ZP_EPROTO;
    if (rep->type != want) {
        snprintf(why, whylen, "a %s, not a %s", zp_msg_name(rep->type), zp_msg_name(want));
        zp_msg_release(rep);
        memset(rep, 0, sizeof *rep);
        return ZP_EPROTO;
    }
    return 0;
}

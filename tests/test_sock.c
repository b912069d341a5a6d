/* Unit tests of the ZeroMQ plumbing every stage shares (pipeline/net/sock.h),
 * over inproc sockets in one process: endpoints that do not fit a UNIX
 * socket address are refused; a multipart message is received whole and
 * decoded, with a ROUTER's identity peeled; the inbox dispatches by type,
 * and drops and counts what does not decode or has no route. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pipeline/base/log.h"
#include "pipeline/net/inbox.h"
#include "pipeline/net/sock.h"
#include "schemas/msg.h"

static void *ctx, *in, *out; /* a PULL bound and a PUSH connected, inproc */
static zp_frames_t f;

static int setup(void **state)
{
    (void)state;
    ctx = zmq_ctx_new();
    zp_frames_init(&f);
    return ctx && !zp_sock_create(&in, ctx, ZMQ_PULL, "inproc://test", 1, 0) &&
           !zp_sock_create(&out, ctx, ZMQ_PUSH, "inproc://test", 0, 0) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    zp_frames_free(&f);
    zp_sock_destroy(&in);
    zp_sock_destroy(&out);
    return zmq_ctx_term(ctx);
}

/* ---- endpoints ------------------------------------------------------------------------ */

static void an_endpoint_is_the_runs_sock_folder(void **state)
{
    (void)state;
    char buf[ZP_ENDPOINT_MAX];
    assert_int_equal(zp_sock_endpoint(buf, sizeof buf, "/runs/a", "fetch"), 0);
    assert_string_equal(buf, "ipc:///runs/a/sock/fetch.ipc");
}

static void an_endpoint_longer_than_a_unix_socket_address_is_refused(void **state)
{
    (void)state;
    char run[200], buf[512];
    /* run + "/sock/x.ipc" is strlen(run) + 11 characters; at most 106 are taken (sun_path: 108 bytes) */
    memset(run, 'r', sizeof run);
    run[0] = '/';
    run[96] = 0; /* a path of 107 characters */
    assert_int_equal(zp_sock_endpoint(buf, sizeof buf, run, "x"), ZP_EINVAL);
    run[95] = 0; /* 106 */
    assert_int_equal(zp_sock_endpoint(buf, sizeof buf, run, "x"), 0);
    assert_int_equal(strlen(buf), 6 + 106);
    /* a buffer too small is refused too, never a cut endpoint */
    assert_int_equal(zp_sock_endpoint(buf, 20, "/runs/a", "fetch"), ZP_EINVAL);
}

static void a_socket_that_cannot_connect_is_an_error_and_null(void **state)
{
    (void)state;
    void *s;
    assert_int_equal(zp_sock_create(&s, ctx, ZMQ_PUSH, "nonsense://x", 0, 0), ZP_EZMQ);
    assert_null(s);
    void *dup;
    assert_int_equal(zp_sock_create(&dup, ctx, ZMQ_PULL, "inproc://test", 1, 0), ZP_EZMQ); /* bound already */
    assert_null(dup);
    zp_sock_destroy(&dup); /* safe on NULL */
}

/* ---- frames --------------------------------------------------------------------------- */

static void send_task(void *sock, uint64_t id, const uint32_t *idx, int n)
{
    zp_msg_t m = {.type = ZP_MSG_TASK, .id = id, .split = 1, .n = (uint64_t)n};
    const void *parts[1] = {idx};
    size_t sizes[1] = {4 * (size_t)n};
    assert_int_equal(zp_sock_send(sock, NULL, &m, parts, sizes, 1, 0), 0);
}

static void a_multipart_message_is_received_whole_and_decoded(void **state)
{
    (void)state;
    assert_int_equal(zp_frames_recv(&f, in, ZMQ_DONTWAIT), -EAGAIN); /* nothing yet */
    const uint32_t idx[3] = {7, 8, 9};
    send_task(out, 42, idx, 3);
    assert_int_equal(zp_frames_recv(&f, in, 0), 0);
    assert_int_equal(f.n, 2);
    assert_int_equal(f.truncated, 0);
    zp_msg_t m;
    char why[256];
    assert_int_equal(zp_frames_decode(&f, 0, &m, why, sizeof why), 0);
    assert_int_equal(m.type, ZP_MSG_TASK);
    assert_int_equal(m.id, 42);
    assert_int_equal(m.split, 1);
    assert_int_equal(m.n, 3);
    assert_int_equal(m.nframes, 2);
    assert_int_equal(m.frame_size[1], 12);
    assert_memory_equal(m.frame[1], idx, 12);
    zp_msg_release(&m);
}

static void more_frames_than_fit_are_received_and_refused(void **state)
{
    (void)state;
    for (int i = 0; i < ZP_MAX_FRAMES + 4; i++)
        assert_true(zmq_send(out, "x", 1, i + 1 < ZP_MAX_FRAMES + 4 ? ZMQ_SNDMORE : 0) == 1);
    assert_int_equal(zp_frames_recv(&f, in, 0), 0); /* the whole message is taken off */
    assert_int_equal(f.truncated, 1);
    assert_int_equal(f.n, ZP_MAX_FRAMES + 2);
    zp_msg_t m;
    char why[256];
    assert_int_equal(zp_frames_decode(&f, 0, &m, why, sizeof why), ZP_EPROTO);
    assert_string_equal(why, "too many frames");
    /* the next message is read from its start */
    send_task(out, 1, (const uint32_t[]){5}, 1);
    assert_int_equal(zp_frames_recv(&f, in, 0), 0);
    assert_int_equal(f.truncated, 0);
    assert_int_equal(zp_frames_decode(&f, 0, &m, why, sizeof why), 0);
    assert_int_equal(m.id, 1);
    zp_msg_release(&m);
}

static void a_routers_identity_frame_is_peeled(void **state)
{
    (void)state;
    void *router, *dealer;
    assert_int_equal(zp_sock_create(&router, ctx, ZMQ_ROUTER, "inproc://router", 1, 0), 0);
    assert_int_equal(zp_sock_create(&dealer, ctx, ZMQ_DEALER, "inproc://router", 0, 0), 0);
    zp_msg_t m = {.type = ZP_MSG_READY, .credit = 3};
    assert_int_equal(zp_sock_send(dealer, NULL, &m, NULL, NULL, 0, 0), 0);
    assert_int_equal(zp_frames_recv(&f, router, 0), 0);
    assert_int_equal(f.n, 2);
    char why[256];
    assert_int_equal(zp_frames_decode(&f, 1, &m, why, sizeof why), 0);
    assert_int_equal(m.type, ZP_MSG_READY);
    assert_int_equal(m.credit, 3);
    zp_msg_release(&m);
    /* the reply goes back through the same identity */
    zp_msg_t rep = {.type = ZP_MSG_REFUSED};
    snprintf(rep.error, sizeof rep.error, "another dataset");
    assert_int_equal(zp_sock_send(router, &f.part[0], &rep, NULL, NULL, 0, 0), 0);
    zp_frames_t g;
    zp_frames_init(&g);
    assert_int_equal(zp_frames_recv(&g, dealer, 0), 0);
    assert_int_equal(zp_frames_decode(&g, 0, &m, why, sizeof why), 0);
    assert_int_equal(m.type, ZP_MSG_REFUSED);
    assert_string_equal(m.error, "another dataset");
    zp_msg_release(&m);
    zp_frames_free(&g);
    zp_frames_free(&f);
    zp_sock_destroy(&dealer);
    zp_sock_destroy(&router);
}

static void send_parts_moves_the_payload_into_zeromq(void **state)
{
    (void)state;
    uint32_t idx[2] = {11, 12};
    zmq_msg_t part;
    zmq_msg_init_size(&part, sizeof idx);
    memcpy(zmq_msg_data(&part), idx, sizeof idx);
    zp_msg_t m = {.type = ZP_MSG_TASK, .id = 5, .split = 0, .n = 2};
    assert_int_equal(zp_sock_send_parts(out, &m, &part, 1), 0);
    assert_int_equal(zmq_msg_size(&part), 0); /* left empty: zmq owns the bytes now */
    zmq_msg_close(&part);
    assert_int_equal(zp_frames_recv(&f, in, 0), 0);
    char why[256];
    assert_int_equal(zp_frames_decode(&f, 0, &m, why, sizeof why), 0);
    assert_memory_equal(m.frame[1], idx, sizeof idx);
    zp_msg_release(&m);
}

static void a_context_shut_down_stops_a_waiting_receive(void **state)
{
    (void)state;
    zmq_ctx_shutdown(ctx);
    assert_int_equal(zp_frames_recv(&f, in, 0), ZP_ESTOP);
    assert_int_equal(f.n, 0);
}

/* ---- the inbox ------------------------------------------------------------------------ */

typedef struct {
    int ready, tasks;
    uint64_t credit;
    int answer; /* what the TASK route returns */
} seen_t;

static int on_ready(void *c, const zp_msg_t *m, zp_frames_t *frames)
{
    seen_t *s = c;
    s->ready++;
    s->credit = m->credit;
    assert_ptr_equal(frames, &f);
    return 0;
}

static int on_task(void *c, const zp_msg_t *m, zp_frames_t *frames)
{
    seen_t *s = c;
    s->tasks++;
    assert_int_equal(m->frame_size[1], 4 * m->n); /* the payload is there during the call */
    assert_int_equal(frames->n, 2);
    return s->answer;
}

static const zp_route_t ROUTES[] = {{ZP_MSG_READY, on_ready}, {ZP_MSG_TASK, on_task}};

static void the_inbox_dispatches_by_type(void **state)
{
    (void)state;
    int64_t dropped = 0;
    zp_inbox_t box = {.routes = ROUTES, .nroutes = 2, .first = 0, .from = "a test", .dropped = &dropped};
    seen_t s = {0};
    assert_int_equal(zp_inbox_recv(&box, in, ZMQ_DONTWAIT, &f, &s), 0); /* nothing waiting */
    zp_msg_t m = {.type = ZP_MSG_READY, .credit = 9};
    assert_int_equal(zp_sock_send(out, NULL, &m, NULL, NULL, 0, 0), 0);
    send_task(out, 2, (const uint32_t[]){1, 2}, 2);
    assert_int_equal(zp_inbox_recv(&box, in, 0, &f, &s), 0);
    assert_int_equal(zp_inbox_recv(&box, in, 0, &f, &s), 0);
    assert_int_equal(s.ready, 1);
    assert_int_equal(s.credit, 9);
    assert_int_equal(s.tasks, 1);
    assert_int_equal(dropped, 0);
    /* a route's error ends the caller's loop: it comes back as is */
    s.answer = ZP_EDATA;
    send_task(out, 3, (const uint32_t[]){1}, 1);
    assert_int_equal(zp_inbox_recv(&box, in, 0, &f, &s), ZP_EDATA);
    assert_int_equal(s.tasks, 2);
}

static void malformed_or_unexpected_messages_are_dropped_and_counted(void **state)
{
    (void)state;
    int64_t dropped = 0;
    zp_inbox_t box = {.routes = ROUTES, .nroutes = 2, .first = 0, .from = "a test", .dropped = &dropped};
    seen_t s = {0};
    assert_true(zmq_send(out, "\xc1garbage", 8, 0) == 8); /* not msgpack */
    assert_int_equal(zp_inbox_recv(&box, in, 0, &f, &s), 0);
    assert_int_equal(dropped, 1);
    zp_msg_t m = {.type = ZP_MSG_TASK, .id = 1, .n = 2}; /* says 2 indices, carries 1 */
    const void *parts[1] = {"\1\0\0\0"};
    size_t sizes[1] = {4};
    assert_int_equal(zp_sock_send(out, NULL, &m, parts, sizes, 1, 0), 0);
    assert_int_equal(zp_inbox_recv(&box, in, 0, &f, &s), 0);
    assert_int_equal(dropped, 2);
    m = (zp_msg_t){.type = ZP_MSG_HEARTBEAT}; /* well formed, but no route for it */
    assert_int_equal(zp_sock_send(out, NULL, &m, NULL, NULL, 0, 0), 0);
    assert_int_equal(zp_inbox_recv(&box, in, 0, &f, &s), 0);
    assert_int_equal(dropped, 3);
    assert_int_equal(s.ready + s.tasks, 0); /* no route saw any of them */
    /* and the inbox goes on with the next good one */
    m = (zp_msg_t){.type = ZP_MSG_READY, .credit = 1};
    assert_int_equal(zp_sock_send(out, NULL, &m, NULL, NULL, 0, 0), 0);
    assert_int_equal(zp_inbox_recv(&box, in, 0, &f, &s), 0);
    assert_int_equal(s.ready, 1);
    assert_int_equal(dropped, 3);
    /* a message without the frame the header should be in (first = 1 behind a ROUTER) */
    zp_inbox_t routed = {.routes = ROUTES, .nroutes = 2, .first = 1, .from = "a test", .dropped = &dropped};
    assert_true(zmq_send(out, "id", 2, 0) == 2);
    assert_int_equal(zp_inbox_recv(&routed, in, 0, &f, &s), 0);
    assert_int_equal(dropped, 4);
    zp_inbox_drop(&box, "a reason a route found");
    assert_int_equal(dropped, 5);
}

int main(void)
{
    zp_log_set_level(ZP_LOG_ERROR); /* the drop warnings are expected */
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(an_endpoint_is_the_runs_sock_folder),
        T(an_endpoint_longer_than_a_unix_socket_address_is_refused),
        T(a_socket_that_cannot_connect_is_an_error_and_null),
        T(a_multipart_message_is_received_whole_and_decoded),
        T(more_frames_than_fit_are_received_and_refused),
        T(a_routers_identity_frame_is_peeled),
        T(send_parts_moves_the_payload_into_zeromq),
        T(a_context_shut_down_stops_a_waiting_receive),
        T(the_inbox_dispatches_by_type),
        T(malformed_or_unexpected_messages_are_dropped_and_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests of the trainer ranks' sums (pipeline/ring/comm.c), with the
 * ranks as threads of this process over the ipc socket of a scratch run
 * directory: every rank ends with the same totals, reduction after
 * reduction; one rank sums alone with no socket; a rank whose part has
 * another size stops the sum at rank 0 with ZP_EPROTO; a bad rank or world
 * is refused. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "pipeline/stage/stage.h"
#include "schemas/errors.h"
#include "pipeline/ring/comm.h"

#define WORLD 3

static char run_dir[64];
static void *zctx;

typedef struct {
    zp_stage_t st;
    int rank, world;
    size_t n;          /* values this rank sends */
    int rc[2];         /* of its two sums */
    float v[2][2];
    double s[2][2];
} rank_t;

static void stage_init(zp_stage_t *st, int timeout_s)
{
    memset(st, 0, sizeof *st);
    snprintf(st->run_dir, sizeof st->run_dir, "%s", run_dir);
    st->zctx = zctx;
    st->cfg.comm_timeout_s = timeout_s;
    st->stats.next_ns = INT64_MAX; /* no stats events: there is no logger */
    zp_timer_init(&st->timers, NULL, NULL);
}

static void *rank_main(void *arg)
{
    rank_t *r = arg;
    zp_comm_t *c;
    r->rc[0] = r->rc[1] = -1;
    if (zp_comm_create(&c, &r->st, r->rank, r->world, 0))
        return NULL;
    for (int k = 0; k < 2; k++) {
        r->v[k][0] = (float)(r->rank + 1), r->v[k][1] = (float)(10 * r->rank + k);
        r->s[k][0] = r->rank, r->s[k][1] = 0.5;
        if ((r->rc[k] = zp_comm_sum(c, r->v[k], r->n, r->s[k], 2)))
            break;
    }
    zp_comm_destroy(&c); /* no cmocka assertion in a thread: it would jump across threads */
    return NULL;
}

/* Every rank waits up to timeout_s, rank 0 (who sums) up to root_timeout_s. */
static void run_ranks(rank_t *r, int timeout_s, int root_timeout_s)
{
    pthread_t th[WORLD];
    for (int i = 0; i < WORLD; i++) {
        stage_init(&r[i].st, i ? timeout_s : root_timeout_s);
        r[i].rank = i, r[i].world = WORLD;
        if (!r[i].n)
            r[i].n = 2;
        assert_int_equal(pthread_create(&th[i], NULL, rank_main, &r[i]), 0);
    }
    for (int i = 0; i < WORLD; i++)
        pthread_join(th[i], NULL);
}

static void every_rank_ends_with_the_same_totals(void **state)
{
    (void)state;
    rank_t r[WORLD] = {0};
    run_ranks(r, 10, 10);
    for (int i = 0; i < WORLD; i++)
        for (int k = 0; k < 2; k++) {
            assert_int_equal(r[i].rc[k], 0);
            assert_true(r[i].v[k][0] == 6.0f);                /* 1 + 2 + 3 */
            assert_true(r[i].v[k][1] == (float)(30 + 3 * k)); /* 0 + 10 + 20, + k each */
            assert_true(r[i].s[k][0] == 3.0 && r[i].s[k][1] == 1.5);
        }
}

static void one_rank_sums_alone(void **state)
{
    (void)state;
    zp_stage_t st;
    stage_init(&st, 10);
    zp_comm_t *c;
    assert_int_equal(zp_comm_create(&c, &st, 0, 1, 0), 0);
    float v[2] = {1.5f, -2};
    double s[1] = {7};
    assert_int_equal(zp_comm_sum(c, v, 2, s, 1), 0);
    assert_true(v[0] == 1.5f && v[1] == -2 && s[0] == 7);
    assert_int_equal(zp_comm_last_ns(c), 0);
    assert_int_equal(zp_comm_world(c), 1);
    zp_comm_destroy(&c);
    zp_comm_destroy(&c); /* safe twice */
}

static void a_part_of_another_size_stops_the_sum(void **state)
{
    (void)state;
    rank_t r[WORLD] = {0};
    r[2].n = 1; /* rank 2 sends one value, the others two */
    run_ranks(r, 1, 30); /* rank 0 waits long enough for the bad part, however slow the machine */
    assert_int_equal(r[0].rc[0], ZP_EPROTO);
    /* the others get no answer from rank 0 */
    assert_true(r[1].rc[0] != 0 && r[2].rc[0] != 0);
}

static void on_alarm(int sig) { (void)sig; }

/* A user's program handles its own signals (zp_stop is never set there):
 * with ZP_COMM_SIGNAL_STOPS a handled signal ends rank 0's wait for a rank
 * that never comes, long before trainer.comm_timeout_s (ZP_ETIMEOUT). */
static void a_handled_signal_ends_the_wait_with_signal_stops(void **state)
{
    (void)state;
    zp_stage_t st;
    stage_init(&st, 600);
    /* a socket of its own: a rank of the test before lingers (up to 2 s) with
     * a REDUCE for whoever binds the run's comm socket next */
    char sock[sizeof st.run_dir + 8];
    snprintf(st.run_dir, sizeof st.run_dir, "%s/signal", run_dir);
    snprintf(sock, sizeof sock, "%s/sock", st.run_dir);
    assert_int_equal(mkdir(st.run_dir, 0700), 0);
    assert_int_equal(mkdir(sock, 0700), 0);
    zp_comm_t *c;
    assert_int_equal(zp_comm_create(&c, &st, 0, 2, ZP_COMM_SIGNAL_STOPS), 0);
    struct sigaction sa = {.sa_handler = on_alarm}, old; /* no SA_RESTART: the poll sees EINTR */
    assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
    alarm(1);
    float v[1] = {1};
    double s[1] = {1};
    assert_int_equal(zp_comm_sum(c, v, 1, s, 1), ZP_ESTOP);
    alarm(0);
    sigaction(SIGALRM, &old, NULL);
    assert_int_equal(zp_stop, 0);
    zp_comm_destroy(&c);
}

static void a_bad_rank_or_world_is_refused(void **state)
{
    (void)state;
    zp_stage_t st;
    stage_init(&st, 10);
    zp_comm_t *c = (zp_comm_t *)&st;
    assert_int_equal(zp_comm_create(&c, &st, 2, 2, 0), ZP_EINVAL);
    assert_null(c);
    assert_int_equal(zp_comm_create(&c, &st, 0, 0, 0), ZP_EINVAL);
    assert_int_equal(zp_comm_create(&c, &st, 0, 65, 0), ZP_EINVAL);
}

static int setup(void **state)
{
    (void)state;
    snprintf(run_dir, sizeof run_dir, "/tmp/zp-test-comm-XXXXXX");
    if (!mkdtemp(run_dir))
        return -1;
    char sock[96];
    snprintf(sock, sizeof sock, "%s/sock", run_dir);
    if (mkdir(sock, 0700))
        return -1;
    zctx = zmq_ctx_new();
    return zctx ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    zmq_ctx_term(zctx);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", run_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_rank_ends_with_the_same_totals),
        cmocka_unit_test(one_rank_sums_alone),
        cmocka_unit_test(a_part_of_another_size_stops_the_sum),
        cmocka_unit_test(a_handled_signal_ends_the_wait_with_signal_stops),
        cmocka_unit_test(a_bad_rank_or_world_is_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/* Unit tests of the region timers: statistics of known samples, durations of
 * known sleeps, nesting, misuse reported at the call site, and buffering. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pipeline/base/log.h"
#include "pipeline/base/timer.h"

static void stats_of_known_samples(void **state)
{
    (void)state;
    double x[] = {9, 2, 4, 4, 4, 5, 5, 7};
    zp_region_stats_t s;
    zp_timer_region_stats(x, 8, &s);
    assert_int_equal(s.count, 8);
    assert_true(s.min == 2 && s.max == 9 && s.mean == 5 && s.total == 40);
    assert_true(s.median == 4.5);         /* even count: mean of the middle two */
    assert_true(fabs(s.stdev - sqrt(32.0 / 7)) < 1e-12); /* sample stdev, n - 1 */
    double odd[] = {3, 1, 2};
    zp_timer_region_stats(odd, 3, &s);
    assert_true(s.median == 2 && s.stdev == 1);
}

static void stdev_is_zero_below_two_samples(void **state)
{
    (void)state;
    double one = 7;
    zp_region_stats_t s;
    zp_timer_region_stats(&one, 1, &s);
    assert_true(s.count == 1 && s.min == 7 && s.median == 7 && s.max == 7 && s.stdev == 0);
    zp_timer_region_stats(NULL, 0, &s);
    assert_true(s.count == 0 && s.mean == 0 && s.stdev == 0);
}

typedef struct {
    int64_t ns[64], end[64];
    int n, calls, region;
} sink_t;

static void sink(void *ctx, int region, const int64_t *ns, const int64_t *end, int n)
{
    sink_t *s = ctx;
    s->calls++;
    s->region = region;
    for (int i = 0; i < n && s->n < 64; i++, s->n++)
        s->ns[s->n] = ns[i], s->end[s->n] = end[i];
}

static void sleep_ms(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    while (nanosleep(&ts, &ts))
        ;
}

static void durations_of_known_sleeps(void **state)
{
    (void)state;
    static zp_timers_t t;
    sink_t s = {0};
    zp_timer_init(&t, sink, &s);
    int ms[] = {2, 6, 10};
    int64_t outer[3], before[3], after[3];
    for (int i = 0; i < 3; i++) {
        int64_t t0 = zp_now_ns();
        before[i] = t0;
        assert_int_equal(ZP_TIME_BEGIN(&t, ZP_R_READ), 0);
        sleep_ms(ms[i]);
        assert_true(ZP_TIME_END(&t, ZP_R_READ) >= ms[i] * 1000000LL);
        after[i] = zp_now_ns();
        outer[i] = after[i] - t0;
    }
    assert_int_equal(s.calls, 0); /* buffered until flushed */
    zp_timer_flush(&t);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.region, ZP_R_READ);
    assert_int_equal(s.n, 3);
    double x[3];
    for (int i = 0; i < 3; i++) {
        /* at least the sleep, at most the same clock read around the region */
        assert_true(s.ns[i] >= ms[i] * 1000000LL);
        assert_true(s.ns[i] <= outer[i]);
        /* each sample ended between the clock reads around it, after the one before */
        assert_true(s.end[i] - s.ns[i] >= before[i] && s.end[i] <= after[i]);
        assert_true(i == 0 || s.end[i] - s.ns[i] >= s.end[i - 1]);
        x[i] = (double)s.ns[i] / 1e6;
    }
    zp_region_stats_t st;
    zp_timer_region_stats(x, 3, &st);
    double y[3] = {x[0], x[1], x[2]}, tmp; /* sorted by hand: the median is the middle one */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2 - i; j++)
            if (y[j] > y[j + 1])
                tmp = y[j], y[j] = y[j + 1], y[j + 1] = tmp;
    assert_true(st.min == y[0] && st.median == y[1] && st.max == y[2]);
}

static void different_regions_nest_and_overlap(void **state)
{
    (void)state;
    static zp_timers_t t;
    zp_timer_init(&t, NULL, NULL);
    assert_int_equal(ZP_TIME_BEGIN(&t, ZP_R_BATCH), 0);
    assert_int_equal(ZP_TIME_BEGIN(&t, ZP_R_FORWARD), 0);
    sleep_ms(3);
    assert_int_equal(ZP_TIME_BEGIN(&t, ZP_R_BACKWARD), 0);
    int64_t fwd = ZP_TIME_END(&t, ZP_R_FORWARD); /* overlaps backward */
    sleep_ms(3);
    int64_t bwd = ZP_TIME_END(&t, ZP_R_BACKWARD);
    int64_t batch = ZP_TIME_END(&t, ZP_R_BATCH);
    assert_true(fwd >= 3000000 && bwd >= 3000000 && batch >= fwd + 3000000 && batch >= bwd);
    assert_int_equal(t.misuse, 0);
    assert_int_equal(t.n[ZP_R_BATCH], 1);
}

static void reopening_a_region_is_reported_and_keeps_the_first_start(void **state)
{
    (void)state;
    static zp_timers_t t;
    zp_timer_init(&t, NULL, NULL);
    assert_int_equal(ZP_TIME_BEGIN(&t, ZP_R_IO), 0);
    int64_t first = t.start[ZP_R_IO];
    sleep_ms(1);
    assert_int_not_equal(ZP_TIME_BEGIN(&t, ZP_R_IO), 0);
    assert_int_equal(t.misuse, 1);
    assert_true(t.start[ZP_R_IO] == first);
    assert_true(ZP_TIME_END(&t, ZP_R_IO) >= 1000000);
    assert_int_equal(ZP_TIME_END(&t, ZP_R_IO), -1); /* not open any more */
    assert_int_equal(t.misuse, 2);
    assert_int_equal(t.n[ZP_R_IO], 1);
}

static void a_full_buffer_is_handed_over(void **state)
{
    (void)state;
    static zp_timers_t t;
    sink_t s = {0};
    zp_timer_init(&t, sink, &s);
    for (int i = 0; i < ZP_TIMER_BUF + 5; i++)
        zp_timer_add(&t, ZP_R_SEND, i);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.ns[63], 63);
    assert_int_equal(t.n[ZP_R_SEND], 5);
}

static void names_round_trip(void **state)
{
    (void)state;
    for (int r = 0; r < ZP_R_COUNT; r++)
        assert_int_equal(zp_timer_region_of(zp_timer_region_name(r)), r);
    assert_string_equal(zp_timer_region_name(ZP_R_LMDB_GET), "lmdb_get");
    assert_int_equal(zp_timer_region_of("nope"), -1);
    assert_null(zp_timer_region_name(ZP_R_COUNT));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stats_of_known_samples),
        cmocka_unit_test(stdev_is_zero_below_two_samples),
        cmocka_unit_test(durations_of_known_sleeps),
        cmocka_unit_test(different_regions_nest_and_overlap),
        cmocka_unit_test(reopening_a_region_is_reported_and_keeps_the_first_start),
        cmocka_unit_test(a_full_buffer_is_handed_over),
        cmocka_unit_test(names_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

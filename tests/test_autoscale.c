/* Unit tests of loader.autoscale's policy (pipeline/supervisor/autoscale.c):
 * windows of made-up counters in, decisions out — each rule of autoscale.h,
 * its hysteresis, the caps (loader.max_workers, the memory left), and a
 * loader that cannot start, reported once and never retried. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "pipeline/supervisor/autoscale.h"

#define MiB (1ll << 20)

/* A window: the trainers' wait, the loaders' busy share, the loaders running;
 * plenty of memory. */
static zp_autoscale_window_t win(double wait, double busy, int workers)
{
    return (zp_autoscale_window_t){wait, busy, workers, 8192 * MiB, 100 * MiB};
}

static int decide(zp_autoscale_t *a, zp_autoscale_window_t w, zp_autoscale_decision_t *d)
{
    zp_autoscale_decide(a, &w, d);
    return d->change;
}

static void a_waiting_trainer_and_busy_loaders_add_one_loader_then_settle_a_window(void **state)
{
    (void)state;
    zp_autoscale_t a;
    zp_autoscale_decision_t d;
    zp_autoscale_init(&a, 1, 4, 0.10);
    assert_int_equal(decide(&a, win(0.40, 0.95, 1), &d), +1);
    assert_true(d.report);
    assert_non_null(strstr(d.reason, "40%"));  /* the figures it rests on */
    assert_non_null(strstr(d.reason, "95%"));
    assert_int_equal(decide(&a, win(0.40, 0.95, 2), &d), 0); /* the window after: straddles */
    assert_false(d.report);
    assert_int_equal(decide(&a, win(0.40, 0.95, 2), &d), +1);
}

static void no_loader_is_added_when_the_trainer_waits_under_the_threshold_or_loaders_idle(void **state)
{
    (void)state;
    zp_autoscale_t a;
    zp_autoscale_decision_t d;
    zp_autoscale_init(&a, 1, 4, 0.10);
    assert_int_equal(decide(&a, win(0.05, 0.99, 1), &d), 0); /* the trainer is fed */
    assert_false(d.report);
    assert_int_equal(decide(&a, win(0.90, 0.40, 1), &d), 0); /* waits, but not for the loaders */
    assert_false(d.report);
}

static void missing_counters_decide_nothing(void **state)
{
    (void)state;
    zp_autoscale_t a;
    zp_autoscale_decision_t d;
    zp_autoscale_init(&a, 1, 4, 0.10);
    assert_int_equal(decide(&a, win(-1, 0.99, 1), &d), 0);
    assert_int_equal(decide(&a, win(0.90, -1, 3), &d), 0);
    assert_false(d.report);
}

static void max_workers_is_never_passed_and_the_hold_is_reported_once(void **state)
{
    (void)state;
    zp_autoscale_t a;
    zp_autoscale_decision_t d;
    zp_autoscale_init(&a, 1, 2, 0.10);
    assert_int_equal(decide(&a, win(0.50, 0.99, 2), &d), 0);
    assert_true(d.report);
    assert_non_null(strstr(d.reason, "loader.max_workers"));
    for (int i = 0; i < 5; i++) {
        assert_int_equal(decide(&a, win(0.50, 0.99, 2), &d), 0);
        assert_false(d.report); /* the same cause: not again */
    }
    assert_int_equal(decide(&a, win(0.01, 0.70, 2), &d), 0); /* the cause lifts... */
    assert_int_equal(decide(&a, win(0.50, 0.99, 2), &d), 0); /* ...and comes back: said again */
    assert_true(d.report);
}

static void a_max_below_min_is_raised_to_min(void **state)
{
    (void)state;
    zp_autoscale_t a;
    zp_autoscale_init(&a, 3, 1, 0.10);
    assert_int_equal(a.max, 3);
}

static void no_loader_is_added_when_memory_would_fall_under_one_more_loader(void **state)
{
    (void)state;
    zp_autoscale_t a;
    zp_autoscale_decision_t d;
    zp_autoscale_init(&a, 1, 8, 0.10);
    zp_autoscale_window_t w = win(0.50, 0.99, 2);
    w.mem_available = 150 * MiB, w.loader_rss = 100 * MiB; /* 150 < 2 x 100 */
    assert_int_equal(decide(&a, w, &d), 0);
    assert_true(d.report);
    assert_non_null(strstr(d.reason, "150 MiB"));
    assert_int_equal(decide(&a, w, &d), 0);
    assert_false(d.report);
    w.mem_available = 200 * MiB; /* room for one more, with as much again to spare */
    assert_int_equal(decide(&a, w, &d), +1);
    w.mem_available = -1; /* unknown: no memory rule */
    assert_int_equal(decide(&a, w, &d), 0); /* settling */
    assert_int_equal(decide(&a, w, &d), +1);
}

static void idle_loaders_retire_after_two_windows_down_to_min(void **state)
{
    (void)state;
    zp_autoscale_t a;
    zp_autoscale_decision_t d;
    zp_autoscale_init(&a, 1, 4, 0.10);
    assert_int_equal(decide(&a, win(0.30, 0.05, 3), &d), 0); /* one idle window: not yet */
    assert_false(d.report);
    assert_int_equal(decide(&a, win(0.30, 0.05, 3), &d), -1);
    assert_true(d.report);
    assert_non_null(strstr(d.reason, "5%"));
    assert_int_equal(decide(&a, win(0.30, 0.05, 2), &d), 0); /* settling */
    assert_int_equal(decide(&a, win(0.30, 0.05, 2), &d), 0);
    assert_int_equal(decide(&a, win(0.30, 0.05, 2), &d), -1);
    for (int i = 0; i < 4; i++)
        assert_int_equal(decide(&a, win(0.30, 0.05, 1), &d), 0); /* at min: stays */
}

static void a_busy_window_between_idle_ones_starts_the_count_again(void **state)
{
    (void)state;
    zp_autoscale_t a;
    zp_autoscale_decision_t d;
    zp_autoscale_init(&a, 1, 4, 0.10);
    assert_int_equal(decide(&a, win(0.0, 0.05, 2), &d), 0);
    assert_int_equal(decide(&a, win(0.0, 0.50, 2), &d), 0);
    assert_int_equal(decide(&a, win(0.0, 0.05, 2), &d), 0); /* no flapping on one quiet window */
    assert_int_equal(decide(&a, win(0.0, 0.05, 2), &d), -1);
}

static void fewer_loaders_than_min_add_one(void **state)
{
    (void)state;
    zp_autoscale_t a;
    zp_autoscale_decision_t d;
    zp_autoscale_init(&a, 2, 4, 0.10);
    assert_int_equal(decide(&a, win(0.0, 0.0, 1), &d), +1);
    assert_true(d.report);
    assert_non_null(strstr(d.reason, "loader.min_workers"));
}

static void a_loader_that_cannot_start_is_reported_once_and_never_retried(void **state)
{
    (void)state;
    zp_autoscale_t a;
    zp_autoscale_decision_t d;
    zp_autoscale_init(&a, 2, 4, 0.10);
    zp_autoscale_start_failed(&a, "loader[2] exited before delivering a sample", &d);
    assert_int_equal(d.change, 0);
    assert_true(d.report);
    assert_non_null(strstr(d.reason, "loader[2]"));
    zp_autoscale_start_failed(&a, "loader[2] exited before delivering a sample", &d);
    assert_false(d.report); /* said once */
    for (int i = 0; i < 10; i++) { /* the trainer starves, under min even: never another try */
        assert_int_equal(decide(&a, win(0.90, 0.99, 1), &d), 0);
        assert_false(d.report);
    }
    assert_int_equal(decide(&a, win(0.0, 0.01, 3), &d), 0); /* retiring still works */
    assert_int_equal(decide(&a, win(0.0, 0.01, 3), &d), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_waiting_trainer_and_busy_loaders_add_one_loader_then_settle_a_window),
        cmocka_unit_test(no_loader_is_added_when_the_trainer_waits_under_the_threshold_or_loaders_idle),
        cmocka_unit_test(missing_counters_decide_nothing),
        cmocka_unit_test(max_workers_is_never_passed_and_the_hold_is_reported_once),
        cmocka_unit_test(a_max_below_min_is_raised_to_min),
        cmocka_unit_test(no_loader_is_added_when_memory_would_fall_under_one_more_loader),
        cmocka_unit_test(idle_loaders_retire_after_two_windows_down_to_min),
        cmocka_unit_test(a_busy_window_between_idle_ones_starts_the_count_again),
        cmocka_unit_test(fewer_loaders_than_min_add_one),
        cmocka_unit_test(a_loader_that_cannot_start_is_reported_once_and_never_retried),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

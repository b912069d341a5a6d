/* Unit tests of the sweep's grid (pipeline/supervisor/sweep.c) without
 * processes: an axis splits at the commas outside brackets; points are
 * numbered with the last axis fastest; a point's name is built from the
 * keys' leaves and made safe for a folder; a name too long is refused; the
 * ranking puts finished runs first, best accuracy, then lowest loss. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/supervisor/supervisor.h"

static void an_axis_splits_at_commas_outside_brackets(void **state)
{
    (void)state;
    zp_sweep_axis_t a;
    assert_int_equal(zp_sweep_axis(&a, "trainer.optimizer.lr=0.1,0.01,0.001"), 3);
    assert_string_equal(a.key, "trainer.optimizer.lr");
    assert_string_equal(a.value[0], "0.1");
    assert_string_equal(a.value[2], "0.001");
    assert_int_equal(zp_sweep_axis(&a, "model.hidden=[64,32],[128]"), 2);
    assert_string_equal(a.value[0], "[64,32]");
    assert_string_equal(a.value[1], "[128]");
    assert_int_equal(zp_sweep_axis(&a, "model.hidden=[64,32]"), 1); /* one value: not an axis */
    assert_int_equal(zp_sweep_axis(&a, "seed=1,"), 2);             /* an empty value is one */
    assert_string_equal(a.value[1], "");
}

static void an_axis_keeps_at_most_its_maximum_of_values(void **state)
{
    (void)state;
    char arg[512] = "seed=0";
    for (int i = 1; i < ZP_SWEEP_VALUES_MAX + 5; i++)
        snprintf(arg + strlen(arg), sizeof arg - strlen(arg), ",%d", i);
    zp_sweep_axis_t a;
    assert_int_equal(zp_sweep_axis(&a, arg), ZP_SWEEP_VALUES_MAX);
    assert_string_equal(a.value[ZP_SWEEP_VALUES_MAX - 1], "31");
}

static void points_are_numbered_with_the_last_axis_fastest(void **state)
{
    (void)state;
    static zp_sweep_t s;
    s.naxes = 2;
    s.axis[0].n = 2;
    s.axis[1].n = 3;
    int pick[ZP_SWEEP_AXES_MAX], want[6][2] = {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}};
    for (int k = 0; k < 6; k++) {
        zp_sweep_pick(&s, k, pick);
        assert_int_equal(pick[0], want[k][0]);
        assert_int_equal(pick[1], want[k][1]);
    }
}

static void a_point_is_named_after_its_keys_leaves(void **state)
{
    (void)state;
    zp_sweep_axis_t ax[3];
    zp_sweep_point_t pt;
    zp_sweep_axis(&ax[0], "trainer.optimizer.lr=0.1,0.01");
    zp_sweep_axis(&ax[1], "trainer.schedule.name=cosine,step"); /* .name: the parent's */
    zp_sweep_axis(&ax[2], "model.hidden=[64,32],[128]");
    int pick[3] = {1, 0, 0};
    assert_int_equal(zp_sweep_point_name("fm", ax, 3, pick, &pt), 0);
    assert_string_equal(pt.name, "fm-lr=0.01-schedule=cosine-hidden=_64_32_");
    assert_string_equal(pt.values, "lr=0.01 schedule=cosine hidden=[64,32]");
    zp_sweep_axis(&ax[0], "name=a,b"); /* a bare `name` has no parent */
    assert_int_equal(zp_sweep_point_name("fm", ax, 1, pick, &pt), 0);
    assert_string_equal(pt.name, "fm-name=b");
}

static void a_point_name_over_63_bytes_is_refused(void **state)
{
    (void)state;
    zp_sweep_axis_t ax[1];
    zp_sweep_point_t pt = {.name = "unchanged"};
    zp_sweep_axis(&ax[0], "seed=1,2");
    int pick[1] = {0};
    char base[64];
    memset(base, 'b', 56);
    base[56] = 0; /* "-seed=1" makes 63: fits */
    assert_int_equal(zp_sweep_point_name(base, ax, 1, pick, &pt), 0);
    assert_int_equal(strlen(pt.name), 63);
    base[56] = 'b', base[57] = 0; /* 64: refused */
    strcpy(pt.name, "unchanged");
    assert_int_equal(zp_sweep_point_name(base, ax, 1, pick, &pt), 2);
    assert_string_equal(pt.name, "unchanged");
}

static void ranking_puts_finished_runs_first_then_accuracy_then_loss(void **state)
{
    (void)state;
    zp_sweep_point_t p[4] = {0};
    strcpy(p[0].name, "failed");
    p[0].status = 1;
    p[0].sum.test_acc = 0.99; /* a failed run's figures do not count */
    strcpy(p[1].name, "low");
    p[1].sum.test_acc = 0.80;
    strcpy(p[2].name, "high-lossy");
    p[2].sum.test_acc = 0.90, p[2].sum.test_loss = 0.5;
    strcpy(p[3].name, "high");
    p[3].sum.test_acc = 0.90, p[3].sum.test_loss = 0.3;
    zp_sweep_rank(p, 4);
    assert_string_equal(p[0].name, "high");
    assert_string_equal(p[1].name, "high-lossy");
    assert_string_equal(p[2].name, "low");
    assert_string_equal(p[3].name, "failed");
}

static void a_grid_over_the_maximum_is_refused_before_any_load(void **state)
{
    (void)state;
    zp_sweep_t *s;
    assert_int_equal(zp_sweep_create(&s), 0);
    s->config = "/no/such/config.yaml"; /* never read: the count is refused first */
    s->naxes = 3;
    for (int i = 0; i < 3; i++)
        s->axis[i].n = 32;
    assert_int_equal(zp_sweep_plan(s), 2);
    assert_null(s->point);
    zp_sweep_destroy(&s);
    assert_null(s);
    zp_sweep_destroy(&s); /* safe twice */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_axis_splits_at_commas_outside_brackets),
        cmocka_unit_test(an_axis_keeps_at_most_its_maximum_of_values),
        cmocka_unit_test(points_are_numbered_with_the_last_axis_fastest),
        cmocka_unit_test(a_point_is_named_after_its_keys_leaves),
        cmocka_unit_test(a_point_name_over_63_bytes_is_refused),
        cmocka_unit_test(ranking_puts_finished_runs_first_then_accuracy_then_loss),
        cmocka_unit_test(a_grid_over_the_maximum_is_refused_before_any_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

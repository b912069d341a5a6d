/* Unit tests of the report's bottleneck rule on known figures: the sentence a
 * run ends with is a function of the trainer's data wait and the data stages'
 * busy shares, whatever the machine's timings were. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "pipeline/report.h"

static int name(double wait, double loader, double cache, double prefetch, int loaders,
                char *stage, char *advice)
{
    zp_data_stages_t d = {.busy = {loader, cache, prefetch}, .loaders = loaders};
    return zp_report_bottleneck(&d, wait, stage, 16, advice, 600);
}

static void a_trainer_that_waits_under_a_tenth_is_the_bottleneck(void **state)
{
    (void)state;
    char stage[16], advice[600];
    assert_int_equal(name(0.099, 1.0, 1.0, 1.0, 2, stage, advice), 3);
    assert_string_equal(stage, "trainer");
    assert_non_null(strstr(advice, "waited for data 9.9% of its time"));
    assert_int_equal(name(0.0, 0, 0, 0, 1, stage, advice), 3);
}

static void the_busiest_data_stage_is_named_with_its_advice(void **state)
{
    (void)state;
    char stage[16], advice[600];
    assert_int_equal(name(0.6, 0.97, 0.2, 0.3, 3, stage, advice), 0);
    assert_string_equal(stage, "loader");
    assert_non_null(strstr(advice, "the 3 loader(s) were busy 97%"));
    assert_non_null(strstr(advice, "loader.workers=6"));
    assert_int_equal(name(0.1, 0.5, 0.8, 0.3, 1, stage, advice), 1);
    assert_string_equal(stage, "cache");
    assert_non_null(strstr(advice, "cache.commit_every"));
    assert_int_equal(name(0.9, 0.5, 0.6, 0.61, 1, stage, advice), 2);
    assert_string_equal(stage, "prefetch");
    assert_non_null(strstr(advice, "prefetch.readers"));
}

static void waiting_with_no_busy_stage_is_latency_and_no_timings_are_unknown(void **state)
{
    (void)state;
    char stage[16], advice[600];
    assert_int_equal(name(0.4, 0.49, 0.1, 0.2, 2, stage, advice), -1);
    assert_string_equal(stage, "unknown");
    assert_non_null(strstr(advice, "a latency problem"));
    assert_int_equal(name(-1, 1, 1, 1, 2, stage, advice), -1);
    assert_string_equal(stage, "unknown");
    assert_non_null(strstr(advice, "has not finished an epoch"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_trainer_that_waits_under_a_tenth_is_the_bottleneck),
        cmocka_unit_test(the_busiest_data_stage_is_named_with_its_advice),
        cmocka_unit_test(waiting_with_no_busy_stage_is_latency_and_no_timings_are_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

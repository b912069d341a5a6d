/* Unit tests of choosing the checkpoints an eval evaluates
 * (pipeline/supervisor/eval.c) without processes: names sort last, best,
 * then by epoch; the default is best, else last; N means epoch-N; all is
 * every one; a run's checkpoints are listed from its folder; a missing or
 * damaged checkpoint is refused before anything starts. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pipeline/supervisor/supervisor.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/zp-test-eval-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    char path[128];
    snprintf(path, sizeof path, "%s/checkpoints", dir);
    return mkdir(path, 0755);
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

static void touch(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/checkpoints/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void names_sort_last_best_then_by_epoch(void **state)
{
    (void)state;
    char names[6][64] = {"epoch-10", "zzz", "best", "epoch-2", "last", "epoch-1"};
    zp_eval_sort(names, 6);
    const char *want[6] = {"last", "best", "epoch-1", "epoch-2", "epoch-10", "zzz"};
    for (int i = 0; i < 6; i++)
        assert_string_equal(names[i], want[i]);
}

static void the_default_is_best_else_last(void **state)
{
    (void)state;
    char names[3][64] = {"last", "best", "epoch-1"}, want[64], out[256];
    assert_int_equal(zp_eval_pick(names, 3, NULL, want, sizeof want, out, sizeof out), 1);
    assert_string_equal(out, "best");
    char nobest[2][64] = {"last", "epoch-1"};
    assert_int_equal(zp_eval_pick(nobest, 2, NULL, want, sizeof want, out, sizeof out), 1);
    assert_string_equal(out, "last");
    assert_int_equal(zp_eval_pick(nobest, 0, NULL, want, sizeof want, out, sizeof out), 0);
    assert_string_equal(want, "last"); /* what the error names */
    assert_string_equal(out, "");
}

static void a_number_is_an_epoch_and_all_is_every_one(void **state)
{
    (void)state;
    char names[4][64] = {"last", "best", "epoch-1", "epoch-3"}, want[64], out[256];
    assert_int_equal(zp_eval_pick(names, 4, "3", want, sizeof want, out, sizeof out), 1);
    assert_string_equal(out, "epoch-3");
    assert_int_equal(zp_eval_pick(names, 4, "7", want, sizeof want, out, sizeof out), 0);
    assert_string_equal(want, "epoch-7");
    assert_int_equal(zp_eval_pick(names, 4, "all", want, sizeof want, out, sizeof out), 4);
    assert_string_equal(out, "last,best,epoch-1,epoch-3");
    assert_int_equal(zp_eval_pick(names, 4, "0", want, sizeof want, out, sizeof out), 0);
    assert_string_equal(want, "0"); /* not an epoch: a name, and none is called that */
    /* names that would not fit are left out, not cut */
    assert_int_equal(zp_eval_pick(names, 4, "all", want, sizeof want, out, 16), 2);
    assert_string_equal(out, "last,best");
}

static void a_runs_checkpoints_are_listed_from_its_folder(void **state)
{
    (void)state;
    touch("epoch-2.ckpt", "x");
    touch("last.ckpt", "x");
    touch("notes.txt", "x");
    touch(".ckpt", "x");
    char names[8][64];
    assert_int_equal(zp_eval_list(dir, names, 8), 2);
    assert_string_equal(names[0], "last");
    assert_string_equal(names[1], "epoch-2");
    assert_int_equal(zp_eval_list(dir, names, 1), 1); /* at most max */
    assert_int_equal(zp_eval_list("/no/such/run", names, 8), 0);
}

static void a_missing_or_damaged_checkpoint_is_refused(void **state)
{
    (void)state;
    char out[256] = "x";
    assert_int_equal(zp_eval_choose(dir, NULL, out, sizeof out), 2); /* none at all */
    touch("last.ckpt", "not a checkpoint");
    assert_int_equal(zp_eval_choose(dir, "best", out, sizeof out), 2);
    assert_int_equal(zp_eval_choose(dir, NULL, out, sizeof out), 2); /* last: unreadable */
    assert_string_equal(out, "last");
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names_sort_last_best_then_by_epoch),
        cmocka_unit_test(the_default_is_best_else_last),
        cmocka_unit_test(a_number_is_an_epoch_and_all_is_every_one),
        T(a_runs_checkpoints_are_listed_from_its_folder),
        T(a_missing_or_damaged_checkpoint_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

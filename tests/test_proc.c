/* Unit tests of the supervisor's stage processes (pipeline/supervisor/procs.c)
 * without real stages: ZP_STAGE_WRAPPER names a small script that stands in
 * for `zeus-pipe stage ...` (it exits with a chosen status, records its
 * arguments, or sleeps), and the children are spawned, reaped and described. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pipeline/base/log.h"
#include "pipeline/base/names.h"
#include "pipeline/supervisor/supervisor.h"

typedef struct {
    char dir[64], run[PATH_MAX];
    zp_procs_t procs;
} fixture_t;

static int setup(void **state)
{
    static fixture_t f;
    memset(&f, 0, sizeof f);
    snprintf(f.dir, sizeof f.dir, "/tmp/zp-proc-XXXXXX");
    if (!mkdtemp(f.dir) || zp_rundir_create(f.dir, "run", f.run, sizeof f.run))
        return -1;
    static zp_config_t cfg; /* dataset.source idx: `zeus-pipe stage loader` */
    zp_procs_init(&f.procs, f.run, &cfg);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    zp_procs_stop(&f->procs, 0, 100);
    zp_procs_stop(&f->procs, 1, 100);
    unsetenv("ZP_STAGE_WRAPPER");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A wrapper script in the fixture's folder running `body`; set as ZP_STAGE_WRAPPER. */
static void wrapper(fixture_t *f, const char *name, const char *body)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    FILE *s = fopen(path, "w");
    assert_non_null(s);
    fprintf(s, "#!/bin/sh\n%s\n", body);
    fclose(s);
    assert_int_equal(chmod(path, 0755), 0);
    setenv("ZP_STAGE_WRAPPER", path, 1);
}

/* Reaps until the child has been reaped (a stand-in exits at once). */
static zp_child_t *reap_until_gone(fixture_t *f, zp_child_t *c, int *trainer_done)
{
    zp_child_t *bad = NULL;
    for (int i = 0; i < 1000 && c->pid; i++) {
        zp_child_t *b = zp_procs_reap(&f->procs, trainer_done);
        bad = b ? b : bad;
        if (c->pid)
            usleep(10000);
    }
    assert_int_equal(c->pid, 0);
    return bad;
}

static void the_back_off_doubles_within_a_minute_to_1_6_s_and_starts_over_after(void **state)
{
    (void)state;
    int deaths = 0;
    int64_t last = -120000000000ll, now = 0;
    const int64_t want[] = {50, 100, 200, 400, 800, 1600, 1600};
    for (int i = 0; i < 7; i++, now += 1000000000ll)
        assert_int_equal(zp_procs_restart_backoff(&deaths, &last, now), want[i] * 1000000ll);
    assert_int_equal(deaths, 7);
    now += 61000000000ll; /* a quiet minute: the first death again */
    assert_int_equal(zp_procs_restart_backoff(&deaths, &last, now), 50000000ll);
    assert_int_equal(deaths, 1);
}

static void a_trainer_that_exits_0_is_done_and_a_failing_stage_is_named(void **state)
{
    fixture_t *f = *state;
    int done = 0;
    wrapper(f, "ok", "exit 0");
    assert_int_equal(zp_procs_spawn(&f->procs, ZP_STAGE_TRAINER, 0, 0), 0);
    zp_child_t *t = &f->procs.child[0];
    assert_true(t->pid > 0);
    assert_null(reap_until_gone(f, t, &done));
    assert_int_equal(done, 1);
    wrapper(f, "fail", "exit 1");
    assert_int_equal(zp_procs_spawn(&f->procs, ZP_STAGE_CACHE, 0, 0), 0);
    zp_child_t *c = &f->procs.child[1];
    assert_ptr_equal(reap_until_gone(f, c, &done), c);
    char how[128];
    zp_procs_describe(c, how, sizeof how);
    assert_string_equal(how, "exited with status 1");
    assert_int_equal(done, 1);
}

static void a_loader_that_dies_is_flagged_for_restart_unless_its_config_is_wrong(void **state)
{
    fixture_t *f = *state;
    int done = 0;
    f->procs.keep_loaders = 1;
    wrapper(f, "crash", "exit 1");
    assert_int_equal(zp_procs_spawn(&f->procs, ZP_STAGE_LOADER, 3, 0), 0);
    zp_child_t *l = &f->procs.child[0];
    assert_null(reap_until_gone(f, l, &done));
    assert_int_equal(l->exited, 1);
    assert_int_equal(l->delivered, 0);
    /* the same instance again takes the same entry */
    wrapper(f, "config", "exit 2");
    assert_int_equal(zp_procs_spawn(&f->procs, ZP_STAGE_LOADER, 3, 0), 0);
    assert_int_equal(f->procs.nchild, 1);
    assert_int_equal(l->exited, 0);
    assert_ptr_equal(reap_until_gone(f, l, &done), l); /* exit 2: no restart mends it */
}

static void a_stage_gets_its_run_instance_mode_and_the_extra_arguments(void **state)
{
    fixture_t *f = *state;
    char body[PATH_MAX + 64], path[PATH_MAX + 32], line[4096], want[PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/args", f->dir);
    snprintf(body, sizeof body, "shift; echo \"$@\" > %s", path); /* drop the program itself */
    wrapper(f, "args", body);
    char *extra[] = {"--connect", "10.0.0.1:5555", NULL};
    memcpy(f->procs.extra, extra, sizeof extra);
    f->procs.mode = 2;
    int done = 0;
    assert_int_equal(zp_procs_spawn(&f->procs, ZP_STAGE_LOADER, 7, 0), 0);
    reap_until_gone(f, &f->procs.child[0], &done);
    FILE *a = fopen(path, "r");
    assert_non_null(a);
    assert_non_null(fgets(line, sizeof line, a));
    fclose(a);
    /* --ckpts takes an empty word when there is nothing to evaluate */
    snprintf(want, sizeof want, "stage loader --run %s --instance 7 --mode 2 --ckpts  --connect 10.0.0.1:5555\n",
             f->run);
    assert_string_equal(line, want);
    snprintf(path, sizeof path, "%s/logs/loader-7.log", f->run); /* its output's place */
    assert_int_equal(access(path, F_OK), 0);
}

static void stop_terms_then_kills_and_reaps_every_child(void **state)
{
    fixture_t *f = *state;
    wrapper(f, "slow", "exec sleep 30");
    assert_int_equal(zp_procs_spawn(&f->procs, ZP_STAGE_PREFETCH, 0, 0), 0);
    wrapper(f, "stubborn", "trap '' TERM; while :; do sleep 0.05; done");
    assert_int_equal(zp_procs_spawn(&f->procs, ZP_STAGE_CACHE, 0, 0), 0);
    usleep(200000); /* the trap is set */
    zp_procs_stop(&f->procs, 0, 500);
    char how[128];
    zp_procs_describe(&f->procs.child[0], how, sizeof how);
    assert_string_equal(how, "was killed by signal 15 (Terminated)");
    zp_procs_describe(&f->procs.child[1], how, sizeof how);
    assert_string_equal(how, "was killed by signal 9 (Killed)");
    assert_int_equal(f->procs.child[0].pid, 0);
    assert_int_equal(f->procs.child[1].pid, 0);
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1); /* no child left, zombie or not */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_back_off_doubles_within_a_minute_to_1_6_s_and_starts_over_after),
        cmocka_unit_test_setup_teardown(a_trainer_that_exits_0_is_done_and_a_failing_stage_is_named,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_loader_that_dies_is_flagged_for_restart_unless_its_config_is_wrong, setup, teardown),
        cmocka_unit_test_setup_teardown(a_stage_gets_its_run_instance_mode_and_the_extra_arguments,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(stop_terms_then_kills_and_reaps_every_child, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests of the Slurm environment: host lists and the rank variables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipeline/base/log.h"
#include "pipeline/base/slurm.h"

static void hostlist_first_expands_the_first_range(void **state)
{
    (void)state;
    static const char *cases[][2] = {
        {"localhost", "localhost"},       {"gpu[07-09,12],cpu1", "gpu07"},
        {"node1,node2", "node1"},         {"r[1-2]-n[01-04]", "r1-n01"},
        {"a[3,5-6]", "a3"},               {"gpu-[0001-0004]", "gpu-0001"},
        {"n[12]", "n12"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[64];
        assert_int_equal(zp_slurm_hostlist_first(cases[i][0], out, sizeof out), 0);
        assert_string_equal(out, cases[i][1]);
    }
    static const char *bad[] = {"", ",a", "a[", "a[x-2]", "a]b", "a[1-2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char out[64];
        assert_int_equal(zp_slurm_hostlist_first(bad[i], out, sizeof out), ZP_EINVAL);
    }
    char tiny[4];
    assert_int_equal(zp_slurm_hostlist_first("longname", tiny, sizeof tiny), ZP_EINVAL);
}

static void set_env(const char *procid, const char *ntasks, const char *localid, const char *nodes)
{
    const char *names[] = {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODELIST"};
    const char *vals[] = {procid, ntasks, localid, nodes};
    unsetenv("SLURM_STEP_NODELIST");
    unsetenv("SLURMD_NODENAME");
    for (int i = 0; i < 4; i++)
        vals[i] ? setenv(names[i], vals[i], 1) : unsetenv(names[i]);
}

static void ranks_come_from_the_four_variables(void **state)
{
    (void)state;
    zp_slurm_t s;
    char why[256];
    set_env("1", "4", "1", "gpu[03-04]");
    setenv("SLURM_JOB_ID", "991", 1);
    setenv("SLURM_STEP_ID", "2", 1);
    assert_int_equal(zp_slurm_detect(&s, why, sizeof why), 1);
    assert_int_equal(s.rank, 1);
    assert_int_equal(s.world, 4);
    assert_int_equal(s.local, 1);
    assert_string_equal(s.host, "gpu03");
    assert_string_equal(s.job, "991.2");
    /* rank 0 names its own node when Slurm says which it is */
    set_env("0", "4", "0", "gpu[03-04]");
    setenv("SLURMD_NODENAME", "gpu04", 1);
    assert_int_equal(zp_slurm_detect(&s, why, sizeof why), 1);
    assert_string_equal(s.host, "gpu04");
    /* the step's own node list comes first */
    set_env("2", "4", "0", "gpu[03-04]");
    setenv("SLURM_STEP_NODELIST", "cpu9", 1);
    assert_int_equal(zp_slurm_detect(&s, why, sizeof why), 1);
    assert_string_equal(s.host, "cpu9");
}

static void the_nodes_of_a_step_and_a_local_cache(void **state)
{
    (void)state;
    char why[800], fs[16];
    unsetenv("SLURM_STEP_NUM_NODES"), unsetenv("SLURM_JOB_NUM_NODES"), unsetenv("SLURM_NNODES");
    assert_int_equal(zp_slurm_nodes(), 1);
    setenv("SLURM_NNODES", "4", 1);
    setenv("SLURM_JOB_NUM_NODES", "x", 1); /* not a number: the next one says */
    assert_int_equal(zp_slurm_nodes(), 4);
    setenv("SLURM_STEP_NUM_NODES", "2", 1); /* the step's own count first */
    assert_int_equal(zp_slurm_nodes(), 2);
    /* a path not made yet is judged by the folder it would be made in: here a local one */
    assert_int_equal(zp_slurm_local_fs("/tmp/zp-not-made/yet/cache", fs, sizeof fs), 0);
    assert_int_equal(zp_slurm_local_fs("relative-not-made", fs, sizeof fs), 0);
    assert_int_equal(zp_slurm_cache_local("/tmp/zp-cache", why, sizeof why), 0);
    unsetenv("SLURM_STEP_NUM_NODES"), unsetenv("SLURM_JOB_NUM_NODES"), unsetenv("SLURM_NNODES");
}

static void a_task_knows_its_node_and_its_nodes_rendezvous(void **state)
{
    (void)state;
    zp_slurm_t s;
    char why[256], host[256], path[64];
    set_env("3", "4", "1", "gpu[03-04]");
    setenv("SLURMD_NODENAME", "gpu04", 1);
    assert_int_equal(zp_slurm_detect(&s, why, sizeof why), 1);
    assert_string_equal(s.node, "gpu04");
    assert_string_equal(s.host, "gpu03"); /* rank 0's is another matter */
    unsetenv("SLURMD_NODENAME");
    assert_int_equal(zp_slurm_detect(&s, why, sizeof why), 1);
    assert_int_equal(gethostname(host, sizeof host), 0);
    assert_string_equal(s.node, host);
    zp_slurm_node_path(path, sizeof path, "/runs/r", "a/b");
    assert_string_equal(path, "/runs/r/node-a_b");
    zp_slurm_node_path(path, 16, "/runs/r", "gpu04"); /* cut, still a string */
    assert_string_equal(path, "/runs/r/node-gp");
}

static void one_task_or_a_missing_variable_is_no_slurm_run(void **state)
{
    (void)state;
    zp_slurm_t s;
    char why[256];
    set_env("0", "1", "0", "localhost");
    assert_int_equal(zp_slurm_detect(&s, why, sizeof why), 0);
    set_env("0", "2", NULL, "localhost");
    assert_int_equal(zp_slurm_detect(&s, why, sizeof why), 0);
    set_env("0", "2", "0", NULL);
    assert_int_equal(zp_slurm_detect(&s, why, sizeof why), 0);
}

static void malformed_values_are_named(void **state)
{
    (void)state;
    zp_slurm_t s;
    char why[256];
    set_env("2", "2", "0", "localhost"); /* rank beyond the tasks */
    assert_int_equal(zp_slurm_detect(&s, why, sizeof why), ZP_EINVAL);
    assert_non_null(strstr(why, "SLURM_PROCID=2"));
    set_env("0", "two", "0", "localhost");
    assert_int_equal(zp_slurm_detect(&s, why, sizeof why), ZP_EINVAL);
    assert_non_null(strstr(why, "SLURM_NTASKS=two"));
    set_env("0", "2", "0", "a[1-");
    assert_int_equal(zp_slurm_detect(&s, why, sizeof why), ZP_EINVAL);
    assert_non_null(strstr(why, "SLURM_NODELIST=a[1-"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hostlist_first_expands_the_first_range),
        cmocka_unit_test(ranks_come_from_the_four_variables),
        cmocka_unit_test(a_task_knows_its_node_and_its_nodes_rendezvous),
        cmocka_unit_test(the_nodes_of_a_step_and_a_local_cache),
        cmocka_unit_test(one_task_or_a_missing_variable_is_no_slurm_run),
        cmocka_unit_test(malformed_values_are_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

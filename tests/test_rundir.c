/* Unit tests of run directories (pipeline/supervisor/rundir.c) without
 * processes: creation, the RUN/resources sweep over made-up records in a
 * temporary folder, and finding a run by name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pipeline/base/resources.h"
#include "pipeline/ring/ring.h"
#include "pipeline/supervisor/supervisor.h"

static int make_dir(void **state)
{
    static char dir[64];
    snprintf(dir, sizeof dir, "/tmp/zp-rundir-XXXXXX");
    *state = mkdtemp(dir);
    return *state ? 0 : -1;
}

static int remove_dir(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", (const char *)*state);
    return system(cmd) == 0 ? 0 : -1;
}

static int exists(const char *fmt, const char *a, const char *b)
{
    char path[PATH_MAX * 2];
    snprintf(path, sizeof path, fmt, a, b);
    return access(path, F_OK) == 0;
}

static void touch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    close(fd);
}

/* A run folder under dir with RUN/resources holding `lines` after "host ME". */
static void make_run(const char *dir, const char *name, char *run, size_t len)
{
    assert_int_equal(zp_rundir_create(dir, name, run, len), 0);
    assert_int_equal(zp_resources_start(run), 0);
}

static void record(const char *run, const char *line)
{
    char path[PATH_MAX + 16];
    zp_resources_path(path, sizeof path, run);
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    fprintf(f, "%s\n", line);
    fclose(f);
}

static void a_taken_name_gets_the_next_suffix_with_sock_and_logs(void **state)
{
    char a[PATH_MAX], b[PATH_MAX], c[PATH_MAX];
    assert_int_equal(zp_rundir_create(*state, "r", a, sizeof a), 0);
    assert_int_equal(zp_rundir_create(*state, "r", b, sizeof b), 0);
    assert_int_equal(zp_rundir_create(*state, "r", c, sizeof c), 0);
    assert_string_not_equal(a, b);
    assert_true(strlen(b) > 2 && !strcmp(b + strlen(b) - 2, "-2"));
    assert_true(strlen(c) > 2 && !strcmp(c + strlen(c) - 2, "-3"));
    struct stat st;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/sock", a);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700); /* other users cannot reach the sockets */
    assert_true(exists("%s/%s", a, "logs"));
}

static void the_sweep_removes_its_own_shm_sockets_and_nested_runs_and_refuses_the_rest(void **state)
{
    char run[PATH_MAX], nested[PATH_MAX + 16], line[PATH_MAX * 2], shm[160], other_shm[160];
    char sock[PATH_MAX + 32], outside[PATH_MAX + 32];
    make_run(*state, "swept", run, sizeof run);
    /* its ring: a real segment, named as a rank's ring of this run */
    zp_ring_name(shm, sizeof shm, run, 3);
    int fd = shm_open(shm, O_CREAT | O_RDWR, 0600);
    assert_true(fd >= 0);
    close(fd);
    snprintf(line, sizeof line, "shm %s", shm);
    record(run, line);
    /* another run's segment, recorded here by mistake or malice: left alone */
    zp_ring_name(other_shm, sizeof other_shm, "/somewhere/else", 0);
    fd = shm_open(other_shm, O_CREAT | O_RDWR, 0600);
    assert_true(fd >= 0);
    close(fd);
    snprintf(line, sizeof line, "shm %s", other_shm);
    record(run, line);
    /* its socket file, and a file outside sock/ */
    snprintf(sock, sizeof sock, "%s/sock/work.ipc", run);
    touch(sock);
    snprintf(line, sizeof line, "sock %s", sock);
    record(run, line);
    snprintf(outside, sizeof outside, "%s/precious.txt", (const char *)*state);
    touch(outside);
    snprintf(line, sizeof line, "sock %s", outside);
    record(run, line);
    snprintf(line, sizeof line, "sock %s/sock/../../precious.txt", run);
    record(run, line);
    record(run, "bogus line");
    /* a nested rank folder with a socket of its own */
    char nested_run[PATH_MAX];
    snprintf(nested, sizeof nested, "%s", run);
    make_run(nested, "rank-1", nested_run, sizeof nested_run);
    snprintf(sock, sizeof sock, "%s/sock/fetch.ipc", nested_run);
    touch(sock);
    snprintf(line, sizeof line, "sock %s", sock);
    record(nested_run, line);
    snprintf(line, sizeof line, "run %s", nested_run);
    record(run, line);

    zp_rundir_remove_resources(run);

    char path[PATH_MAX + 32];
    assert_int_equal(shm_open(shm, O_RDONLY, 0), -1); /* removed */
    fd = shm_open(other_shm, O_RDONLY, 0);
    assert_true(fd >= 0); /* refused */
    close(fd);
    shm_unlink(other_shm);
    assert_false(exists("%s/%s", run, "sock/work.ipc"));
    assert_true(access(outside, F_OK) == 0);
    assert_false(access(sock, F_OK) == 0); /* the nested run's socket */
    zp_resources_path(path, sizeof path, run);
    assert_false(access(path, F_OK) == 0); /* the record itself is gone */
    zp_resources_path(path, sizeof path, nested_run);
    assert_false(access(path, F_OK) == 0);
}

static void another_hosts_run_is_left_alone(void **state)
{
    char run[PATH_MAX], sock[PATH_MAX + 32], line[PATH_MAX * 2], path[PATH_MAX + 16];
    assert_int_equal(zp_rundir_create(*state, "far", run, sizeof run), 0);
    record(run, "host zp-no-such-host-anywhere");
    snprintf(sock, sizeof sock, "%s/sock/work.ipc", run);
    touch(sock);
    snprintf(line, sizeof line, "sock %s", sock);
    record(run, line);
    assert_int_equal(zp_rundir_foreign(run), 1);
    zp_rundir_cleanup(run);
    assert_true(access(sock, F_OK) == 0);
    zp_resources_path(path, sizeof path, run);
    assert_true(access(path, F_OK) == 0);
}

static void a_dead_supervisors_run_is_swept_and_a_live_one_is_not(void **state)
{
    char runs[PATH_MAX], dead[PATH_MAX], live[PATH_MAX], path[PATH_MAX + 32], line[PATH_MAX * 2];
    snprintf(runs, sizeof runs, "%s/runs", (const char *)*state);
    assert_int_equal(mkdir(runs, 0755), 0);
    const char *names[2] = {"dead", "live"};
    char *dirs[2] = {dead, live};
    for (int i = 0; i < 2; i++) {
        make_run(runs, names[i], dirs[i], PATH_MAX);
        snprintf(path, sizeof path, "%s/sock/control.ipc", dirs[i]);
        touch(path);
        snprintf(line, sizeof line, "sock %s", path);
        record(dirs[i], line);
        snprintf(path, sizeof path, "%s/supervisor.pid", dirs[i]);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, "%d\n", i ? (int)getpid() : 999999999); /* no such pid: dead */
        fclose(f);
    }
    assert_int_equal(zp_rundir_live_pid(dead), 0);
    assert_int_equal(zp_rundir_live_pid(live), getpid());
    zp_rundir_cleanup_stale(runs);
    assert_false(exists("%s/%s", dead, "sock/control.ipc"));
    assert_false(exists("%s/%s", dead, "supervisor.pid"));
    assert_true(exists("%s/%s", live, "sock/control.ipc"));
}

static void a_run_is_found_by_directory_by_name_or_as_the_only_live_one(void **state)
{
    char cwd[PATH_MAX], runs[PATH_MAX], run[PATH_MAX], found[PATH_MAX], path[PATH_MAX + 32];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(*state), 0);
    snprintf(runs, sizeof runs, "%s/runs", (const char *)*state);
    mkdir(runs, 0755);
    assert_int_equal(zp_rundir_create(runs, "mine", run, sizeof run), 0);
    assert_int_equal(zp_rundir_find(run, found, sizeof found), 0);
    assert_string_equal(found, run);
    assert_int_equal(zp_rundir_find("mine", found, sizeof found), 0);
    assert_string_equal(found, run);
    assert_int_equal(zp_rundir_find("nothing-here", found, sizeof found), 2);
    assert_int_equal(zp_rundir_find(NULL, found, sizeof found), 2); /* none is running */
    snprintf(path, sizeof path, "%s/supervisor.pid", run);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
    found[0] = 0;
    assert_int_equal(zp_rundir_find(NULL, found, sizeof found), 0);
    assert_string_equal(found, run);
    assert_int_equal(chdir(cwd), 0);
}

/* `up --attach` ends a run only once no program holds a rank's mark: a
 * holder that closes it or is killed releases it. */
static void a_ranks_mark_is_held_until_its_holder_closes_it_or_dies(void **state)
{
    char run[PATH_MAX];
    make_run((const char *)*state, "att", run, sizeof run);
    assert_int_equal(zp_resources_attached(run, 0), 0); /* never attached: no file */
    int fd = zp_resources_attach_hold(run, 0, NULL);
    assert_true(fd >= 0);
    assert_int_equal(zp_resources_attached(run, 0), 1);
    assert_int_equal(zp_resources_attached(run, 1), 0);
    long holder = 0; /* one program per rank: a second is refused, told who holds it */
    assert_int_equal(zp_resources_attach_hold(run, 0, &holder), -EBUSY);
    assert_int_equal(holder, (long)getpid());
    close(fd);
    assert_int_equal(zp_resources_attached(run, 0), 0);
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    if (pid == 0) { /* a program attached as rank 1, killed outright */
        int held = zp_resources_attach_hold(run, 1, NULL);
        ssize_t w = write(ready[1], "x", 1);
        (void)w;
        for (;;)
            pause();
        _exit(held < 0);
    }
    char c;
    assert_int_equal(read(ready[0], &c, 1), 1);
    assert_int_equal(zp_resources_attached(run, 1), 1);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(ready[0]);
    close(ready[1]);
    assert_int_equal(zp_resources_attached(run, 1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_taken_name_gets_the_next_suffix_with_sock_and_logs, make_dir,
                                        remove_dir),
        cmocka_unit_test_setup_teardown(
            the_sweep_removes_its_own_shm_sockets_and_nested_runs_and_refuses_the_rest, make_dir,
            remove_dir),
        cmocka_unit_test_setup_teardown(another_hosts_run_is_left_alone, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(a_dead_supervisors_run_is_swept_and_a_live_one_is_not,
                                        make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(a_run_is_found_by_directory_by_name_or_as_the_only_live_one,
                                        make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(a_ranks_mark_is_held_until_its_holder_closes_it_or_dies,
                                        make_dir, remove_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests of pipeline/base/files.c: zp_files_mkdirs creates what is missing, accepts
 * what exists, and says why it cannot. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipeline/base/files.h"

static char g_tmp[64];

static int make_tmp(void **state)
{
    (void)state;
    snprintf(g_tmp, sizeof g_tmp, "/tmp/zp-test-files-XXXXXX");
    return mkdtemp(g_tmp) ? 0 : -1;
}

static int remove_tmp(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    return system(cmd) == 0 ? 0 : -1;
}

static int is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static void missing_parents_are_created(void **state)
{
    (void)state;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/a/b/c", g_tmp);
    assert_false(is_dir(path));
    assert_int_equal(zp_files_mkdirs(path, 0700), 0);
    assert_true(is_dir(path));
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0700); /* the leaf gets the mode asked for */
    assert_int_equal(zp_files_mkdirs(path, 0700), 0); /* and again: it exists, fine */
}

static void a_file_in_the_way_is_an_error(void **state)
{
    (void)state;
    char file[PATH_MAX], path[PATH_MAX + 8];
    snprintf(file, sizeof file, "%s/plain", g_tmp);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(path, sizeof path, "%s/x", file);
    assert_int_equal(zp_files_mkdirs(path, 0755), -ENOTDIR);
    assert_int_equal(zp_files_mkdirs(file, 0755), -ENOTDIR); /* it exists, but is no folder */
}

static void a_path_too_long_is_refused(void **state)
{
    (void)state;
    char *path = malloc(PATH_MAX + 10);
    assert_non_null(path);
    memset(path, 'a', PATH_MAX + 9);
    path[0] = '/';
    path[PATH_MAX + 9] = 0;
    assert_int_equal(zp_files_mkdirs(path, 0755), -ENAMETOOLONG);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(missing_parents_are_created),
        cmocka_unit_test(a_file_in_the_way_is_an_error),
        cmocka_unit_test(a_path_too_long_is_refused),
    };
    return cmocka_run_group_tests_name("files", tests, make_tmp, remove_tmp);
}

/* Unit tests of the CURVE key files: secret keys others may read are refused
 * with the chmod to run, and each rank of a Slurm job has a pair of its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipeline/net/keys.h"
#include "pipeline/base/log.h"

static int make_dir(void **state)
{
    static char dir[64];
    snprintf(dir, sizeof dir, "/tmp/zp-keys-XXXXXX");
    *state = mkdtemp(dir);
    return *state ? 0 : -1;
}

static int remove_dir(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", (const char *)*state);
    return system(cmd) == 0 ? 0 : -1;
}

static void a_secret_key_others_may_read_is_refused_with_the_chmod_to_run(void **state)
{
    char base[128], path[160], want[512], pub[ZP_Z85_KEY], sec[ZP_Z85_KEY], err[512];
    snprintf(base, sizeof base, "%s/host", (const char *)*state);
    snprintf(path, sizeof path, "%s.key", base);
    assert_int_equal(zp_keys_generate(base, err, sizeof err), 0);
    assert_int_equal(zp_keys_read_pair(path, pub, sec, err, sizeof err), 0);
    static const mode_t open_modes[] = {0644, 0640, 0604, 0620, 0602};
    for (size_t i = 0; i < sizeof open_modes / sizeof open_modes[0]; i++) {
        assert_int_equal(chmod(path, open_modes[i]), 0);
        err[0] = 0;
        assert_int_not_equal(zp_keys_read_pair(path, pub, sec, err, sizeof err), 0);
        snprintf(want, sizeof want, "%s: a secret key that others may read (mode %04o); run: chmod 600 %s",
                 path, (unsigned)open_modes[i], path);
        assert_string_equal(err, want);
    }
    assert_int_equal(chmod(path, 0400), 0); /* the owner's alone, even read-only: fine */
    assert_int_equal(zp_keys_read_pair(path, pub, sec, err, sizeof err), 0);
    /* a public key is for giving away */
    snprintf(path, sizeof path, "%s.pub", base);
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(zp_keys_read_public(path, pub, err, sizeof err), 0);
}

static void each_rank_has_a_pair_of_its_own(void **state)
{
    char base[128], key[160], pubs[160], pub[12][ZP_Z85_KEY], sec[12][ZP_Z85_KEY], p[ZP_Z85_KEY],
        err[512];
    snprintf(base, sizeof base, "%s/ranks", (const char *)*state);
    snprintf(key, sizeof key, "%s.key", base);
    snprintf(pubs, sizeof pubs, "%s.pub", base);
    assert_int_equal(zp_keys_generate_ranks(base, 12, err, sizeof err), 0);
    for (int r = 1; r < 12; r++) { /* rank 1's line is not rank 10's */
        assert_int_equal(zp_keys_read_rank(key, r, pub[r], sec[r], err, sizeof err), 0);
        assert_int_equal(zp_keys_read_rank_public(pubs, r, p, err, sizeof err), 0);
        assert_string_equal(p, pub[r]); /* what rank 0 lets in is the rank's own */
        for (int q = 1; q < r; q++) {
            assert_string_not_equal(pub[q], pub[r]);
            assert_string_not_equal(sec[q], sec[r]);
        }
    }
    /* rank 0 connects to no one; a rank beyond the job has none */
    assert_int_equal(zp_keys_read_rank(key, 0, p, sec[0], err, sizeof err), ZP_EINVAL);
    assert_int_equal(zp_keys_read_rank(key, 12, p, sec[0], err, sizeof err), ZP_EINVAL);
    assert_non_null(strstr(err, "no key for rank 12"));
    assert_int_equal(zp_keys_read_rank_public(pubs, 40, p, err, sizeof err), ZP_EINVAL);
    /* written once: a second job step cannot swap the keys under a running one */
    assert_int_not_equal(zp_keys_generate_ranks(base, 12, err, sizeof err), 0);
    struct stat sb;
    assert_int_equal(stat(key, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    assert_int_equal(chmod(key, 0644), 0);
    assert_int_equal(zp_keys_read_rank(key, 1, p, sec[0], err, sizeof err), -EACCES);
    assert_non_null(strstr(err, "run: chmod 600 "));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_secret_key_others_may_read_is_refused_with_the_chmod_to_run,
                                        make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(each_rank_has_a_pair_of_its_own, make_dir, remove_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests of the logger's TensorBoard writer (stages/logger/tb.h): CRC-32C
 * and its mask against known vectors, frames read back and unpacked with
 * protobuf-c, the per-tag thinning, the tag limit, and a folder that cannot
 * be made. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <glob.h>
#include <unistd.h>

#include "schemas/tensorboard.pb-c.h"
#include "stages/logger/tb.h"

static void crc32c_of_known_vectors(void **state)
{
    (void)state;
    assert_int_equal(zp_tb_crc32c("123456789", 9), 0xe3069283u); /* the CRC-32C check value */
    assert_int_equal(zp_tb_crc32c("", 0), 0);
    unsigned char zeros[32] = {0};
    assert_int_equal(zp_tb_crc32c(zeros, 32), 0x8a9136aau); /* RFC 3720 B.4 */
    /* TensorFlow's masked form: ((c >> 15) | (c << 17)) + 0xa282ead8 */
    assert_int_equal(zp_tb_mask(0), 0xa282ead8u);
    assert_int_equal(zp_tb_mask(0xe3069283u), ((0xe3069283u >> 15) | (0xe3069283u << 17)) + 0xa282ead8u);
}

static uint32_t le(const unsigned char *p, int n)
{
    uint32_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* The events of the one file in dir, CRCs checked; their count. */
static int read_back(const char *dir, Tensorboard__Event **ev, int max)
{
    char pattern[256];
    snprintf(pattern, sizeof pattern, "%s/events.out.tfevents.*", dir);
    glob_t g;
    assert_int_equal(glob(pattern, 0, NULL, &g), 0);
    assert_int_equal(g.gl_pathc, 1);
    FILE *f = fopen(g.gl_pathv[0], "rb");
    globfree(&g);
    assert_non_null(f);
    int n = 0;
    unsigned char head[12], buf[512], tail[4];
    while (fread(head, 1, 12, f) == 12) {
        uint32_t len = le(head, 4);
        assert_true(le(head + 4, 4) == 0 && len <= sizeof buf);
        assert_int_equal(le(head + 8, 4), zp_tb_mask(zp_tb_crc32c(head, 8)));
        assert_int_equal(fread(buf, 1, len, f), len);
        assert_int_equal(fread(tail, 1, 4, f), 4);
        assert_int_equal(le(tail, 4), zp_tb_mask(zp_tb_crc32c(buf, len)));
        assert_true(n < max);
        ev[n] = tensorboard__event__unpack(NULL, len, buf);
        assert_non_null(ev[n++]);
    }
    fclose(f);
    return n;
}

static void points_thin_by_a_doubling_gap(void **state)
{
    (void)state;
    char dir[] = "/tmp/zp-test-tb-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sub[64];
    snprintf(sub, sizeof sub, "%s/tb", dir);
    zp_tb_t *tb;
    assert_int_equal(zp_tb_create(&tb, sub), 0);
    int written = 0;
    for (int step = 0; step < 4000; step++)
        written += zp_tb_scalar(tb, "a/b", step, 1.5, step * 0.5);
    /* steps 0..999 at gap 1, 1001..2999 at gap 2, 3003..3999 at gap 4 */
    assert_int_equal(written, 1000 + 1000 + 250);
    assert_int_equal(zp_tb_scalar(tb, "a/b", 10, 2, 7), 1); /* a step back starts again */
    zp_tb_destroy(&tb);
    zp_tb_destroy(&tb); /* safe twice */
    assert_null(tb);

    static Tensorboard__Event *ev[3000];
    int n = read_back(sub, ev, 3000);
    assert_int_equal(n, 1 + written + 1);
    assert_int_equal(ev[0]->what_case, TENSORBOARD__EVENT__WHAT_FILE_VERSION);
    assert_string_equal(ev[0]->file_version, "brain.Event:2");
    assert_int_equal(ev[1000]->step, 999);
    assert_int_equal(ev[1001]->step, 1001);
    assert_int_equal(ev[2001]->step, 3003);
    Tensorboard__Summary__Value *v = ev[2001]->summary->value[0];
    assert_string_equal(v->tag, "a/b");
    assert_true(v->simple_value == 1501.5f && ev[2001]->wall_time == 1.5);
    assert_int_equal(ev[n - 1]->step, 10);
    for (int i = 0; i < n; i++)
        tensorboard__event__free_unpacked(ev[i], NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void tags_past_the_limit_are_left_out(void **state)
{
    (void)state;
    char dir[] = "/tmp/zp-test-tb-XXXXXX";
    assert_non_null(mkdtemp(dir));
    zp_tb_t *tb;
    assert_int_equal(zp_tb_create(&tb, dir), 0);
    char tag[32];
    for (int i = 0; i < ZP_TB_TAGS_MAX; i++) {
        snprintf(tag, sizeof tag, "t/%d", i);
        assert_int_equal(zp_tb_scalar(tb, tag, 0, 0, i), 1);
    }
    assert_int_equal(zp_tb_scalar(tb, "one/more", 0, 0, 1), 0);
    assert_int_equal(zp_tb_scalar(tb, "t/5", 1, 0, 1), 1); /* a known tag goes on */
    zp_tb_destroy(&tb);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void a_folder_that_cannot_be_made_gives_null(void **state)
{
    (void)state;
    zp_tb_t *tb = (zp_tb_t *)&tb; /* not NULL: the failure must clear it */
    assert_int_not_equal(zp_tb_create(&tb, "/proc/self/no/such/tb"), 0);
    assert_null(tb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(crc32c_of_known_vectors),
        cmocka_unit_test(points_thin_by_a_doubling_gap),
        cmocka_unit_test(tags_past_the_limit_are_left_out),
        cmocka_unit_test(a_folder_that_cannot_be_made_gives_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

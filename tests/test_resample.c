/* Unit tests of resample.c (Pillow's bilinear resize of a box) and of the
 * whole-image draw (augment.h zp_augment_rrc_draw, zp_augment_whole_size): exact
 * cases that need no reference; tests/integration/test_images_crop.py holds
 * both against Pillow and torchvision. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/image/augment.h"
#include "pipeline/image/resample.h"

static uint8_t *picture(int w, int h)
{
    uint8_t *p = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h * 3; i++)
        p[i] = (uint8_t)(i * 37 % 251);
    return p;
}

static void a_box_of_its_own_size_is_copied_as_is(void **state)
{
    (void)state;
    uint8_t *src = picture(20, 15), out[8 * 6 * 3];
    zp_resample_t rs = {0};
    double box[4] = {5, 4, 8, 6};
    assert_int_equal(zp_resample(&rs, src, 20, 15, box, 8, 6, 0, ZP_RS_HWC_U8, NULL, out), 0);
    for (int y = 0; y < 6; y++)
        assert_memory_equal(out + y * 8 * 3, src + ((y + 4) * 20 + 5) * 3, 8 * 3);
    zp_resample_free(&rs);
    zp_resample_free(&rs); /* safe twice */
    free(src);
}

static void a_flat_image_stays_flat_at_any_scale_and_layout(void **state)
{
    (void)state;
    uint8_t src[31 * 17 * 3];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (uint8_t)(i % 3 == 0 ? 200 : i % 3 == 1 ? 7 : 99);
    zp_resample_t rs = {0};
    float lut[3 * 256], out[3 * 40 * 40];
    for (int i = 0; i < 3 * 256; i++)
        lut[i] = (float)i;
    int sizes[][2] = {{40, 40}, {3, 2}, {31, 17}, {1, 1}};
    for (int k = 0; k < 4; k++) {
        int ow = sizes[k][0], oh = sizes[k][1];
        double box[4] = {1.5, 2, 25, 13};
        assert_int_equal(zp_resample(&rs, src, 31, 17, box, ow, oh, 1, ZP_RS_CHW_F32, lut, out), 0);
        for (int c = 0; c < 3; c++)
            for (int i = 0; i < ow * oh; i++)
                assert_true(out[c * ow * oh + i] == (float)(c * 256 + (c == 0 ? 200 : c == 1 ? 7 : 99)));
    }
    zp_resample_free(&rs);
}

static void the_flip_mirrors_each_row_and_chw_splits_the_channels(void **state)
{
    (void)state;
    uint8_t *src = picture(33, 21), a[24 * 24 * 3], b[24 * 24 * 3], c[3 * 24 * 24];
    zp_resample_t rs = {0};
    double box[4] = {3, 2, 27, 18};
    assert_int_equal(zp_resample(&rs, src, 33, 21, box, 24, 24, 0, ZP_RS_HWC_U8, NULL, a), 0);
    assert_int_equal(zp_resample(&rs, src, 33, 21, box, 24, 24, 1, ZP_RS_HWC_U8, NULL, b), 0);
    assert_int_equal(zp_resample(&rs, src, 33, 21, box, 24, 24, 0, ZP_RS_CHW_U8, NULL, c), 0);
    for (int y = 0; y < 24; y++)
        for (int x = 0; x < 24; x++)
            for (int ch = 0; ch < 3; ch++) {
                assert_int_equal(a[(y * 24 + x) * 3 + ch], b[(y * 24 + 23 - x) * 3 + ch]);
                assert_int_equal(a[(y * 24 + x) * 3 + ch], c[ch * 576 + y * 24 + x]);
            }
    zp_resample_free(&rs);
    free(src);
}

static void the_cached_size_brings_the_longer_side_down_never_up(void **state)
{
    (void)state;
    int w, h;
    zp_augment_whole_size(320, 500, 375, &w, &h);
    assert_int_equal(w, 320), assert_int_equal(h, 240);
    zp_augment_whole_size(320, 375, 500, &w, &h);
    assert_int_equal(w, 240), assert_int_equal(h, 320);
    zp_augment_whole_size(320, 12, 9, &w, &h);
    assert_int_equal(w, 12), assert_int_equal(h, 9);
    zp_augment_whole_size(320, 5000, 3, &w, &h);
    assert_int_equal(w, 320), assert_int_equal(h, 1);
}

static void whole_image_draws_fit_repeat_and_change_by_epoch(void **state)
{
    (void)state;
    zp_rrc_t r = {.seed = 4, .scale = {0.08, 1}, .log_ratio = {log(0.75), log(4.0 / 3)}, .hflip = 1};
    int same = 0;
    for (uint32_t i = 0; i < 2000; i++) {
        zp_aug_draw_t a, b, c;
        zp_augment_rrc_draw(&r, 3, i, 240, 320, &a);
        zp_augment_rrc_draw(&r, 3, i, 240, 320, &b);
        zp_augment_rrc_draw(&r, 4, i, 240, 320, &c);
        assert_memory_equal(&a, &b, sizeof a);
        same += !memcmp(&a, &c, sizeof a);
        assert_true(a.box_x >= 0 && a.box_y >= 0 && a.box_w >= 1 && a.box_h >= 1);
        assert_true(a.box_x + a.box_w <= 320 && a.box_y + a.box_h <= 240);
        assert_int_equal(a.dx, 0), assert_int_equal(a.dy, 0);
    }
    assert_true(same < 5);
    /* a box that never fits: the centred one of the widest allowed ratio */
    zp_rrc_t tight = {.seed = 1, .scale = {0.9, 1}, .log_ratio = {log(0.75), log(4.0 / 3)}};
    zp_aug_draw_t d;
    zp_augment_rrc_draw(&tight, 0, 7, 10, 100, &d);
    assert_true(d.box_y == 0 && d.box_h == 10 && d.box_w == 13 && d.box_x == 43 && d.flip == 0);
}

/* The filter written plainly, in double: one output channel value of the
 * box (bx, by, bw, bh) at output pixel (ox, oy) of ow x oh. */
static double reference(const uint8_t *src, int sw, int sh, const double b[4], int ow, int oh, int ox,
                        int oy, int c)
{
    double sx = b[2] / ow, sy = b[3] / oh, fx = sx < 1 ? 1 : sx, fy = sy < 1 ? 1 : sy;
    double cx = b[0] + (ox + 0.5) * sx, cy = b[1] + (oy + 0.5) * sy, sum = 0, wsum = 0;
    for (int y = (int)fmax(0, floor(cy - fy)); y < sh && y < cy + fy + 1; y++)
        for (int x = (int)fmax(0, floor(cx - fx)); x < sw && x < cx + fx + 1; x++) {
            double wx = 1 - fabs((x + 0.5 - cx) / fx), wy = 1 - fabs((y + 0.5 - cy) / fy);
            if (wx > 0 && wy > 0)
                sum += wx * wy * src[(y * sw + x) * 3 + c], wsum += wx * wy;
        }
    return sum / wsum;
}

static void every_scale_and_layout_matches_the_filter_written_plainly(void **state)
{
    (void)state;
    int sw = 97, sh = 83;
    uint8_t *src = malloc((size_t)sw * sh * 3);
    for (int i = 0; i < sw * sh * 3; i++) /* smooth and sharp parts */
        src[i] = (uint8_t)(i % 3 == 0 ? (i / 3 % sw) * 2 : i % 3 == 1 ? (i / 3 / sw) * 3 : i * 37 % 251);
    zp_resample_t rs = {0};
    /* enlarging (2 taps), shrinking by 1.3 (3-4), 2.5 (5-6), 4.5 (9-10); one box at the border */
    double boxes[][4] = {{10, 7, 20, 15}, {3, 2.5, 52, 39}, {0, 0, 97, 83}, {1, 1, 90, 80}};
    int sizes[][2] = {{40, 30}, {40, 30}, {39, 33}, {20, 17}};
    float lut[3 * 256];
    for (int i = 0; i < 3 * 256; i++)
        lut[i] = (float)(i % 256) + 1000.0f * (float)(i / 256);
    for (int k = 0; k < 4; k++) {
        int ow = sizes[k][0], oh = sizes[k][1];
        size_t n = (size_t)ow * oh * 3;
        uint8_t *hwc = malloc(n), *chw = malloc(n);
        float *f = malloc(n * sizeof *f);
        assert_int_equal(zp_resample(&rs, src, sw, sh, boxes[k], ow, oh, 0, ZP_RS_HWC_U8, NULL, hwc), 0);
        assert_int_equal(zp_resample(&rs, src, sw, sh, boxes[k], ow, oh, 1, ZP_RS_CHW_U8, NULL, chw), 0);
        assert_int_equal(zp_resample(&rs, src, sw, sh, boxes[k], ow, oh, 0, ZP_RS_CHW_F32, lut, f), 0);
        for (int y = 0; y < oh; y++)
            for (int x = 0; x < ow; x++)
                for (int c = 0; c < 3; c++) {
                    double want = reference(src, sw, sh, boxes[k], ow, oh, x, y, c);
                    int got = hwc[(y * ow + x) * 3 + c];
                    if (fabs(got - want) > 0.51)
                        fail_msg("box %d pixel %d,%d channel %d: %d, the filter gives %.3f", k, x, y, c, got, want);
                    assert_int_equal(chw[(size_t)c * ow * oh + y * ow + (ow - 1 - x)], got);
                    assert_true(f[(size_t)c * ow * oh + y * ow + x] == (float)(got + 1000 * c));
                }
        free(hwc), free(chw), free(f);
    }
    zp_resample_free(&rs);
    free(src);
}

static void the_pixels_a_resize_reads_are_enough_for_it(void **state)
{
    (void)state;
    int sw = 97, sh = 83;
    uint8_t *src = picture(sw, sh), *part = malloc((size_t)sw * sh * 3);
    uint8_t a[40 * 30 * 3], b[40 * 30 * 3];
    zp_resample_t rs = {0};
    double boxes[][4] = {{10.25, 7.5, 20, 15}, {3, 2.5, 52.7, 39}, {0, 0, 97, 83}, {30.4, 20.1, 66.6, 62.9}};
    int sizes[][2] = {{40, 30}, {17, 11}, {40, 30}, {25, 30}};
    int differ = 0, total = 0;
    for (int k = 0; k < 4; k++) {
        int ow = sizes[k][0], oh = sizes[k][1], x0, y0, x1, y1;
        zp_resample_reach(boxes[k], ow, oh, sw, sh, &x0, &y0, &x1, &y1);
        assert_true(0 <= x0 && x0 <= boxes[k][0] && boxes[k][0] + boxes[k][2] <= x1 && x1 <= sw);
        assert_true(0 <= y0 && y0 <= boxes[k][1] && boxes[k][1] + boxes[k][3] <= y1 && y1 <= sh);
        for (int y = y0; y < y1; y++) /* only those pixels, in an image of their own */
            memcpy(part + (size_t)(y - y0) * (x1 - x0) * 3, src + ((size_t)y * sw + x0) * 3,
                   (size_t)(x1 - x0) * 3);
        double moved[4] = {boxes[k][0] - x0, boxes[k][1] - y0, boxes[k][2], boxes[k][3]};
        assert_int_equal(zp_resample(&rs, src, sw, sh, boxes[k], ow, oh, 0, ZP_RS_HWC_U8, NULL, a), 0);
        assert_int_equal(zp_resample(&rs, part, x1 - x0, y1 - y0, moved, ow, oh, 0, ZP_RS_HWC_U8, NULL, b), 0);
        for (int i = 0; i < ow * oh * 3; i++) { /* the same but for float rounding */
            assert_true(abs(a[i] - b[i]) <= 1);
            differ += a[i] != b[i], total++;
        }
    }
    assert_true(differ * 100 < total);
    zp_resample_free(&rs);
    free(src), free(part);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_box_of_its_own_size_is_copied_as_is),
        cmocka_unit_test(a_flat_image_stays_flat_at_any_scale_and_layout),
        cmocka_unit_test(the_flip_mirrors_each_row_and_chw_splits_the_channels),
        cmocka_unit_test(every_scale_and_layout_matches_the_filter_written_plainly),
        cmocka_unit_test(the_pixels_a_resize_reads_are_enough_for_it),
        cmocka_unit_test(the_cached_size_brings_the_longer_side_down_never_up),
        cmocka_unit_test(whole_image_draws_fit_repeat_and_change_by_epoch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests of the random augmentation: reproducible per (seed, epoch, index),
 * different across epochs, and each transform against an independent
 * description of what it does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/image/augment.h"
#include "pipeline/dataset/augment_field.h"

#define C 3
#define H 12
#define W 16
#define N (C * H * W)

static void setup(zp_augment_t *a, const char *o1, const char *o2, const char *o3)
{
    char *ov[4] = {"dataset.source=synthetic", (char *)o1, (char *)o2, (char *)o3};
    int n = 1 + (o1 != NULL) + (o2 != NULL) + (o3 != NULL);
    char err[512];
    zp_config_t cfg;
    int rc = zp_config_load(&cfg, NULL, ov, n, err, sizeof err);
    if (rc)
        fail_msg("%s", err);
    cfg.mean = (zp_floats_t){3, {0.5, 0.5, 0}};
    cfg.std = (zp_floats_t){3, {0.5, 0.25, 2}};
    zp_dataset_meta_t meta = {.shape = {C, H, W}, .elems = N};
    assert_int_equal(zp_augment_init(a, &cfg, (int)meta.shape[0], (int)meta.shape[1], (int)meta.shape[2]), 0);
}

static void sample(float *x, uint32_t salt)
{
    for (int i = 0; i < N; i++)
        x[i] = (float)((i * 2654435761u + salt) % 1000) / 100.0f - 5;
}

static void same_seed_and_epoch_same_result_other_epoch_differs(void **state)
{
    (void)state;
    zp_augment_t a;
    setup(&a, "dataset.augment.hflip=true", "dataset.augment.crop_padding=2",
          "dataset.augment.resized_crop=true");
    assert_true(a.on);
    float in[N], o1[N], o2[N], o3[N];
    sample(in, 7);
    int differs = 0;
    for (uint32_t index = 0; index < 50; index++) {
        zp_augment(&a, 3, index, in, o1);
        zp_augment(&a, 5, index + 1, in, o3); /* another draw in between: no hidden state */
        zp_augment(&a, 3, index, in, o2);
        assert_memory_equal(o1, o2, sizeof o1);
        zp_augment(&a, 4, index, in, o2);
        differs += memcmp(o1, o2, sizeof o1) != 0;
    }
    assert_true(differs >= 45); /* a draw may repeat by chance, rarely */
    zp_augment_free(&a);
}

static void off_when_nothing_asked(void **state)
{
    (void)state;
    zp_augment_t a;
    setup(&a, NULL, NULL, NULL);
    assert_false(a.on);
    zp_augment_free(&a);
}

static void flip_mirrors_half_of_the_samples(void **state)
{
    (void)state;
    zp_augment_t a;
    setup(&a, "dataset.augment.hflip=true", NULL, NULL);
    float in[N], out[N];
    sample(in, 1);
    int flipped = 0;
    for (uint32_t index = 0; index < 1000; index++) {
        zp_aug_draw_t d;
        zp_augment_draw(&a, 0, index, &d);
        zp_augment(&a, 0, index, in, out);
        for (int i = 0; i < N; i++) {
            int x = i % W, rest = i - x;
            assert_true(out[i] == in[rest + (d.flip ? W - 1 - x : x)]);
        }
        flipped += d.flip;
    }
    assert_in_range(flipped, 430, 570);
    zp_augment_free(&a);
}

static void padded_crop_shifts_and_fills_with_black(void **state)
{
    (void)state;
    zp_augment_t a;
    setup(&a, "dataset.augment.crop_padding=3", NULL, NULL);
    const float black[C] = {-1, -2, 0}; /* -mean/std of each channel */
    float in[N], out[N];
    sample(in, 2);
    int seen[7][7] = {{0}};
    for (uint32_t index = 0; index < 2000; index++) {
        zp_aug_draw_t d;
        zp_augment_draw(&a, 1, index, &d);
        assert_in_range(d.dy, 0, 6);
        assert_in_range(d.dx, 0, 6);
        seen[d.dy][d.dx]++;
        zp_augment(&a, 1, index, in, out);
        for (int c = 0; c < C; c++)
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++) {
                    int sy = y + d.dy - 3, sx = x + d.dx - 3;
                    float want = sy < 0 || sy >= H || sx < 0 || sx >= W ? black[c]
                                                                        : in[(c * H + sy) * W + sx];
                    assert_true(out[(c * H + y) * W + x] == want);
                }
    }
    for (int i = 0; i < 7; i++)
        for (int j = 0; j < 7; j++)
            assert_true(seen[i][j] > 10); /* every offset is drawn */
    zp_augment_free(&a);
}

static void resized_crop_of_the_whole_sample_is_the_sample(void **state)
{
    (void)state;
    zp_augment_t a;
    setup(&a, "dataset.augment.resized_crop=true", "dataset.augment.scale=[1, 1]",
          "dataset.augment.ratio=[1.3333333, 1.3333333]"); /* W / H = 16 / 12 */
    float in[N], out[N];
    sample(in, 3);
    for (uint32_t index = 0; index < 20; index++) {
        zp_augment(&a, 0, index, in, out);
        assert_memory_equal(in, out, sizeof in);
    }
    zp_augment_free(&a);
}

/* Boxes inside the sample, of the asked area share and side ratio (up to the
 * rounding to whole pixels) or the centred fallback; the pixels of a ramp
 * are the bilinear samples of the box at (i + 0.5) * box / size - 0.5. */
static void resized_crop_boxes_and_bilinear_samples(void **state)
{
    (void)state;
    zp_augment_t a;
    setup(&a, "dataset.augment.resized_crop=true", "dataset.augment.scale=[0.2, 0.6]",
          "dataset.augment.ratio=[0.5, 2]");
    float in[N], out[N];
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                in[(c * H + y) * W + x] = (float)(x + 100 * y);
    for (uint32_t index = 0; index < 500; index++) {
        zp_aug_draw_t d;
        zp_augment_draw(&a, 2, index, &d);
        assert_true(d.box_y >= 0 && d.box_x >= 0 && d.box_h >= 1 && d.box_w >= 1);
        assert_true(d.box_y + d.box_h <= H && d.box_x + d.box_w <= W);
        double share = d.box_h * d.box_w / (H * W), ratio = d.box_w / d.box_h;
        assert_true(share > 0.2 * 0.6 && share < 0.6 * 1.6); /* rounding of small boxes */
        assert_true(ratio > 0.5 * 0.6 && ratio < 2 / 0.6);
        zp_augment(&a, 2, index, in, out);
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                double sy = fmin(fmax((y + 0.5) * d.box_h / H - 0.5, 0), d.box_h - 1);
                double sx = fmin(fmax((x + 0.5) * d.box_w / W - 0.5, 0), d.box_w - 1);
                double want = (d.box_x + sx) + 100 * (d.box_y + sy);
                for (int c = 0; c < C; c++)
                    assert_true(fabs(out[(c * H + y) * W + x] - want) < 1e-3);
            }
    }
    zp_augment_free(&a);
}

/* ---- the built-in ops on a Python Dataset's field (augment_field.h) ---- */

/* A Python config with the overrides, and records of fields (x float32 [2],
 * img uint8 `shape`, y int64). */
static int field_setup(zp_augment_field_t *a, const int64_t shape[3], const char *o1, const char *o2,
                       char *err, size_t len)
{
    char *ov[4] = {"dataset.source=python", "dataset.python.class=m:D", (char *)o1, (char *)o2};
    zp_config_t cfg;
    if (zp_config_load(&cfg, NULL, ov, 2 + (o1 != NULL) + (o2 != NULL), err, len))
        fail_msg("%s", err);
    zp_fields_t in = {.item = ZP_ITEM_TUPLE};
    int64_t two = 2;
    assert_int_equal(zp_fields_add(&in, "x", ZP_FT_F32, 1, &two, 0, 1 << 20, err, len), 0);
    assert_int_equal(zp_fields_add(&in, "img", ZP_FT_U8, 3, shape, 0, 1 << 20, err, len), 0);
    assert_int_equal(zp_fields_add(&in, "y", ZP_FT_I64, 0, NULL, 0, 1 << 20, err, len), 0);
    return zp_augment_field_init(a, &cfg, &in, err, len);
}

static void field_ops_refuse_a_field_they_cannot_augment_naming_it(void **state)
{
    (void)state;
    zp_augment_field_t a;
    char err[400];
    const int64_t chw[3] = {3, 8, 8}, gray[3] = {1, 8, 8};
    assert_int_equal(field_setup(&a, chw, "dataset.augment.hflip=true", NULL, err, sizeof err),
                     ZP_ECONFIG); /* the default field name, image, is not there */
    assert_non_null(strstr(err, "no field 'image'"));
    assert_int_equal(field_setup(&a, gray, "dataset.augment.hflip=true", "dataset.augment.field=img",
                                 err, sizeof err), ZP_ECONFIG);
    assert_non_null(strstr(err, "field 'img' is uint8 of 3 dimensions"));
    assert_int_equal(field_setup(&a, chw, "dataset.augment.field=x", "dataset.augment.hflip=true",
                                 err, sizeof err), ZP_ECONFIG);
    assert_non_null(strstr(err, "field 'x' is float32"));
    assert_int_equal(field_setup(&a, chw, "dataset.augment.field=img", NULL, err, sizeof err), 0);
    assert_false(a.on[0] || a.on[1]); /* nothing asked: off */
}

static void field_ops_resize_only_the_field_and_copy_the_others(void **state)
{
    (void)state;
    zp_augment_field_t a;
    char err[400];
    const int64_t chw[3] = {3, 8, 8};
    assert_int_equal(field_setup(&a, chw, "dataset.augment.field=img",
                                 "dataset.augment.size=4", err, sizeof err), 0);
    assert_true(a.on[0] && a.on[1]); /* the test split too: its size changes */
    assert_int_equal(a.out.f[1].shape[1], 4);
    assert_int_equal(a.out.f[1].shape[2], 4);
    assert_int_equal(a.out.record_bytes, 8 + 48 + 8);
    uint8_t in[8 + 192 + 8] = {0}, out[64];
    float x[2] = {1.5f, -2};
    int64_t y = 42;
    memcpy(in, x, 8);
    memset(in + 8, 77, 192); /* a flat image stays flat whatever the box */
    memcpy(in + a.in.f[2].offset, &y, 8);
    zp_augment_field_space_t sp = {0};
    zp_crop_t c;
    assert_int_equal(zp_augment_field_make(&a, &sp, ZP_SPLIT_TEST, 0, 3, in, out, &c), 0);
    assert_memory_equal(out, x, 8);
    assert_memory_equal(out + a.out.f[2].offset, &y, 8);
    for (int i = 0; i < 48; i++)
        assert_int_equal(out[8 + i], 77);
    assert_true(c.x == 0 && c.y == 0 && c.w == 8 && c.h == 8 && !c.flip); /* the whole, centred */
    zp_augment_field_space_free(&sp);
}

static void field_ops_give_the_same_pixels_channels_first_or_last(void **state)
{
    (void)state;
    zp_augment_field_t f, l;
    char err[400];
    const int64_t chw[3] = {3, 6, 10}, hwc[3] = {6, 10, 3};
    const char *ops = "dataset.augment.crop_padding=2";
    assert_int_equal(field_setup(&f, chw, "dataset.augment.field=img", ops, err, sizeof err), 0);
    assert_int_equal(field_setup(&l, hwc, "dataset.augment.field=img", ops, err, sizeof err), 0);
    f.drawer.hflip = l.drawer.hflip = 1;
    uint8_t a[200] = {0}, b[200] = {0}, oa[200], ob[200]; /* x 8, the image 180, 4 of padding, y 8 */
    assert_int_equal(f.in.record_bytes, 200);
    assert_int_equal(l.out.record_bytes, 200);
    for (int c = 0; c < 3; c++)
        for (int p = 0; p < 60; p++)
            a[8 + c * 60 + p] = b[8 + p * 3 + c] = (uint8_t)(1 + c * 60 + p);
    zp_augment_field_space_t sp = {0};
    int shifted = 0;
    for (uint32_t i = 0; i < 20; i++) {
        zp_crop_t c1, c2;
        assert_int_equal(zp_augment_field_make(&f, &sp, ZP_SPLIT_TRAIN, 1, i, a, oa, &c1), 0);
        assert_int_equal(zp_augment_field_make(&l, &sp, ZP_SPLIT_TRAIN, 1, i, b, ob, &c2), 0);
        assert_memory_equal(&c1, &c2, sizeof c1);
        for (int c = 0; c < 3; c++)
            for (int p = 0; p < 60; p++) {
                uint8_t v = oa[8 + c * 60 + p];
                assert_int_equal(v, ob[8 + p * 3 + c]);
                int y = p / 10, x = p % 10, sx = (c1.flip ? 9 - x : x) + c1.x, sy = y + c1.y;
                int inside = sx >= 0 && sx < 10 && sy >= 0 && sy < 6;
                assert_int_equal(v, inside ? 1 + c * 60 + sy * 10 + sx : 0); /* black outside */
            }
        shifted += c1.x != 0 || c1.y != 0;
    }
    assert_true(shifted > 10);
    zp_augment_field_space_free(&sp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_seed_and_epoch_same_result_other_epoch_differs),
        cmocka_unit_test(off_when_nothing_asked),
        cmocka_unit_test(flip_mirrors_half_of_the_samples),
        cmocka_unit_test(padded_crop_shifts_and_fills_with_black),
        cmocka_unit_test(resized_crop_of_the_whole_sample_is_the_sample),
        cmocka_unit_test(resized_crop_boxes_and_bilinear_samples),
        cmocka_unit_test(field_ops_refuse_a_field_they_cannot_augment_naming_it),
        cmocka_unit_test(field_ops_resize_only_the_field_and_copy_the_others),
        cmocka_unit_test(field_ops_give_the_same_pixels_channels_first_or_last),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

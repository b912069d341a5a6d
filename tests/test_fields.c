/* test_fields.c — a sample's named fields (pipeline/dataset/fields.h): each field
 * aligned to its element size in the record, the record padded to its
 * largest element, the description's lines read back as written, and a bad
 * field refused with its name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pipeline/dataset/fields.h"
#include "schemas/errors.h"

static char err[256];

static void fields_are_aligned_to_their_element_and_the_record_to_the_largest(void **state)
{
    (void)state;
    zp_fields_t fs = {0};
    int64_t rgb[3] = {3, 1, 1}, two[1] = {2};
    assert_int_equal(zp_fields_add(&fs, "image", ZP_FT_U8, 3, rgb, 0, 1 << 20, err, sizeof err), 0);
    assert_int_equal(zp_fields_add(&fs, "target", ZP_FT_F32, 1, two, 0, 1 << 20, err, sizeof err), 0);
    assert_int_equal(zp_fields_add(&fs, "label", ZP_FT_I64, 0, NULL, 0, 1 << 20, err, sizeof err), 0);
    assert_int_equal(zp_fields_add(&fs, "half", ZP_FT_BF16, 0, NULL, 0, 1 << 20, err, sizeof err), 0);
    assert_int_equal(fs.f[0].offset, 0);
    assert_int_equal(fs.f[1].offset, 4); /* after 3 bytes, at the next multiple of 4 */
    assert_int_equal(fs.f[1].bytes, 8);
    assert_int_equal(fs.f[2].offset, 16); /* the record so far was padded to 4: 12, then 8-aligned */
    assert_int_equal(fs.f[3].offset, 24);
    assert_int_equal(fs.record_bytes, 32); /* 26, padded to the int64's 8 */
    for (int i = 0; i < fs.n; i++) /* a batch's field keeps its alignment in every record */
        assert_int_equal(fs.record_bytes % zp_fields_type_size(fs.f[i].dtype), 0);
}

static void the_description_reads_back_as_written(void **state)
{
    (void)state;
    zp_fields_t fs = {.item = ZP_ITEM_DICT}, back;
    int64_t shape[6] = {2, 3, 4, 5, 6, 7};
    assert_int_equal(zp_fields_add(&fs, "x.0", ZP_FT_F16, 6, shape, 0, 1 << 20, err, sizeof err), 0);
    assert_int_equal(zp_fields_add(&fs, "y-1", ZP_FT_F64, 1, shape, 0, 1 << 20, err, sizeof err), 0);
    char text[1024];
    int n = zp_fields_format(&fs, text, sizeof text);
    assert_true(n > 0);
    assert_string_equal(text, "fields 2 dict\nfield x.0 float16 6 2 3 4 5 6 7\nfield y-1 float64 1 2\n");
    assert_int_equal(zp_fields_format(&fs, text, 20), -1); /* too small: -1, not a cut line */
    char meta[1200];
    snprintf(meta, sizeof meta, "zeus-pipe dataset 1\nn 3 4\n%s", "fields 2 dict\n"
             "field x.0 float16 6 2 3 4 5 6 7\nfield y-1 float64 1 2\n");
    assert_int_equal(zp_fields_parse(&back, meta, 1 << 20, err, sizeof err), 0);
    assert_int_equal(back.n, 2);
    assert_int_equal(back.item, ZP_ITEM_DICT);
    assert_int_equal(back.record_bytes, fs.record_bytes);
    assert_memory_equal(back.f, fs.f, sizeof fs.f[0] * 2);
    assert_int_equal(zp_fields_parse(&back, "zeus-pipe dataset 1\nn 3 4\n", 1 << 20, err, sizeof err),
                     -ENOENT);
}

static void the_builtin_sources_are_an_image_and_a_label_column(void **state)
{
    (void)state;
    zp_fields_t fs;
    int64_t chw[3] = {1, 28, 28};
    zp_fields_builtin(&fs, ZP_FT_U8, chw);
    assert_int_equal(fs.n, 2);
    assert_string_equal(fs.f[0].name, "image");
    assert_int_equal(fs.record_bytes, 784); /* the image alone, unpadded, as it always was */
    assert_true(fs.f[1].offset == ZP_FIELD_IN_LABELS);
    char text[256];
    zp_fields_format(&fs, text, sizeof text);
    assert_string_equal(text, "fields 2 tuple\nfield image uint8 3 1 28 28\nfield label int32 0 labels\n");
    zp_fields_t back;
    assert_int_equal(zp_fields_parse(&back, text, 1 << 20, err, sizeof err), 0);
    assert_int_equal(back.record_bytes, 784);
    assert_true(back.f[1].offset == ZP_FIELD_IN_LABELS);
}

static void a_bad_field_is_refused_naming_it(void **state)
{
    (void)state;
    zp_fields_t fs = {0};
    int64_t big[2] = {4096, 4096}, zero[1] = {0};
    assert_int_equal(zp_fields_add(&fs, "a b", ZP_FT_U8, 0, NULL, 0, 1 << 20, err, sizeof err), ZP_EDATA);
    assert_non_null(strstr(err, "field 'a b'"));
    assert_int_equal(zp_fields_add(&fs, "x", 0, 0, NULL, 0, 1 << 20, err, sizeof err), ZP_EDATA);
    assert_non_null(strstr(err, "unknown element type"));
    assert_int_equal(zp_fields_add(&fs, "x", ZP_FT_U8, 7, big, 0, 1 << 20, err, sizeof err), ZP_EDATA);
    assert_int_equal(zp_fields_add(&fs, "x", ZP_FT_U8, 1, zero, 0, 1 << 20, err, sizeof err), ZP_EDATA);
    assert_non_null(strstr(err, "dimension 0 is 0"));
    assert_int_equal(zp_fields_add(&fs, "x", ZP_FT_F32, 2, big, 0, 1 << 20, err, sizeof err), ZP_EDATA);
    assert_int_equal(zp_fields_add(&fs, "x", ZP_FT_U8, 0, NULL, 0, 1 << 20, err, sizeof err), 0);
    assert_int_equal(zp_fields_add(&fs, "x", ZP_FT_U8, 0, NULL, 0, 1 << 20, err, sizeof err), ZP_EDATA);
    assert_non_null(strstr(err, "a second field of that name"));
    assert_int_equal(fs.n, 1);
    zp_fields_t back;
    assert_int_equal(zp_fields_parse(&back, "fields 2 tuple\nfield a uint8 0\n", 1 << 20, err, sizeof err), ZP_EDATA);
    assert_int_equal(zp_fields_parse(&back, "fields 1 list\nfield a uint8 0\n", 1 << 20, err, sizeof err), ZP_EDATA);
    assert_int_equal(zp_fields_parse(&back, "fields 1 tuple\nfield a uint8 2 3\n", 1 << 20, err, sizeof err), ZP_EDATA);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fields_are_aligned_to_their_element_and_the_record_to_the_largest),
        cmocka_unit_test(the_description_reads_back_as_written),
        cmocka_unit_test(the_builtin_sources_are_an_image_and_a_label_column),
        cmocka_unit_test(a_bad_field_is_refused_naming_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

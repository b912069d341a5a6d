/* abi_layout.c — the public API's constants and structs as the compiler lays
 * them out, as JSON on stdout: every ZP_CLIENT_* value, and each struct's
 * size, alignment and fields (name, offset, size). integration/test_abi.py
 * holds the Python package's ctypes mirror (python/zeus_pipe/_lib.py) against
 * it, and this listing against the header's own text, so that a field moved,
 * added or retyped in one and not the other fails the test.
 *
 *     zp-abi-layout > abi.json
 *
 * Built with pipeline/include alone, as a user's program is. Exit 0. */
#include <zeus_pipe.h>

#include <stddef.h>
#include <stdio.h>

static int g_items; /* items printed in the current JSON object or array */

static void item(void) { printf("%s\n    ", g_items++ ? "," : ""); }

static void constant(const char *name, long long value)
{
    item();
    printf("\"%s\": %lld", name, value);
}

#define CONSTANT(name) constant(#name, (long long)(name))

static void struct_begin(const char *name, size_t size, size_t align)
{
    item();
    printf("\"%s\": {\"size\": %zu, \"align\": %zu, \"fields\": [", name, size, align);
    g_items = 0;
}

static void struct_end(void)
{
    printf("]}");
    g_items = 1;
}

static void field(const char *name, size_t offset, size_t size)
{
    printf("%s[\"%s\", %zu, %zu]", g_items++ ? ", " : "", name, offset, size);
}

#define STRUCT(T) struct_begin(#T, sizeof(T), _Alignof(T))
#define FIELD(T, f) field(#f, offsetof(T, f), sizeof(((T *)0)->f))

static void constants(void)
{
    CONSTANT(ZP_CLIENT_API_VERSION);
    CONSTANT(ZP_CLIENT_EINVAL);
    CONSTANT(ZP_CLIENT_ECONFIG);
    CONSTANT(ZP_CLIENT_EPROTO);
    CONSTANT(ZP_CLIENT_EDATA);
    CONSTANT(ZP_CLIENT_ESTALE);
    CONSTANT(ZP_CLIENT_EFULL);
    CONSTANT(ZP_CLIENT_ENOMEM);
    CONSTANT(ZP_CLIENT_EZMQ);
    CONSTANT(ZP_CLIENT_ESTOP);
    CONSTANT(ZP_CLIENT_ETIMEOUT);
    CONSTANT(ZP_CLIENT_EGPU);
    CONSTANT(ZP_CLIENT_BATCH);
    CONSTANT(ZP_CLIENT_EPOCH_END);
    CONSTANT(ZP_CLIENT_END);
    CONSTANT(ZP_CLIENT_TRAIN);
    CONSTANT(ZP_CLIENT_TEST);
    CONSTANT(ZP_CLIENT_F32);
    CONSTANT(ZP_CLIENT_U8);
    CONSTANT(ZP_CLIENT_I8);
    CONSTANT(ZP_CLIENT_I16);
    CONSTANT(ZP_CLIENT_I32);
    CONSTANT(ZP_CLIENT_I64);
    CONSTANT(ZP_CLIENT_F16);
    CONSTANT(ZP_CLIENT_BF16);
    CONSTANT(ZP_CLIENT_F64);
    CONSTANT(ZP_CLIENT_ITEM_TUPLE);
    CONSTANT(ZP_CLIENT_ITEM_DICT);
    CONSTANT(ZP_CLIENT_PLAN_TRAIN);
    CONSTANT(ZP_CLIENT_PLAN_TEST);
    CONSTANT(ZP_CLIENT_PLAN_TEST_FIRST);
    item(); /* SIZE_MAX: unsigned, past long long */
    printf("\"ZP_CLIENT_IN_LABELS\": %zu", (size_t)ZP_CLIENT_IN_LABELS);
}

static void structs(void)
{
    STRUCT(zp_client_field_t);
    FIELD(zp_client_field_t, name);
    FIELD(zp_client_field_t, dtype);
    FIELD(zp_client_field_t, ndim);
    FIELD(zp_client_field_t, normalize);
    FIELD(zp_client_field_t, shape);
    FIELD(zp_client_field_t, offset);
    FIELD(zp_client_field_t, bytes);
    FIELD(zp_client_field_t, reserved);
    struct_end();

    STRUCT(zp_client_batch_t);
    FIELD(zp_client_batch_t, kind);
    FIELD(zp_client_batch_t, split);
    FIELD(zp_client_batch_t, epoch);
    FIELD(zp_client_batch_t, index);
    FIELD(zp_client_batch_t, batches);
    FIELD(zp_client_batch_t, n);
    FIELD(zp_client_batch_t, indices);
    FIELD(zp_client_batch_t, labels);
    FIELD(zp_client_batch_t, data);
    FIELD(zp_client_batch_t, dtype);
    FIELD(zp_client_batch_t, c);
    FIELD(zp_client_batch_t, h);
    FIELD(zp_client_batch_t, w);
    FIELD(zp_client_batch_t, sample_bytes);
    FIELD(zp_client_batch_t, samples);
    FIELD(zp_client_batch_t, expected);
    FIELD(zp_client_batch_t, slot);
    FIELD(zp_client_batch_t, gen);
    FIELD(zp_client_batch_t, fields);
    FIELD(zp_client_batch_t, nfields);
    FIELD(zp_client_batch_t, reserved);
    struct_end();

    STRUCT(zp_client_run_t);
    FIELD(zp_client_run_t, seed);
    FIELD(zp_client_run_t, world);
    FIELD(zp_client_run_t, rank);
    FIELD(zp_client_run_t, batch_size);
    FIELD(zp_client_run_t, epochs);
    FIELD(zp_client_run_t, samples);
    FIELD(zp_client_run_t, batches);
    FIELD(zp_client_run_t, shuffle);
    FIELD(zp_client_run_t, drop_last);
    FIELD(zp_client_run_t, classes);
    FIELD(zp_client_run_t, augment);
    FIELD(zp_client_run_t, reserved);
    struct_end();
}

int main(void)
{
    printf("{\"constants\": {");
    g_items = 0;
    constants();
    printf("\n},\n\"structs\": {");
    g_items = 0;
    structs();
    printf("\n}}\n");
    return 0;
}

/* libFuzzer target: a value read from the LMDB cache (pipeline/cachedb/cachedb.c:
 * zp_cachedb_check_value, the check every hit passes before its bytes are copied
 * into a batch), for a dataset of 1x8x8 u8 samples of 4 classes. The
 * input's first byte is not the value: with its bit 2 set the target writes
 * the split's fingerprint (FP) into the value, with its bit 0 the value's
 * checksum, so the fuzzer reaches the fields behind them; the
 * next 4 bytes are the key's index (little-endian). What passes must be of
 * the dataset: its label among the classes, its payload inside the value.
 * The same bytes go through zp_cachedb_check_whole (a whole train image of at
 * most 64 px a side, the crop at assembly's value; bit 1 of the first byte
 * writes its checksum): what passes has its size and lies inside the value.
 * `fuzz_cache --write-seeds=DIR` writes values as the cache stage stores
 * them (tests/fuzz/seeds/cache holds some).
 * Build and run: scripts/fuzz.sh [SECONDS]. */
#define _GNU_SOURCE
#include "pipeline/cachedb/cachedb.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static const zp_dataset_meta_t META = {.n = {600, 100}, .shape = {1, 8, 8}, .elems = 64,
                                       .dtype = ZP_DTYPE_U8, .sample_bytes = 64, .classes = 4};
static const uint64_t FP = 0x66757a7a63616368ull; /* the split's value fingerprint */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5)
        return 0;
    uint32_t index;
    memcpy(&index, data + 1, 4);
    size_t n = size - 5;
    uint8_t *value = malloc(n ? n : 1); /* its own allocation: ASan sees a read past it */
    if (!value)
        abort();
    memcpy(value, data + 5, n);
    if (data[0] & 4 && n >= ZP_CACHE_HDR)
        memcpy(value + 32, &FP, 8);
    if (data[0] & 1 && n == ZP_CACHE_HDR + META.sample_bytes) {
        uint64_t sum = zp_cachedb_sum(value, value + ZP_CACHE_HDR, META.sample_bytes);
        memcpy(value + 40, &sum, 8);
    }
    MDB_val v = {.mv_size = n, .mv_data = value};
    int32_t label = -1;
    const uint8_t *payload = NULL;
    const char *why = NULL;
    int rc = zp_cachedb_check_value(&v, &META, FP, index, &label, &payload, &why);
    if (rc && !why)
        abort(); /* a refusal says why */
    if (!rc && (label < 0 || label >= META.classes || payload < value ||
                payload + META.sample_bytes > value + n))
        abort(); /* passed, yet not of the dataset */
    if (!rc) {
        volatile uint8_t last = payload[META.sample_bytes - 1];
        (void)last;
    }
    if (data[0] & 2 && n >= ZP_CACHE_HDR) {
        uint32_t bytes;
        memcpy(&bytes, value + 28, 4);
        if (bytes <= n - ZP_CACHE_HDR) {
            uint64_t sum = zp_cachedb_sum(value, value + ZP_CACHE_HDR, bytes);
            memcpy(value + 40, &sum, 8);
        }
    }
    zp_cache_whole_t img;
    why = NULL;
    rc = zp_cachedb_check_whole(&v, &META, FP, 64, index, &label, &img, &why);
    if (rc && !why)
        abort();
    if (!rc && (label < 0 || label >= META.classes || img.w < 1 || img.w > 64 || img.h < 1 ||
                img.h > 64 || img.payload != value + ZP_CACHE_HDR ||
                img.payload + img.bytes != value + n ||
                (img.layout == ZP_CACHE_RAW && img.bytes != (size_t)img.w * img.h * 3)))
        abort(); /* passed, yet not a whole image of the dataset */
    free(value);
    return 0;
}

/* Values as the cache stage writes them: indices 0, 1 and 599, labels 0..3. */
static void write_seeds(const char *dir)
{
    const uint32_t indices[] = {0, 1, 599};
    for (int i = 0; i < 3; i++) {
        uint8_t in[5 + ZP_CACHE_HDR + 64];
        in[0] = 4; /* the fingerprint kept as written */
        memcpy(in + 1, &indices[i], 4);
        for (int k = 0; k < 64; k++)
            in[5 + ZP_CACHE_HDR + k] = (uint8_t)(k * 3 + i);
        zp_cachedb_header(in + 5, &META, FP, indices[i], i, in + 5 + ZP_CACHE_HDR, 64);
        char path[4200];
        snprintf(path, sizeof path, "%s/value-%u", dir, indices[i]);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(in, 1, sizeof in, f) != sizeof in)
            exit(1);
        fclose(f);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    for (int i = 1; i < *argc; i++)
        if (!strncmp((*argv)[i], "--write-seeds=", 14)) {
            write_seeds((*argv)[i] + 14);
            exit(0);
        }
    return 0;
}

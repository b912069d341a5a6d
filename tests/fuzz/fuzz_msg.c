/* libFuzzer target: zp_msg_decode(), the one decoder of every wire message.
 *
 * Input: [frame count - 1 (low 2 bits)] then per frame [u16 LE length][bytes];
 * the last frame takes what is left. `fuzz_msg --write-seeds=DIR` writes one
 * valid input per message type (the seed corpus) and exits.
 * Build and run: scripts/fuzz.sh [SECONDS]. */
#include "schemas/msg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int n = 1 + (data[0] & 3);
    const void *frames[ZP_MAX_FRAMES];
    size_t sizes[ZP_MAX_FRAMES];
    size_t at = 1;
    for (int i = 0; i < n; i++) {
        size_t len = size - at;
        if (i + 1 < n && size - at >= 2) {
            len = (size_t)data[at] | (size_t)data[at + 1] << 8;
            at += 2;
            len = len < size - at ? len : size - at;
        }
        frames[i] = data + at;
        sizes[i] = len;
        at += len;
    }
    zp_msg_t m;
    char why[256];
    if (zp_msg_decode(&m, frames, sizes, n, why, sizeof why) == 0) {
        /* an accepted message keeps its promises: payload sizes match the header */
        if ((m.type == ZP_MSG_TASK || m.type == ZP_MSG_FETCH) && m.frame_size[1] != m.n * 4)
            abort();
        if ((m.type == ZP_MSG_SAMPLES || m.type == ZP_MSG_RESULT) &&
            (m.frame_size[2] != m.n * 4 || m.frame_size[3] != m.n * m.elems * zp_dtype_size(m.dtype)))
            abort();
        if (m.type == ZP_MSG_REDUCE && (m.frame_size[1] != m.n * 4 || m.frame_size[2] != m.elems * 8))
            abort();
    } else if (!why[0]) {
        abort(); /* a refusal always says why */
    }
    zp_msg_release(&m);
    return 0;
}

#define FRAMES(name, wire, frames, req, doc) frames,
static const int FRAME_COUNT[ZP_MSG_COUNT] = {0, ZP_MSGS(FRAMES)};

static void write_seed(const char *dir, zp_msg_type_t t)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    zp_msg_t m = {.type = t, .id = 7, .credit = 2, .split = 1, .epoch = 3, .n = 2, .offset = 4,
                  .elems = 3, .slot = 1, .gen = 9, .index = 2, .batches = 5, .error = "oops",
                  .cmd = "down"};
    if (t == ZP_MSG_EVENT || t == ZP_MSG_STAT_REP) {
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        zp_msg_pack_begin(&pk, t, 1);
        zp_msg_pack_str(&pk, "body");
        if (t == ZP_MSG_STAT_REP)
            msgpack_pack_array(&pk, 1);
        msgpack_pack_map(&pk, 2);
        zp_msg_pack_str(&pk, "kind");
        zp_msg_pack_str(&pk, "stats");
        zp_msg_pack_str(&pk, "ns");
        msgpack_pack_array(&pk, 2);
        msgpack_pack_int64(&pk, 1000);
        msgpack_pack_int64(&pk, 2000);
    } else if (zp_msg_encode(&m, &sb)) {
        msgpack_sbuffer_destroy(&sb);
        return;
    }
    static const uint8_t payload[64] = {1, 0, 0, 0, 2};
    size_t extra[3] = {8, 8, 24}; /* n = 2 indices, labels; n * elems floats */
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, zp_msg_name(t));
    FILE *f = fopen(path, "wb");
    if (f) {
        int frames = FRAME_COUNT[t];
        fputc(frames - 1, f);
        fputc((int)(sb.size & 0xff), f);
        fputc((int)(sb.size >> 8), f);
        fwrite(sb.data, 1, sb.size, f);
        for (int i = 1; i < frames; i++) {
            if (i + 1 < frames) {
                fputc((int)extra[i - 1], f);
                fputc(0, f);
            }
            fwrite(payload, 1, extra[i - 1], f);
        }
        fclose(f);
    }
    msgpack_sbuffer_destroy(&sb);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    for (int i = 1; i < *argc; i++)
        if (!strncmp((*argv)[i], "--write-seeds=", 14)) {
            for (int t = 1; t < ZP_MSG_COUNT; t++)
                write_seed((*argv)[i] + 14, (zp_msg_type_t)t);
            exit(0);
        }
    return 0;
}

/* libFuzzer target: a checkpoint file (pipeline/stage/ckpt.c), header and payload,
 * read back as up --resume, the prefetch and the trainer do, then its
 * position checked against a run of 10 epochs of 50 batches. The input's
 * first byte is not the file: with its bit 0 set the target writes the
 * checksums the rest needs (XXH3 is a checksum, not a key: anyone who
 * writes the file can), so the fuzzer reaches the fields behind them. What
 * zp_ckpt_check passes must lie inside the run. The seed corpus is a real
 * run's last.ckpt behind a 0 and a 1 (tests/fuzz/seeds/ckpt).
 * Build and run: scripts/fuzz.sh [SECONDS]. */
#include "tests/fuzz/fuzz_rundir.h"
#include "pipeline/stage/ckpt.h"

#include <stdint.h>
#include <xxhash.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size)
        return 0;
    int fix = data[0] & 1;
    data++, size--;
    uint8_t *file = malloc(size ? size : 1);
    if (!file)
        abort();
    memcpy(file, data, size);
    if (fix && size >= ZP_CKPT_HDR) {
        uint64_t sum = XXH3_64bits(file + ZP_CKPT_HDR, size - ZP_CKPT_HDR);
        memcpy(file + 24, &sum, 8);
        sum = XXH3_64bits(file, 64);
        memcpy(file + 64, &sum, 8);
    }
    fuzz_put("checkpoints/last.ckpt", file, size);
    free(file);
    char path[160], err[4400] = "";
    zp_ckpt_path(path, sizeof path, fuzz_rundir(), "last");
    zp_ckpt_pos_t pos;
    void *payload = NULL;
    size_t bytes = 0;
    int rc = zp_ckpt_read(path, &pos, &payload, &bytes, err, sizeof err);
    fuzz_said_why(rc, err);
    if (rc) {
        if (payload)
            abort(); /* a refused file hands out nothing */
        return 0;
    }
    if (bytes != size - ZP_CKPT_HDR)
        abort();
    volatile uint8_t last = bytes ? ((uint8_t *)payload)[bytes - 1] : 0; /* all of it is there */
    (void)last;
    free(payload);
    err[0] = 0;
    rc = zp_ckpt_check(&pos, path, 10, 50, err, sizeof err);
    fuzz_said_why(rc, err);
    if (!rc && (pos.epoch > 10 || pos.batch > 50 || (pos.epoch == 10 && pos.batch) ||
                pos.step > pos.epoch * 50 + pos.batch))
        abort(); /* passed, yet outside the run */
    return 0;
}

/* libFuzzer target: a checkpoint file (pipeline/stage/ckpt.c), header and payload,
 * read back as up --resume, the prefetch and the trainer do, then its
 * position checked against a run of 10 epochs of 50 batches (500 samples of
 * 10, one rank), and regrouped for 1 to 3 ranks. The input's
 * first byte is not the file: with its bit 0 set the target writes the
 * checksums the rest needs (XXH3 is a checksum, not a key: anyone who
 * writes the file can), so the fuzzer reaches the fields behind them. What
 * zp_ckpt_check passes must lie inside the run. The seed corpus is a real
 * run's last.ckpt behind a 0 and a 1, of format version 2 and 3
 * (tests/fuzz/seeds/ckpt).
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
    size_t hb = size >= 12 && file[8] == 72 ? 72 : ZP_CKPT_HDR; /* version 2's, or 3's */
    if (fix && size >= hb) {
        uint64_t sum = XXH3_64bits(file + hb, size - hb);
        memcpy(file + 24, &sum, 8);
        sum = XXH3_64bits(file, hb - 8);
        memcpy(file + hb - 8, &sum, 8);
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
    if (bytes != size - hb)
        abort();
    volatile uint8_t last = bytes ? ((uint8_t *)payload)[bytes - 1] : 0; /* all of it is there */
    (void)last;
    free(payload);
    err[0] = 0;
    const zp_config_t c = {.epochs = 10, .batch_size = 10}; /* 500 samples: 50 batches on 1 rank */
    rc = zp_ckpt_check(&pos, path, &c, 500, 1, err, sizeof err);
    fuzz_said_why(rc, err);
    if (rc)
        return 0;
    if (pos.epoch > 10 || pos.batch > 50 || (pos.epoch == 10 && pos.batch) || pos.from > 500 ||
        pos.world > ZP_CKPT_WORLD_MAX || pos.step > pos.epoch * 50 + (pos.from + 9) / 10 + pos.batch)
        abort(); /* passed, yet outside the run */
    int64_t repeats, at = zp_ckpt_offset(&pos, &c, 500, 1, &repeats);
    if (at < (int64_t)pos.from || at > 500 || repeats != 0)
        abort(); /* ranks in step: a position in the epoch, no repeats */
    /* goes on with any number of ranks; a version 2 file (world 0) is its run's (one rank),
     * which up --resume keeps (another is refused) */
    for (int world = 1; world <= (pos.world ? 3 : 1); world++) {
        zp_ckpt_pos_t again = pos;
        zp_ckpt_regroup(&again, &c, 500, world);
        if (zp_ckpt_check(&again, path, &c, 500, world, err, sizeof err))
            abort(); /* what a regroup makes is a position of the run */
    }
    return 0;
}

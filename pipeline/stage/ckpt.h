/* ckpt.h — checkpoint files: what a run needs to go on exactly where it was.
 *
 * A file is a 72-byte header followed by the payload:
 *
 *   offset  size  field
 *        0     8  magic "ZPCKPT01"
 *        8     4  header bytes (72)
 *       12     4  format version (2)
 *       16     8  payload bytes
 *       24     8  XXH3-64 of the payload
 *       32     8  step: train steps done
 *       40     8  epoch: the epoch to go on with (from 0)
 *       48     8  batch: its next train batch (0 = the epoch's start)
 *       56     8  seed of the run (a checkpoint of another seed is refused)
 *       64     8  XXH3-64 of bytes 0..63: the position is checked even where
 *                 only the header is read (prefetch's --resume)
 *
 * Version 1 had no header checksum; this build refuses it, saying so.
 * The payload belongs to the trainer (model, optimizer state, metrics). The
 * sampler needs no state of its own: an epoch's order is a function of
 * (seed, epoch), so (epoch, batch) is its position. Files are written to a
 * temporary name, fsynced and renamed, and the directory is fsynced after the
 * rename, so a crash leaves the old one or the new one, intact.
 */
#ifndef ZP_CKPT_H
#define ZP_CKPT_H

#include "pipeline/config/config.h"

#include <stddef.h>
#include <stdint.h>

#define ZP_CKPT_HDR 72
#define ZP_CKPT_VERSION 2

typedef struct {
    uint64_t step, epoch, batch, seed;
} zp_ckpt_pos_t;

/* Writes header + payload atomically to `path` (a temporary file, fsynced,
 * renamed over it). 0, or -errno (-ENOSPC on a full disk); the old file is
 * then left as it was. */
int zp_ckpt_write(const char *path, const zp_ckpt_pos_t *pos, const void *payload, size_t bytes);

/* Reads `path`: checks magic, version, the header's checksum, sizes and
 * (reading the payload) the payload's checksum. On success the
 * payload is malloc'ed into *payload (owned by the caller; NULL to read the
 * header only). 0, or -errno / ZP_EDATA with what is wrong with the file in
 * err. */
int zp_ckpt_read(const char *path, zp_ckpt_pos_t *pos, void **payload, size_t *bytes, char *err,
                 size_t errlen);

/* Checks a position read back against the run it would resume: `epochs`
 * (trainer.epochs) and `batches`, the train batches of an epoch on rank 0
 * (the most of any rank; a checkpoint's batch counts rank 0's). The epoch is
 * at most `epochs` (equal only at batch 0: the run is over), the batch at
 * most `batches` (written after an epoch's last one), and the step at most
 * epoch * batches + batch (a step is a train batch). The header's checksum
 * only catches accidents; whoever writes the file can fix it up, so every
 * field is bounded here before it indexes or counts anything. 0, or ZP_EDATA
 * with a sentence naming `path`, the field and its range in err. */
int zp_ckpt_check(const zp_ckpt_pos_t *pos, const char *path, int64_t epochs, int64_t batches,
                  char *err, size_t errlen);

/* The train batches of an epoch on rank 0 of `world` (the most of any rank)
 * in a split of `samples`, trainer.limit_train_batches applied: the
 * `batches` zp_ckpt_check wants. */
int64_t zp_ckpt_epoch_batches(const zp_config_t *c, int64_t samples, int world);

/* <run>/checkpoints/<name>.ckpt */
void zp_ckpt_path(char *buf, size_t len, const char *run_dir, const char *name);

#endif

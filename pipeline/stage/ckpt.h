/* ckpt.h — checkpoint files: what a run needs to go on exactly where it was.
 *
 * A file is a 96-byte header followed by the payload:
 *
 *   offset  size  field
 *        0     8  magic "ZPCKPT01"
 *        8     4  header bytes (96)
 *       12     4  format version (3)
 *       16     8  payload bytes
 *       24     8  XXH3-64 of the payload
 *       32     8  step: train steps done
 *       40     8  epoch: the epoch to go on with (from 0)
 *       48     8  batch: its next train batch on every rank, counted from `from`
 *       56     8  seed of the run (a checkpoint of another seed is refused)
 *       64     8  from: the entry of the epoch's permutation its ranks' shards
 *                 start at (0 but in an epoch resumed with another world)
 *       72     8  world: the ranks that wrote it
 *       80     8  flags: ZP_CKPT_TRAIN_RECORDED (bit 0): the epoch's train
 *                 split is over and recorded (a save during its test split);
 *                 without it a position after its last batch still has the
 *                 train split's record to make
 *       88     8  XXH3-64 of bytes 0..87: the position is checked even where
 *                 only the header is read (prefetch's --resume)
 *
 * Version 2 (a 72-byte header, its checksum at 64) had no from, world and
 * flags; it is read as from 0, world 0 (the run's own) and no flags. Version 1 had no header
 * checksum; this build refuses it, saying so. The payload belongs to the
 * trainer (model, optimizer state, metrics). The sampler needs no state of
 * its own: an epoch's order is a function of (seed, epoch), so (epoch, from,
 * world, batch) is its position, and zp_ckpt_offset says where in the
 * permutation that is, for any number of ranks to go on from. Files are
 * written to a temporary name, fsynced and renamed, and the directory is
 * fsynced after the rename, so a crash leaves the old one or the new one,
 * intact.
 */
#ifndef ZP_CKPT_H
#define ZP_CKPT_H

#include "pipeline/config/config.h"

#include <stddef.h>
#include <stdint.h>

#define ZP_CKPT_HDR 96
#define ZP_CKPT_TRAIN_RECORDED 1u
#define ZP_CKPT_VERSION 3

typedef struct {
    uint64_t step, epoch, batch, seed;
    uint64_t from, world; /* world 0: read from a version 2 file, the run's own */
    uint64_t flags;       /* ZP_CKPT_TRAIN_RECORDED */
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

/* Checks a position read back against the run it would resume (config c,
 * `samples` train samples, `world` ranks now; the position's are its own
 * world's, or `world`'s for a version 2 file): the epoch at most
 * trainer.epochs (equal only at its start: the run is over), `from` at most
 * `samples`, the world 1..ZP_CKPT_WORLD_MAX, the batch at most the epoch's
 * train batches on rank 0 from `from` (the most of any rank; equal: after
 * its last), and the step at most epoch * (an epoch's batches on one rank) +
 * the batches of one rank before `from` + batch (a step is a train batch). The header's checksum only catches
 * accidents; whoever writes the file can fix it up, so every field is
 * bounded here before it indexes or counts anything. 0, or ZP_EDATA with a
 * sentence naming `path`, the field and its range in err. */
#define ZP_CKPT_WORLD_MAX 65536
int zp_ckpt_check(const zp_ckpt_pos_t *pos, const char *path, const zp_config_t *c,
                  int64_t samples, int world, char *err, size_t errlen);

/* Where the checkpoint's epoch goes on: the entry of its train permutation
 * (of `samples`) before which every entry was trained, with `world` the
 * run's ranks for a version 2 file (pos->world 0); *repeats gets the entries
 * past it that were trained too (none: ranks step together). A position
 * zp_ckpt_check passed. */
int64_t zp_ckpt_offset(const zp_ckpt_pos_t *pos, const zp_config_t *c, int64_t samples, int world,
                       int64_t *repeats);

/* The position as `world` ranks go on from it: the checkpoint's own where it
 * is of that world (a version 2 file's world is taken to be `world`); else
 * the epoch's rest is sharded anew, from zp_ckpt_offset at batch 0, and the
 * step becomes the one a run of `world` ranks would be at there (the
 * learning-rate schedule counts it): its epochs' batches, and its batches of
 * this epoch before the offset. Returns 1 where it regrouped, else 0. A
 * position zp_ckpt_check passed. */
int zp_ckpt_regroup(zp_ckpt_pos_t *pos, const zp_config_t *c, int64_t samples, int world);

/* zp_ckpt_regroup where the batch size changes as well: the position was
 * saved under config `was` (its batch size counts pos->batch) and goes on
 * under c, the rest sharded from the offset in c's batches (the caller keeps
 * batch_size x world, the global batch). 1 where it regrouped, else 0. */
int zp_ckpt_rebatch(zp_ckpt_pos_t *pos, const zp_config_t *was, const zp_config_t *c,
                    int64_t samples, int world);

/* Whether the position's train epoch is over and recorded
 * (ZP_CKPT_TRAIN_RECORDED), so the run goes on with that epoch's test split
 * and that train epoch does not come again. A position after its last batch
 * whose record was not made yet (the save came between them) is not: its
 * train phase runs again with no batch left and makes the record. */
int zp_ckpt_train_done(const zp_ckpt_pos_t *pos);

/* The train batches of an epoch on rank 0 of `world` (the most of any rank)
 * in a split of `samples`, trainer.limit_train_batches applied: the
 * `batches` zp_ckpt_check wants. */
int64_t zp_ckpt_epoch_batches(const zp_config_t *c, int64_t samples, int world);

/* <run>/checkpoints/<name>.ckpt */
void zp_ckpt_path(char *buf, size_t len, const char *run_dir, const char *name);

#endif

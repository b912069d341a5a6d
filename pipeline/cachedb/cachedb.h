/* cachedb.h — the LMDB cache of preprocessed samples, as every process sees it.
 *
 * One LMDB environment (cache.path) holds a named database per dataset and
 * split ("fashion-mnist/train") and a "meta" database with each one's
 * fingerprint. A key is the sample index as 4 big-endian bytes. A value is a
 * 48-byte header followed by the payload:
 *
 *   offset  size  field
 *        0     4  magic "ZPC1"
 *        4     1  header version (4)
 *        5     1  dtype (1 = float32, 2 = uint8: dataset.dtype)
 *        6     1  dimensions (3)
 *        7     1  layout: 0 = a sample (the dataset's shape and dtype), 1 = a
 *                 whole image as raw RGB rows (height x width x 3, uint8),
 *                 2 = a whole image as a JPEG (ZP_CACHE_SAMPLE, _RAW, _JPEG)
 *        8    12  shape: channels, height, width (u32 little-endian); a whole
 *                 image's own height and width, 3 channels
 *       20     4  label (i32)
 *       24     4  sample index (u32), the key again
 *       28     4  payload bytes (u32)
 *       32     8  the value's fingerprint: XXH3-64 of its split's
 *                 fingerprint text (zp_cachedb_value_fp) when it was written
 *       40     8  checksum: XXH3-64 of the payload, seeded with the XXH3-64
 *                 of bytes 0..39 (so a flipped label, index, shape or
 *                 fingerprint byte is caught as surely as a flipped pixel)
 *
 * Whole images are the train split's values when the crop is made at
 * assembly (pipeline/image/augment.h zp_augment_whole): each image as resized to
 * dataset.image.cache_side, of its own size, kept raw or as a JPEG
 * (cache.encoding). Every other value is a sample.
 *
 * A value is served only with the fingerprint of the split it is read
 * for: one written for another dataset or transform (a run that rebuilt the
 * cache while another still wrote to it) is a foreign hit, re-loaded and
 * never served, and `zeus-pipe cache verify` counts it.
 *
 * Version 1 checksummed the payload alone; version 2 had no layout byte;
 * version 3 no fingerprint. The version is part of each split's
 * fingerprint, so a cache of another version is refused or rebuilt
 * (cache.on_mismatch) before a run starts, and a stray value of another
 * version is a corrupt hit: re-loaded, never served.
 *
 * One run writes to a cache at a time, or several of the same fingerprint:
 * a writer holds a shared lock on cache.path/writer.lock for its life
 * (zp_cachedb_lock), and a rebuild needs it alone. Prefetch and `warm` open
 * the environment read-only. Pointers into the map are valid until the end
 * of the transaction that produced them.
 */
#ifndef ZP_CACHEDB_H
#define ZP_CACHEDB_H

#include "pipeline/config/config.h"
#include "pipeline/dataset/dataset.h"

#include <lmdb.h>
#include <stddef.h>
#include <stdint.h>

#define ZP_CACHE_HDR 48
#define ZP_CACHE_VERSION 4
/* The reason a foreign value is refused (the check functions' *why). */
#define ZP_CACHE_FOREIGN "a value of another dataset or transform (its fingerprint is not the cache's)"

enum { ZP_CACHE_SAMPLE, ZP_CACHE_RAW, ZP_CACHE_JPEG }; /* byte 7: the layout */

typedef struct {
    MDB_env *env;
    MDB_dbi dbi[ZP_SPLITS];
    MDB_dbi meta;
    int readonly;
    size_t map_bytes, max_bytes;
    char name[ZP_SPLITS][96]; /* database names */
    char path[256];
    int error; /* LMDB's code for the last zp_cachedb_present() (0: it read every key) */
} zp_cachedb_t;

/* Opens (and for a writer, creates) the environment and the split databases.
 * A reader fails with MDB_NOTFOUND when a database does not exist yet.
 * Errors name the path and LMDB's reason. */
int zp_cachedb_open(zp_cachedb_t *c, const zp_config_t *cfg, const zp_dataset_meta_t *m,
                    int readonly, char *err, size_t len);
void zp_cachedb_close(zp_cachedb_t *c);

/* Checks each split's fingerprint against the config and dataset: records it
 * when absent; on a difference, rebuilds (empties the database) when
 * cache.on_mismatch is rebuild, else fails with ZP_ECONFIG and says what
 * changed. `busy`: NULL when the caller holds the writers' lock alone
 * (zp_cachedb_lock), else who holds it: then a split to record or rebuild
 * fails with ZP_ECONFIG and a sentence naming that holder. Writer only. */
int zp_cachedb_check(zp_cachedb_t *c, const zp_config_t *cfg, const zp_dataset_meta_t *m,
                     const char *busy, char *err, size_t len);

/* 1 when every split's recorded fingerprint is this config's and dataset's
 * (what zp_cachedb_check left); 0 when one differs, is absent or cannot be
 * read. */
int zp_cachedb_holds(zp_cachedb_t *c, const zp_config_t *cfg, const zp_dataset_meta_t *m);

/* The fingerprint text of a split: dataset files (path, size, mtime) or
 * synthetic parameters, sample shape, transform, value schema. */
void zp_cachedb_fingerprint(const zp_config_t *cfg, const zp_dataset_meta_t *m, int split,
                            char *buf, size_t len);

/* The fingerprint a value of `split` carries: the XXH3-64 of
 * zp_cachedb_fingerprint's text. */
uint64_t zp_cachedb_value_fp(const zp_config_t *cfg, const zp_dataset_meta_t *m, int split);

/* One number for what a loader of this config sends: both splits'
 * fingerprints, the sample dtype and, when loaders augment, the augmentation.
 * A loader offers it in its first READY; the cache stage refuses a loader
 * whose number is not the run's before any of its samples is used. */
uint64_t zp_cachedb_fingerprint_hash(const zp_config_t *cfg, const zp_dataset_meta_t *m);

static inline void zp_cachedb_key(uint32_t index, uint8_t key[4])
{
    key[0] = (uint8_t)(index >> 24), key[1] = (uint8_t)(index >> 16);
    key[2] = (uint8_t)(index >> 8), key[3] = (uint8_t)index;
}

/* Writes the header for `payload`, a sample of the split whose value
 * fingerprint is `fp`, into hdr[ZP_CACHE_HDR]. */
void zp_cachedb_header(uint8_t *hdr, const zp_dataset_meta_t *m, uint64_t fp, uint32_t index,
                       int32_t label, const void *payload, size_t bytes);

/* Writes the header of a whole image (ZP_CACHE_RAW or ZP_CACHE_JPEG) of
 * h x w pixels whose payload is `bytes` long into hdr[ZP_CACHE_HDR]. */
void zp_cachedb_whole_header(uint8_t *hdr, uint64_t fp, int layout, uint32_t index, int32_t label,
                             int h, int w, const void *payload, size_t bytes);

/* A whole image as zp_cachedb_check_whole found it; payload points into the value. */
typedef struct {
    int layout, h, w;
    const uint8_t *payload;
    size_t bytes;
} zp_cache_whole_t;

/* Checks a whole image's value: magic, version, layout, 3 channels, height
 * and width 1..side, the payload size (h x w x 3 when raw), the key, the
 * fingerprint `fp`, the label among the classes, the checksum. 0 with
 * *label and *out, or ZP_EDATA with the reason in why (ZP_CACHE_FOREIGN for
 * another fingerprint). */
int zp_cachedb_check_whole(const MDB_val *v, const zp_dataset_meta_t *m, uint64_t fp, int64_t side,
                           uint32_t index, int32_t *label, zp_cache_whole_t *out, const char **why);

/* Checks a stored value: header fields against the dataset, the split's
 * fingerprint `fp` and the index (the label among its classes), and the
 * checksum of header and payload. Returns 0 with the label and a pointer to
 * the payload (inside `v`), or ZP_EDATA with the reason in why
 * (ZP_CACHE_FOREIGN for another fingerprint). */
int zp_cachedb_check_value(const MDB_val *v, const zp_dataset_meta_t *m, uint64_t fp,
                           uint32_t index, int32_t *label, const uint8_t **payload,
                           const char **why);

/* The same without the checksum, which the caller checks on its copy of the
 * payload with zp_cachedb_sum(v->mv_data, copy, bytes) (cheaper: the copy is
 * hot in cache). The label is not to be trusted before that check passes. */
int zp_cachedb_check_header(const MDB_val *v, const zp_dataset_meta_t *m, uint64_t fp,
                            uint32_t index, int32_t *label, const uint8_t **payload, uint64_t *sum,
                            const char **why);
/* The checksum of a value: its header's first 40 bytes, then the payload. */
uint64_t zp_cachedb_sum(const uint8_t *hdr, const void *payload, size_t bytes);

/* Fills `present` (a bitmap of meta->n[split] bits) with the keys stored for a
 * split, and returns how many. One short read transaction, a cursor scan.
 * On an LMDB error c->error holds its code and `present` what was read. */
int64_t zp_cachedb_present(zp_cachedb_t *c, int split, int64_t n, uint8_t *present);

/* Asks the kernel to read the used part of the data file into page cache in
 * the background (POSIX_FADV_WILLNEED) when it fits in half the free memory:
 * after a long idle the file may have been evicted, and an epoch of random
 * 4 KiB reads from disk is far slower than one sequential read-ahead. */
void zp_cachedb_willneed(zp_cachedb_t *c);

/* Begins a read-only (or write) transaction. A map another process has grown
 * (MDB_MAP_RESIZED) is adopted, and a full reader table (MDB_READERS_FULL)
 * is freed of dead processes' slots, before LMDB's error is returned. No
 * other transaction of this process may be open. */
int zp_cachedb_read_begin(zp_cachedb_t *c, MDB_txn **txn);
int zp_cachedb_write_begin(zp_cachedb_t *c, MDB_txn **txn);
/* Frees the reader slots of dead processes (a SIGKILLed reader keeps its
 * slot, and the pages of its snapshot, until then): mdb_reader_check. Done
 * when opening and when the table is full; the writer also does it every
 * few seconds. Returns how many it freed (logged). */
int zp_cachedb_reader_check(zp_cachedb_t *c);

/* The writers' lock of the cache at `path` (a folder: cache.path), taken
 * without waiting: shared by the runs that write values of the fingerprint
 * the cache holds (`exclusive` 0: their cache stages, for their life), alone
 * to change it (1: a rebuild, or a first fingerprint). `who` (a line: the
 * process and its run) is written into the lock file for the next one to
 * name. Returns the lock's descriptor (>= 0; close it to release), or
 * -EBUSY with a sentence naming the holder in err, or another negative
 * errno with err naming the file. */
int zp_cachedb_lock(const char *path, int exclusive, const char *who, char *err, size_t len);

#endif

/* store.h — the cache stage's LMDB writer: samples returned by loaders
 * are put in batched write transactions (every cache.commit_every samples or
 * 100 ms); the map grows up to cache.max_bytes, and when it is full caching
 * stops with one warning while the broker goes on. */
#ifndef ZP_STORE_H
#define ZP_STORE_H

#include "pipeline/stage/stage.h"

#include <stdint.h>

typedef struct zp_store zp_store_t;

/* Opens the environment for writing. Returns 0; ZP_ENOMEM, or ZP_EDATA with
 * the LMDB error logged (cache.path unusable), with *out NULL. */
int zp_store_create(zp_store_t **out, zp_stage_t *st);
/* Commits what is pending and closes. Safe on NULL; nulls *s. */
void zp_store_destroy(zp_store_t **s);

/* Puts n samples (frames as SAMPLES carries them; may be unaligned),
 * replacing what a key held; a split's samples are not kept where its values
 * come apart, in VALUES: the train split's whole images (the crop at
 * assembly), a split's records before a Python augment step. Never fails the
 * caller: LMDB errors turn caching off with a warning. */
void zp_store_put(zp_store_t *s, int split, uint64_t n, const uint8_t *indices,
                  const uint8_t *labels, const uint8_t *data);
/* Puts the n cache values of a VALUES message (back to back in `frame` of
 * `size` bytes, may be unaligned): whole train images, or records before a
 * Python augment step. Each is checked as a hit would be
 * (zp_cachedb_check_whole, zp_cachedb_check_value) before any is put: ZP_EDATA when one
 * is malformed (nothing kept; the caller counts and logs it). LMDB errors
 * turn caching off with a warning, as zp_store_put. Else 0. */
int zp_store_put_values(zp_store_t *s, int split, uint64_t n, const uint8_t *frame, size_t size);
/* Reads n samples (indices: u32 LE, may be unaligned) into labels (n x
 * int32) and data (n x sample_bytes) when every one of them is stored and
 * whole: returns 1. Returns 0 when one is absent or corrupt (the loaders then
 * make them all) or caching is off. Reads inside the pending write
 * transaction, which sees what it wrote. */
int zp_store_get(zp_store_t *s, int split, uint64_t n, const uint8_t *indices, int32_t *labels,
                 uint8_t *data);
/* Commits what is pending now. */
void zp_store_commit(zp_store_t *s);
/* Commits a transaction older than 100 ms. Returns the poll timeout to use (ms). */
int zp_store_tick(zp_store_t *s);

#endif

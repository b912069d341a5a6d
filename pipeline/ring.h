/* ring.h — the shared-memory batch ring between a prefetch and its trainer.
 *
 * One POSIX shared-memory file per rank holds `depth` slots of `slot_bytes`
 * each. The prefetch creates and owns it and is the only process that tracks
 * slot states: a slot is FREE, then FILLING (acquired, being written), then
 * READY (announced to the trainer with {slot, gen}), then FREE again when the
 * trainer's FREE message carries the same generation. A stale or repeated
 * FREE is refused with ZP_ESTALE, so a slot is never reused before the trainer
 * is done with it. The trainer only maps the file (zp_ring_open).
 */
#ifndef ZP_RING_H
#define ZP_RING_H

#include <stddef.h>
#include <stdint.h>

#define ZP_RING_MAX 64
#define ZP_RING_MAGIC 0x7a7072696e670001ull /* "zpring" v1 */

enum { ZP_SLOT_FREE, ZP_SLOT_FILLING, ZP_SLOT_READY };

typedef struct {
    char name[96];          /* shm name, "/zp-..." */
    int owner;              /* created here: unlinked by destroy */
    uint8_t *base;          /* the mapping */
    size_t map_bytes;
    uint32_t depth;
    size_t slot_bytes;
    uint8_t state[ZP_RING_MAX]; /* owner side only */
    uint32_t gen[ZP_RING_MAX];  /* owner side only; bumped by every acquire */
} zp_ring_t;

/* Creates the shm file `name` (replacing a stale one) with `depth` slots of at
 * least `slot_bytes`, and maps it. */
int zp_ring_create(zp_ring_t **out, const char *name, uint32_t depth, size_t slot_bytes);
/* Maps an existing ring read-write; the header tells depth and slot size. */
int zp_ring_open(zp_ring_t **out, const char *name);
/* Unmaps; the owner also unlinks the file. Safe on NULL; nulls *r. */
void zp_ring_destroy(zp_ring_t **r);

/* Takes the lowest free slot: ZP_EFULL when all are FILLING or READY. */
int zp_ring_acquire(zp_ring_t *r, uint32_t *slot, uint32_t *gen);
/* FILLING -> READY. */
int zp_ring_publish(zp_ring_t *r, uint32_t slot);
/* READY -> FREE when gen matches; ZP_ESTALE otherwise, ZP_EINVAL for a bad slot. */
int zp_ring_release(zp_ring_t *r, uint32_t slot, uint32_t gen);
uint32_t zp_ring_free_count(const zp_ring_t *r);
/* Start of a slot's bytes: owned by the ring, valid until the slot is FREE again. */
void *zp_ring_slot(const zp_ring_t *r, uint32_t slot);

/* Layout of one batch inside a slot: u32 indices[B], i32 labels[B], then B
 * samples of `sample_bytes` (float32 or uint8, dataset.dtype). */
typedef struct {
    size_t indices, labels, data, bytes;
} zp_batch_layout_t;

zp_batch_layout_t zp_batch_layout(int64_t batch_size, size_t sample_bytes);

#endif

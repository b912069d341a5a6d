/* batch.h — one batch the prefetch assembles: which samples it holds, which
 * are still to come, and the copy of each arriving sample into its ring slot.
 * A RESULT that comes before the batch has a slot is held (its frames, no
 * copy) and copied in when the slot is given; samples a loader skipped
 * (label ZP_LABEL_SKIPPED) are compacted away before the batch is sent. */
#ifndef ZP_PREFETCH_BATCH_H
#define ZP_PREFETCH_BATCH_H

#include "pipeline/net/sock.h"

#include <stddef.h>
#include <stdint.h>

/* One FETCH of a batch's samples: `fetch` asks for the misses known when the
 * batch was started, `late` for hits that turned out absent or corrupt. */
typedef struct {
    uint64_t id;   /* 0: none in flight */
    uint32_t *pos; /* fetch offset -> position in the batch; owned, batch_size */
    int64_t n;
} zp_fetch_t;

/* A RESULT's payload frames kept until its batch has a slot (crops: a
 * frame of zp_crop_t, or empty when the RESULT had none). */
typedef struct {
    uint64_t offset, n;
    zmq_msg_t labels, data, crops;
} zp_held_t;

typedef struct {
    int64_t batch; /* batch number in the phase; -1 when unused */
    zp_fetch_t fetch, late;
    const uint32_t *indices; /* into the sampler's order; valid for the phase */
    int64_t n, filled, skipped; /* skipped: arrived with ZP_LABEL_SKIPPED */
    int slot;                   /* ring slot, -1 until assigned */
    uint32_t gen;
    uint8_t *have;   /* per sample: arrived (2: arrived, but skipped); owned, batch_size bytes */
    uint8_t *cached; /* per sample: to be read from the cache; owned */
    zp_held_t *held; /* owned; RESULTs of `fetch` that came before the slot */
    int nheld, held_cap;
} zp_batch_t;

/* Where a batch lies in its ring slot (pointers into shared memory, valid
 * while the batch holds the slot). */
typedef struct {
    uint32_t *indices;
    int32_t *labels;
    uint8_t *data;
    zp_crop_t *crops;
    size_t sample_bytes;
} zp_slot_view_t;

/* A batch record for up to batch_size samples, unused (batch -1). Returns
 * 0, or ZP_ENOMEM with *out NULL. */
int zp_batch_create(zp_batch_t **out, size_t batch_size);
/* Closes held frames and frees. Safe on NULL; nulls *bt. */
void zp_batch_destroy(zp_batch_t **bt);

/* Starts batch number `batch` of n samples (`indices` stays the caller's):
 * nothing arrived, no slot, no fetch. */
void zp_batch_start(zp_batch_t *bt, int64_t batch, const uint32_t *indices, int64_t n);
/* Forgets the batch (a SEEK moved the prefetch elsewhere): held frames are
 * closed, no fetch is in flight for it any more, its slot is the caller's to
 * give back; the record is unused (batch -1) again. */
void zp_batch_abandon(zp_batch_t *bt);
/* Copies samples [offset, offset + n) of fetch f's result (labels i32[n],
 * data[n x sample_bytes]; either may be unaligned) into the slot at their
 * positions. A sample that arrived already keeps its first copy; a skipped
 * one is counted and its data not copied. `crops` (n zp_crop_t, unaligned)
 * may be NULL: their crops are then marked unknown. */
void zp_batch_copy_in(zp_batch_t *bt, const zp_slot_view_t *v, const zp_fetch_t *f,
                      uint64_t offset, uint64_t n, const uint8_t *labels, const uint8_t *data,
                      const uint8_t *crops);
/* Keeps a RESULT's labels, data and crops frames (f->part[2], [3], [4],
 * moved out of f) until the batch has a slot. Returns 0 or ZP_ENOMEM. */
int zp_batch_hold(zp_batch_t *bt, const zp_msg_t *m, zp_frames_t *f);
/* The batch got a slot: copies in what was held, and releases it. */
void zp_batch_copy_held(zp_batch_t *bt, const zp_slot_view_t *v);
/* Closes the gaps skipped samples left in the slot (indices, labels, data,
 * crops move down); the batch shrinks. Returns how many were left out. */
int64_t zp_batch_compact(zp_batch_t *bt, const zp_slot_view_t *v);
/* Every sample has arrived (or was skipped). */
int zp_batch_complete(const zp_batch_t *bt);

#endif

/* ring.h — the shared-memory batch ring between a prefetch and its trainer.
 *
 * One POSIX shared-memory file per rank holds `depth` slots of `slot_bytes`
 * each. The prefetch creates and owns it and is the only process that tracks
 * slot states: a slot is FREE, then FILLING (acquired, being written), then
 * READY (announced to the trainer with {slot, gen}), then FREE again when the
 * trainer's FREE message carries the same generation. A stale or repeated
 * FREE is refused with ZP_ESTALE, so a slot is never reused before the trainer
 * is done with it. The trainer only maps the file (zp_ring_map).
 *
 * Each ring draws a random nonce when it is created and keeps it in its
 * header; every BATCH carries it. A file of the same name left by a dead run
 * (`up --resume`) has another nonce, so a trainer can tell it from the ring its
 * prefetch made and never reads a batch from it.
 *
 * The file's pages are allocated when it is created (posix_fallocate), so a
 * /dev/shm too small for it fails there with ENOSPC instead of a SIGBUS at the
 * first write of a page tmpfs could not provide.
 */
#ifndef ZP_RING_H
#define ZP_RING_H

#include <stddef.h>
#include <stdint.h>

#define ZP_RING_MAX 64
#define ZP_RING_MAGIC 0x7a7072696e670002ull /* "zpring" v2: with a nonce */
/* Where POSIX shared memory lives (glibc's shm_open). */
#define ZP_SHM_DIR "/dev/shm"
/* What a user can do when the rings do not fit in ZP_SHM_DIR. */
#define ZP_SHM_ADVICE                                                                              \
    "give " ZP_SHM_DIR " more room (docker run --shm-size=..., or a larger tmpfs), or lower "     \
    "prefetch.depth or prefetch.batch_size, or set dataset.dtype: uint8 (4x smaller samples)"

enum { ZP_SLOT_FREE, ZP_SLOT_FILLING, ZP_SLOT_READY };

typedef struct {
    char name[96];          /* shm name, "/zp-..." */
    int owner;              /* created here: unlinked by destroy */
    uint8_t *base;          /* the mapping */
    size_t map_bytes;
    uint32_t depth;
    size_t slot_bytes;
    uint64_t nonce;         /* from the header: never 0; a BATCH carries it */
    uint8_t state[ZP_RING_MAX]; /* owner side only */
    uint32_t gen[ZP_RING_MAX];  /* owner side only; bumped by every acquire */
} zp_ring_t;

/* Creates the shm file `name` (replacing a stale one) with `depth` slots of at
 * least `slot_bytes`, allocates its pages and maps it, with a fresh nonce.
 * Returns 0, ZP_EINVAL for a size that does not fit a size_t, or -errno:
 * -ENOSPC when ZP_SHM_DIR has no room for zp_ring_bytes() (nothing is left
 * behind then). */
int zp_ring_create(zp_ring_t **out, const char *name, uint32_t depth, size_t slot_bytes);
/* Maps an existing ring read-write; the header tells depth, slot size and
 * nonce. With `nonce` != 0 a ring of another nonce (a dead run's) is refused
 * with ZP_ESTALE; a header whose sizes do not fit the file with ZP_EPROTO;
 * -ENOENT when there is no such file yet. */
int zp_ring_map(zp_ring_t **out, const char *name, uint64_t nonce);
/* Unmaps; the owner also unlinks the file. Safe on NULL; nulls *r. */
void zp_ring_destroy(zp_ring_t **r);

/* Takes the lowest free slot: ZP_EFULL when all are FILLING or READY. */
int zp_ring_acquire(zp_ring_t *r, uint32_t *slot, uint32_t *gen);
/* FILLING -> READY. */
int zp_ring_publish(zp_ring_t *r, uint32_t slot);
/* FILLING -> FREE: a slot acquired and never published (its batch was
 * abandoned) is free again; its generation stays spent. ZP_EINVAL for a slot
 * that is not FILLING. */
int zp_ring_unacquire(zp_ring_t *r, uint32_t slot);
/* READY -> FREE when gen matches; ZP_ESTALE otherwise, ZP_EINVAL for a bad slot. */
int zp_ring_release(zp_ring_t *r, uint32_t slot, uint32_t gen);
uint32_t zp_ring_free_count(const zp_ring_t *r);
/* Start of a slot's bytes: owned by the ring, valid until the slot is FREE again. */
void *zp_ring_slot(const zp_ring_t *r, uint32_t slot);

/* Layout of one batch inside a slot: u32 indices[B], i32 labels[B], then B
 * samples of `sample_bytes` (float32 or uint8, dataset.dtype), then B
 * zp_crop_t (schemas/msg.h: each train sample's random-resized crop, when
 * dataset.augment.resized_crop cuts it from a whole image; last, so that a
 * reader that knows nothing of them finds the rest where it was). */
typedef struct {
    size_t indices, labels, data, crops, bytes;
} zp_ring_layout_t;

/* Fills `l`; ZP_EINVAL when batch_size is not 1..ZP_MAX_BATCH or the
 * bytes do not fit a size_t. */
int zp_ring_layout(zp_ring_layout_t *l, int64_t batch_size, size_t sample_bytes);

/* Bytes of shared memory a ring of `depth` slots of `slot_bytes` takes,
 * header and page rounding included; 0 when that does not fit a size_t. */
size_t zp_ring_bytes(uint32_t depth, size_t slot_bytes);
/* 0 when `need` bytes fit in ZP_SHM_DIR's free space; else ZP_EFULL (or
 * -errno of statvfs) with "needs X MiB of shared memory, /dev/shm has Y MiB
 * free" in `err`. */
int zp_ring_shm_room(size_t need, char *err, size_t len);
/* Before any stage starts: whether `rings` rings (one per rank on this host)
 * of `depth` slots of batches of `batch_size` samples of `sample_bytes` fit
 * in ZP_SHM_DIR. 0, or an error with what is needed, what is free and what
 * to do (ZP_SHM_ADVICE) in `err`. */
int zp_ring_check_room(int rings, uint32_t depth, int64_t batch_size, size_t sample_bytes,
                       char *err, size_t len);

/* Name of the shared-memory ring of `rank` of the run in run_dir:
 * "/zp-<hash of run_dir>-ring<rank>". */
void zp_ring_name(char *buf, size_t len, const char *run_dir, int rank);

#endif

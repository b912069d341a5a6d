/* ring.c — the shared-memory ring of batch slots between a prefetch and its
 * trainer: created in /dev/shm, mapped by name and nonce, slots acquired,
 * published and released by generation. */
#define _GNU_SOURCE
#include "pipeline/ring/ring.h"
#include "pipeline/base/hash.h"
#include "pipeline/base/log.h"
#include "schemas/msg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define HDR_BYTES 4096

typedef struct {
    uint64_t magic;
    uint32_t depth, pad;
    uint64_t slot_bytes;
    uint64_t nonce;
} ring_hdr_t;

/* v rounded up to a multiple of a; 0 when that does not fit a size_t. */
static size_t round_up(size_t v, size_t a)
{
    size_t r;
    return __builtin_add_overflow(v, a - 1, &r) ? 0 : r / a * a;
}

int zp_ring_layout(zp_ring_layout_t *l, int64_t batch_size, size_t sample_bytes)
{
    memset(l, 0, sizeof *l);
    if (batch_size < 1 || batch_size > ZP_MAX_BATCH)
        return ZP_EINVAL;
    size_t b = (size_t)batch_size, data, end, crops;
    size_t col = round_up(b * 4, 64); /* b <= 2^20: no overflow */
    if (__builtin_mul_overflow(b, sample_bytes, &data) ||
        __builtin_add_overflow(2 * col, data, &end))
        return ZP_EINVAL;
    crops = round_up(end, 64); /* 0 when it does not fit */
    if (!crops || __builtin_add_overflow(crops, b * sizeof(zp_crop_t), &l->bytes))
        return ZP_EINVAL;
    l->indices = 0;
    l->labels = col;
    l->data = 2 * col;
    l->crops = crops;
    return 0;
}

size_t zp_ring_bytes(uint32_t depth, size_t slot_bytes)
{
    size_t slot = round_up(slot_bytes, 4096), all;
    if (!slot || __builtin_mul_overflow(slot, (size_t)depth, &all) ||
        __builtin_add_overflow(all, (size_t)HDR_BYTES, &all))
        return 0;
    return all;
}

int zp_ring_shm_room(size_t need, char *err, size_t len)
{
    struct statvfs vfs;
    if (statvfs(ZP_SHM_DIR, &vfs)) {
        int rc = -errno;
        snprintf(err, len, "%s: %s", ZP_SHM_DIR, strerror(errno));
        return rc;
    }
    /* tmpfs (not root-reserved): f_bavail is what a file may still take */
    double free_bytes = (double)vfs.f_bavail * (double)vfs.f_frsize;
    if ((double)need <= free_bytes)
        return 0;
    snprintf(err, len, "needs %.1f MiB of shared memory, %s has %.1f MiB free", need / 1048576.0,
             ZP_SHM_DIR, free_bytes / 1048576.0);
    return ZP_EFULL;
}

int zp_ring_check_room(int rings, uint32_t depth, int64_t batch_size, size_t sample_bytes,
                       char *err, size_t len)
{
    zp_ring_layout_t l;
    size_t one = zp_ring_layout(&l, batch_size, sample_bytes) ? 0 : zp_ring_bytes(depth, l.bytes);
    size_t all;
    if (!one || rings < 1 || __builtin_mul_overflow(one, (size_t)rings, &all)) {
        snprintf(err, len, "shared memory: prefetch.batch_size %lld x %zu bytes a sample x "
                 "prefetch.depth %u does not fit in memory", (long long)batch_size, sample_bytes, depth);
        return ZP_EINVAL;
    }
    char room[160];
    int rc = zp_ring_shm_room(all, room, sizeof room);
    if (rc)
        snprintf(err, len, "shared memory: the batch ring%s (%d x prefetch.depth %u x %.1f MiB a "
                 "batch) %s; %s", rings > 1 ? "s" : "", rings, depth, l.bytes / 1048576.0, room,
                 ZP_SHM_ADVICE);
    return rc;
}

/* A random nonce, never 0. */
static uint64_t new_nonce(void)
{
    uint64_t n = 0;
    if (getrandom(&n, sizeof n, 0) != (ssize_t)sizeof n) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        n = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 32);
    }
    return n ? n : 1;
}

static int map_ring(zp_ring_t *r, int fd, int prot)
{
    /* populated up front: a fresh shm page faults at a fraction of memory speed */
    void *p = mmap(NULL, r->map_bytes, prot, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED)
        return -errno;
    r->base = p;
    return 0;
}

/* Creates the file with every page allocated: ftruncate alone leaves tmpfs
 * free to fail a page at its first write, with SIGBUS. */
static int make_file(zp_ring_t *r)
{
    shm_unlink(r->name); /* a stale ring of a crashed run */
    int fd = shm_open(r->name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0)
        return -errno;
    int err = posix_fallocate(fd, 0, (off_t)r->map_bytes);
    int rc = err ? -err : map_ring(r, fd, PROT_READ | PROT_WRITE);
    close(fd);
    if (rc)
        shm_unlink(r->name);
    return rc;
}

int zp_ring_create(zp_ring_t **out, const char *name, uint32_t depth, size_t slot_bytes)
{
    *out = NULL;
    if (depth < 1 || depth > ZP_RING_MAX || slot_bytes == 0 || strlen(name) >= 96)
        return ZP_EINVAL;
    size_t map_bytes = zp_ring_bytes(depth, slot_bytes);
    if (!map_bytes || map_bytes > (size_t)INT64_MAX)
        return ZP_EINVAL;
    zp_ring_t *r = calloc(1, sizeof *r);
    if (!r)
        return ZP_ENOMEM;
    snprintf(r->name, sizeof r->name, "%s", name);
    r->depth = depth;
    r->slot_bytes = round_up(slot_bytes, 4096);
    r->map_bytes = map_bytes;
    int rc = make_file(r);
    if (rc) {
        free(r);
        return rc;
    }
    r->owner = 1;
    r->nonce = new_nonce();
    ring_hdr_t *h = (ring_hdr_t *)r->base;
    h->depth = depth;
    h->slot_bytes = r->slot_bytes;
    h->nonce = r->nonce;
    __atomic_store_n(&h->magic, ZP_RING_MAGIC, __ATOMIC_RELEASE);
    *out = r;
    return 0;
}

/* The header's promises, checked against the file: bytes of another
 * process, so the product is computed without overflow. */
static int check_header(zp_ring_t *r, uint64_t nonce)
{
    const ring_hdr_t *h = (const ring_hdr_t *)r->base;
    if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != ZP_RING_MAGIC || h->depth < 1 ||
        h->depth > ZP_RING_MAX || h->slot_bytes == 0 || h->slot_bytes > SIZE_MAX)
        return ZP_EPROTO;
    size_t need = zp_ring_bytes(h->depth, (size_t)h->slot_bytes);
    if (!need || need > r->map_bytes || h->slot_bytes % 4096)
        return ZP_EPROTO;
    if (nonce && h->nonce != nonce)
        return ZP_ESTALE;
    r->depth = h->depth;
    r->slot_bytes = (size_t)h->slot_bytes;
    r->nonce = h->nonce;
    return 0;
}

int zp_ring_map(zp_ring_t **out, const char *name, uint64_t nonce)
{
    *out = NULL;
    zp_ring_t *r = calloc(1, sizeof *r);
    if (!r)
        return ZP_ENOMEM;
    snprintf(r->name, sizeof r->name, "%s", name);
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        free(r);
        return -errno;
    }
    struct stat st;
    int rc = fstat(fd, &st) ? -errno : 0;
    r->map_bytes = rc ? 0 : (size_t)st.st_size;
    if (!rc && r->map_bytes < HDR_BYTES)
        rc = ZP_EPROTO;
    if (!rc)
        rc = map_ring(r, fd, PROT_READ | PROT_WRITE);
    close(fd);
    if (!rc)
        rc = check_header(r, nonce);
    if (rc) {
        if (r->base)
            munmap(r->base, r->map_bytes);
        free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void zp_ring_destroy(zp_ring_t **rp)
{
    if (!rp || !*rp)
        return;
    zp_ring_t *r = *rp;
    munmap(r->base, r->map_bytes);
    if (r->owner)
        shm_unlink(r->name);
    free(r);
    *rp = NULL;
}

int zp_ring_acquire(zp_ring_t *r, uint32_t *slot, uint32_t *gen)
{
    for (uint32_t i = 0; i < r->depth; i++)
        if (r->state[i] == ZP_SLOT_FREE) {
            r->state[i] = ZP_SLOT_FILLING;
            *slot = i;
            *gen = ++r->gen[i];
            return 0;
        }
    return ZP_EFULL;
}

int zp_ring_publish(zp_ring_t *r, uint32_t slot)
{
    if (slot >= r->depth || r->state[slot] != ZP_SLOT_FILLING)
        return ZP_EINVAL;
    r->state[slot] = ZP_SLOT_READY;
    return 0;
}

int zp_ring_unacquire(zp_ring_t *r, uint32_t slot)
{
    if (slot >= r->depth || r->state[slot] != ZP_SLOT_FILLING)
        return ZP_EINVAL;
    r->state[slot] = ZP_SLOT_FREE;
    return 0;
}

int zp_ring_release(zp_ring_t *r, uint32_t slot, uint32_t gen)
{
    if (slot >= r->depth)
        return ZP_EINVAL;
    if (r->state[slot] != ZP_SLOT_READY || r->gen[slot] != gen)
        return ZP_ESTALE;
    r->state[slot] = ZP_SLOT_FREE;
    return 0;
}

uint32_t zp_ring_free_count(const zp_ring_t *r)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < r->depth; i++)
        n += r->state[i] == ZP_SLOT_FREE;
    return n;
}

void *zp_ring_slot(const zp_ring_t *r, uint32_t slot)
{
    return r->base + HDR_BYTES + (size_t)slot * r->slot_bytes;
}

void zp_ring_name(char *buf, size_t len, const char *run_dir, int rank)
{
    uint64_t h = ZP_ORDER_INIT;
    for (const char *p = run_dir; *p; p++)
        h = zp_order_step(h, (uint8_t)*p);
    snprintf(buf, len, "/zp-%016llx-ring%d", (unsigned long long)h, rank);
}

#define _GNU_SOURCE
#include "pipeline/ring.h"
#include "pipeline/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HDR_BYTES 4096

typedef struct {
    uint64_t magic;
    uint32_t depth, pad;
    uint64_t slot_bytes;
} ring_hdr_t;

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

zp_batch_layout_t zp_batch_layout(int64_t batch_size, size_t sample_bytes)
{
    zp_batch_layout_t l;
    size_t b = (size_t)batch_size;
    l.indices = 0;
    l.labels = round_up(b * 4, 64);
    l.data = l.labels + round_up(b * 4, 64);
    l.bytes = l.data + b * sample_bytes;
    return l;
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

int zp_ring_create(zp_ring_t **out, const char *name, uint32_t depth, size_t slot_bytes)
{
    *out = NULL;
    if (depth < 1 || depth > ZP_RING_MAX || slot_bytes == 0 || strlen(name) >= 96)
        return ZP_EINVAL;
    zp_ring_t *r = calloc(1, sizeof *r);
    if (!r)
        return ZP_ENOMEM;
    snprintf(r->name, sizeof r->name, "%s", name);
    r->depth = depth;
    r->slot_bytes = round_up(slot_bytes, 4096);
    r->map_bytes = HDR_BYTES + r->slot_bytes * depth;
    shm_unlink(name); /* a stale ring of a crashed run */
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    int rc = fd < 0 ? -errno : 0;
    if (!rc && ftruncate(fd, (off_t)r->map_bytes) != 0)
        rc = -errno;
    if (!rc)
        rc = map_ring(r, fd, PROT_READ | PROT_WRITE);
    if (fd >= 0)
        close(fd);
    if (rc) {
        if (fd >= 0)
            shm_unlink(name);
        free(r);
        return rc;
    }
    r->owner = 1;
    ring_hdr_t *h = (ring_hdr_t *)r->base;
    h->depth = depth;
    h->slot_bytes = r->slot_bytes;
    __atomic_store_n(&h->magic, ZP_RING_MAGIC, __ATOMIC_RELEASE);
    *out = r;
    return 0;
}

int zp_ring_open(zp_ring_t **out, const char *name)
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
    r->map_bytes = (size_t)st.st_size;
    if (!rc && r->map_bytes < HDR_BYTES)
        rc = ZP_EPROTO;
    if (!rc)
        rc = map_ring(r, fd, PROT_READ | PROT_WRITE);
    close(fd);
    if (!rc) {
        ring_hdr_t *h = (ring_hdr_t *)r->base;
        if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != ZP_RING_MAGIC || h->depth < 1 ||
            h->depth > ZP_RING_MAX || HDR_BYTES + h->slot_bytes * h->depth > r->map_bytes)
            rc = ZP_EPROTO;
        r->depth = h->depth;
        r->slot_bytes = h->slot_bytes;
    }
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

/* Unit tests of the shared-memory ring: slots are reused only after a FREE of
 * the right generation, and never more than `depth` are out at once. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <unistd.h>

#include "pipeline/base/log.h"
#include "pipeline/ring/ring.h"
#include "schemas/msg.h"

static char name[64];

static int setup(void **state)
{
    (void)state;
    snprintf(name, sizeof name, "/zp-test-ring-%d", (int)getpid());
    return 0;
}

static void depth_is_respected(void **state)
{
    (void)state;
    zp_ring_t *r;
    assert_int_equal(zp_ring_create(&r, name, 3, 1000), 0);
    uint32_t slot, gen, seen = 0;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(zp_ring_acquire(r, &slot, &gen), 0);
        seen |= 1u << slot;
    }
    assert_int_equal(seen, 7);
    assert_int_equal(zp_ring_acquire(r, &slot, &gen), ZP_EFULL);
    assert_int_equal(zp_ring_free_count(r), 0);
    zp_ring_destroy(&r);
    assert_null(r);
    zp_ring_destroy(&r); /* safe twice */
}

static void slots_are_reused_only_after_free(void **state)
{
    (void)state;
    zp_ring_t *r;
    assert_int_equal(zp_ring_create(&r, name, 2, 64), 0);
    uint32_t a, ga, b, gb, c, gc;
    assert_int_equal(zp_ring_acquire(r, &a, &ga), 0);
    assert_int_equal(zp_ring_acquire(r, &b, &gb), 0);
    assert_int_equal(zp_ring_publish(r, a), 0);
    /* READY but not freed: still not available */
    assert_int_equal(zp_ring_acquire(r, &c, &gc), ZP_EFULL);
    /* a FREE of a slot still FILLING is refused */
    assert_int_equal(zp_ring_release(r, b, gb), ZP_ESTALE);
    assert_int_equal(zp_ring_release(r, a, ga), 0);
    assert_int_equal(zp_ring_acquire(r, &c, &gc), 0);
    assert_int_equal(c, a);
    assert_int_equal(gc, ga + 1);
    zp_ring_destroy(&r);
}

static void a_slot_filled_but_never_sent_is_free_again_after_unacquire(void **state)
{
    (void)state;
    zp_ring_t *r;
    assert_int_equal(zp_ring_create(&r, name, 1, 64), 0);
    uint32_t a, ga, b, gb;
    assert_int_equal(zp_ring_acquire(r, &a, &ga), 0);
    assert_int_equal(zp_ring_unacquire(r, a), 0);
    assert_int_equal(zp_ring_free_count(r), 1);
    assert_int_equal(zp_ring_unacquire(r, a), ZP_EINVAL); /* FREE, not FILLING */
    assert_int_equal(zp_ring_acquire(r, &b, &gb), 0);
    assert_int_equal(b, a);
    assert_int_equal(gb, ga + 1); /* a FREE of the abandoned generation stays stale */
    assert_int_equal(zp_ring_publish(r, b), 0);
    assert_int_equal(zp_ring_unacquire(r, b), ZP_EINVAL); /* sent: only its FREE frees it */
    assert_int_equal(zp_ring_release(r, b, ga), ZP_ESTALE);
    assert_int_equal(zp_ring_unacquire(r, 5), ZP_EINVAL);
    zp_ring_destroy(&r);
}

static void stale_or_repeated_free_is_refused(void **state)
{
    (void)state;
    zp_ring_t *r;
    assert_int_equal(zp_ring_create(&r, name, 2, 64), 0);
    uint32_t a, ga;
    zp_ring_acquire(r, &a, &ga);
    zp_ring_publish(r, a);
    assert_int_equal(zp_ring_release(r, a, ga + 1), ZP_ESTALE);
    assert_int_equal(zp_ring_release(r, a, ga), 0);
    assert_int_equal(zp_ring_release(r, a, ga), ZP_ESTALE); /* repeated */
    assert_int_equal(zp_ring_release(r, 7, ga), ZP_EINVAL);   /* no such slot */
    zp_ring_destroy(&r);
}

static void a_second_mapping_sees_the_owners_bytes(void **state)
{
    (void)state;
    zp_ring_t *owner, *peer;
    assert_int_equal(zp_ring_create(&owner, name, 2, 5000), 0);
    assert_int_equal(zp_ring_map(&peer, name, 0), 0);
    assert_int_equal(peer->depth, 2);
    assert_int_equal(peer->slot_bytes, owner->slot_bytes);
    assert_true(owner->slot_bytes >= 5000 && owner->slot_bytes % 4096 == 0);
    memset(zp_ring_slot(owner, 1), 0xab, 5000);
    assert_int_equal(((uint8_t *)zp_ring_slot(peer, 1))[4999], 0xab);
    zp_ring_destroy(&peer);
    zp_ring_destroy(&owner);
    /* the owner unlinked it */
    assert_int_equal(zp_ring_map(&peer, name, 0), -ENOENT);
}

static void batch_layout_fits_and_aligns(void **state)
{
    (void)state;
    zp_ring_layout_t l;
    assert_int_equal(zp_ring_layout(&l, 100, 784 * 4), 0);
    assert_true(l.labels >= 400 && l.labels % 64 == 0);
    assert_true(l.data >= l.labels + 400 && l.data % 64 == 0);
    assert_true(l.crops >= l.data + 100 * 784 * 4 && l.crops % 64 == 0);
    assert_int_equal(l.bytes, l.crops + 100 * sizeof(zp_crop_t));
    /* uint8 samples of an odd size: the crops still start aligned */
    assert_int_equal(zp_ring_layout(&l, 3, 7), 0);
    assert_true(l.crops >= l.data + 21 && l.crops % 64 == 0);
}

static void open_refuses_a_ring_of_another_nonce(void **state)
{
    (void)state;
    zp_ring_t *owner, *peer;
    assert_int_equal(zp_ring_create(&owner, name, 2, 64), 0);
    uint64_t first = owner->nonce;
    assert_true(first != 0);
    assert_int_equal(zp_ring_map(&peer, name, first + 1), ZP_ESTALE);
    assert_null(peer);
    assert_int_equal(zp_ring_map(&peer, name, first), 0);
    assert_true(peer->nonce == first);
    zp_ring_destroy(&peer);
    /* the same name made again (a new run): a new nonce, and the old one is refused */
    zp_ring_destroy(&owner);
    assert_int_equal(zp_ring_create(&owner, name, 2, 64), 0);
    assert_true(owner->nonce != first);
    assert_int_equal(zp_ring_map(&peer, name, first), ZP_ESTALE);
    assert_int_equal(zp_ring_map(&peer, name, 0), 0);
    assert_true(peer->nonce == owner->nonce);
    zp_ring_destroy(&peer);
    zp_ring_destroy(&owner);
}

/* A ring file whose header was written by hand, as ring.c lays it out:
 * u64 magic, u32 depth, u32 pad, u64 slot_bytes, u64 nonce. */
static void forge(uint32_t depth, uint64_t slot_bytes, size_t file_bytes)
{
    shm_unlink(name);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)file_bytes), 0);
    uint8_t h[32] = {0};
    uint64_t magic = ZP_RING_MAGIC, nonce = 7;
    memcpy(h, &magic, 8);
    memcpy(h + 8, &depth, 4);
    memcpy(h + 16, &slot_bytes, 8);
    memcpy(h + 24, &nonce, 8);
    assert_int_equal(pwrite(fd, h, sizeof h, 0), (ssize_t)sizeof h);
    close(fd);
}

static void open_refuses_a_header_whose_slots_overflow_the_file(void **state)
{
    (void)state;
    zp_ring_t *peer;
    forge(4, 1ull << 62, 8192); /* 4096 + 4 x 2^62 wraps to 4096: "fits" in 8 KiB */
    assert_int_equal(zp_ring_map(&peer, name, 0), ZP_EPROTO);
    assert_null(peer);
    forge(2, UINT64_MAX - 4095, 8192); /* rounding up to pages wraps too */
    assert_int_equal(zp_ring_map(&peer, name, 0), ZP_EPROTO);
    forge(1, 4096, 8192); /* an honest header of the same file is taken */
    assert_int_equal(zp_ring_map(&peer, name, 0), 0);
    assert_int_equal(peer->depth, 1);
    zp_ring_destroy(&peer);
    shm_unlink(name);
}

static void sizes_that_overflow_are_refused(void **state)
{
    (void)state;
    zp_ring_t *r;
    assert_int_equal(zp_ring_bytes(64, SIZE_MAX / 32), 0);
    assert_int_equal(zp_ring_bytes(2, SIZE_MAX - 10), 0);
    assert_int_equal(zp_ring_bytes(2, 5000), 4096 + 2 * 8192);
    /* slot_bytes x depth wraps: refused, not a tiny file of 64 "huge" slots */
    assert_int_equal(zp_ring_create(&r, name, 64, SIZE_MAX / 32), ZP_EINVAL);
    assert_null(r);
    zp_ring_layout_t l;
    assert_int_equal(zp_ring_layout(&l, 65536, SIZE_MAX / 1000), ZP_EINVAL);
    assert_int_equal(zp_ring_layout(&l, 0, 4), ZP_EINVAL);
}

/* /dev/shm replaced by a 1 MiB tmpfs in a mount namespace of this process
 * only; skipped where that is not allowed (not root). */
static int small_shm(void)
{
    if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
        mount("tmpfs", ZP_SHM_DIR, "tmpfs", 0, "size=1m"))
        return 0;
    return 1;
}

static void a_ring_larger_than_shm_fails_with_enospc_not_sigbus(void **state)
{
    (void)state;
    if (!small_shm())
        skip();
    char err[256];
    assert_int_equal(zp_ring_shm_room(512 << 10, err, sizeof err), 0);
    assert_int_equal(zp_ring_shm_room(2 << 20, err, sizeof err), ZP_EFULL);
    assert_string_equal(err, "needs 2.0 MiB of shared memory, /dev/shm has 1.0 MiB free");
    zp_ring_t *r;
    /* ftruncate + MAP_POPULATE "succeeded" here, and the first write to the
     * second MiB was a SIGBUS */
    assert_int_equal(zp_ring_create(&r, name, 2, 1 << 20), -ENOSPC);
    assert_null(r);
    char path[128];
    snprintf(path, sizeof path, "/dev/shm%s", name);
    assert_int_equal(access(path, F_OK), -1); /* nothing left behind */
    assert_int_equal(zp_ring_create(&r, name, 2, 256 << 10), 0); /* what fits is made */
    memset(zp_ring_slot(r, 1), 1, 256 << 10);
    zp_ring_destroy(&r);
    umount2(ZP_SHM_DIR, MNT_DETACH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(depth_is_respected, setup),
        cmocka_unit_test_setup(slots_are_reused_only_after_free, setup),
        cmocka_unit_test_setup(stale_or_repeated_free_is_refused, setup),
        cmocka_unit_test_setup(a_slot_filled_but_never_sent_is_free_again_after_unacquire, setup),
        cmocka_unit_test_setup(a_second_mapping_sees_the_owners_bytes, setup),
        cmocka_unit_test(batch_layout_fits_and_aligns),
        cmocka_unit_test_setup(open_refuses_a_ring_of_another_nonce, setup),
        cmocka_unit_test_setup(open_refuses_a_header_whose_slots_overflow_the_file, setup),
        cmocka_unit_test_setup(sizes_that_overflow_are_refused, setup),
        cmocka_unit_test_setup(a_ring_larger_than_shm_fails_with_enospc_not_sigbus, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

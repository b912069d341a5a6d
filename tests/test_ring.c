/* Unit tests of the shared-memory ring: slots are reused only after a FREE of
 * the right generation, and never more than `depth` are out at once. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pipeline/log.h"
#include "pipeline/ring.h"

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
    assert_int_equal(zp_ring_open(&peer, name), 0);
    assert_int_equal(peer->depth, 2);
    assert_int_equal(peer->slot_bytes, owner->slot_bytes);
    assert_true(owner->slot_bytes >= 5000 && owner->slot_bytes % 4096 == 0);
    memset(zp_ring_slot(owner, 1), 0xab, 5000);
    assert_int_equal(((uint8_t *)zp_ring_slot(peer, 1))[4999], 0xab);
    zp_ring_destroy(&peer);
    zp_ring_destroy(&owner);
    /* the owner unlinked it */
    assert_int_equal(zp_ring_open(&peer, name), -ENOENT);
}

static void batch_layout_fits_and_aligns(void **state)
{
    (void)state;
    zp_batch_layout_t l = zp_batch_layout(100, 784 * 4);
    assert_true(l.labels >= 400 && l.labels % 64 == 0);
    assert_true(l.data >= l.labels + 400 && l.data % 64 == 0);
    assert_int_equal(l.bytes, l.data + 100 * 784 * 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(depth_is_respected, setup),
        cmocka_unit_test_setup(slots_are_reused_only_after_free, setup),
        cmocka_unit_test_setup(stale_or_repeated_free_is_refused, setup),
        cmocka_unit_test_setup(a_second_mapping_sees_the_owners_bytes, setup),
        cmocka_unit_test(batch_layout_fits_and_aligns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

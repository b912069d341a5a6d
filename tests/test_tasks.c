/* Unit tests of the cache stage's task table (stages/cache/tasks.h), without
 * processes: ids, the FIFO, re-queueing a dead loader's tasks, growth. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "schemas/errors.h"
#include "stages/cache/tasks.h"

static zp_task_t *add(zp_tasks_t *ts, uint32_t first, uint64_t n)
{
    uint32_t idx[8];
    for (uint64_t i = 0; i < n; i++)
        idx[i] = first + (uint32_t)i;
    zp_task_t *t = NULL;
    assert_int_equal(zp_tasks_add(ts, (const uint8_t *)idx, n, &t), 0);
    assert_non_null(t);
    return t;
}

static void tasks_keep_their_indices_and_come_out_in_fifo_order(void **state)
{
    (void)state;
    zp_tasks_t *ts;
    assert_int_equal(zp_tasks_create(&ts), 0);
    uint64_t a = add(ts, 10, 3)->id, b = add(ts, 20, 2)->id;
    assert_int_not_equal(a, b);
    assert_int_equal(zp_tasks_queued(ts), 2);
    zp_task_t *t = zp_tasks_next(ts);
    assert_int_equal(t->id, a);
    assert_int_equal(t->n, 3);
    assert_int_equal(t->indices[2], 12);
    assert_int_equal(t->loader, -1);
    assert_int_equal(zp_tasks_next(ts)->id, b);
    assert_null(zp_tasks_next(ts));
    assert_int_equal(zp_tasks_queued(ts), 0);
    zp_tasks_destroy(&ts);
    assert_null(ts);
    zp_tasks_destroy(&ts); /* safe twice */
}

static void a_done_task_is_never_found_again_even_when_its_record_is_reused(void **state)
{
    (void)state;
    zp_tasks_t *ts;
    assert_int_equal(zp_tasks_create(&ts), 0);
    zp_task_t *t = add(ts, 0, 1);
    uint64_t old = t->id;
    assert_ptr_equal(zp_tasks_lookup(ts, old), t);
    zp_tasks_next(ts);
    zp_tasks_done(ts, t);
    assert_null(zp_tasks_lookup(ts, old));
    zp_task_t *u = add(ts, 5, 1);
    assert_ptr_equal(u, t); /* the same record ... */
    assert_int_not_equal(u->id, old); /* ... under a new id: a late result for the old is refused */
    assert_null(zp_tasks_lookup(ts, old));
    assert_ptr_equal(zp_tasks_lookup(ts, u->id), u);
    assert_null(zp_tasks_lookup(ts, 0));
    assert_null(zp_tasks_lookup(ts, (7ull << 20) | 100000)); /* an index past the pool */
    zp_tasks_destroy(&ts);
}

static void a_dead_loaders_tasks_go_back_to_the_front_of_the_queue(void **state)
{
    (void)state;
    zp_tasks_t *ts;
    assert_int_equal(zp_tasks_create(&ts), 0);
    zp_task_t *a = add(ts, 0, 1), *b = add(ts, 1, 1);
    add(ts, 2, 1);
    zp_tasks_next(ts)->loader = 3; /* a to loader 3 */
    zp_tasks_next(ts)->loader = 4; /* b to loader 4 */
    assert_int_equal(zp_tasks_queued(ts), 1);
    assert_int_equal(zp_tasks_requeue(ts, 3), 1);
    assert_int_equal(zp_tasks_queued(ts), 2);
    assert_int_equal(a->loader, -1);
    assert_int_equal(b->loader, 4);
    assert_ptr_equal(zp_tasks_next(ts), a); /* before the task that was waiting */
    assert_int_equal(zp_tasks_next(ts)->indices[0], 2);
    assert_int_equal(zp_tasks_requeue(ts, 9), 0);
    zp_tasks_destroy(&ts);
}

static void a_lost_task_comes_back_one_sample_a_task_and_its_culprit_is_found(void **state)
{
    (void)state;
    zp_tasks_t *ts;
    assert_int_equal(zp_tasks_create(&ts), 0);
    zp_task_t *a = add(ts, 10, 4);
    a->fetch_id = 7, a->offset = 32, a->split = 1;
    uint64_t old_id = a->id;
    add(ts, 90, 1); /* waiting behind it */
    zp_tasks_next(ts)->loader = 2;
    zp_task_t *culprit;
    assert_int_equal(zp_tasks_lose(ts, 2, 0, &culprit), 4); /* split: samples 10..13 */
    assert_null(culprit);
    /* its old form's id is no task now: a late result of it is dropped, never taken for
     * the first sample's */
    assert_null(zp_tasks_lookup(ts, old_id));
    assert_int_equal(zp_tasks_queued(ts), 5);
    for (uint32_t k = 0; k < 4; k++) { /* in order, first, each a suspect of the same fetch */
        zp_task_t *t = zp_tasks_next(ts);
        assert_true(t->n == 1 && t->indices[0] == 10 + k && t->suspect && t->losses == 0);
        assert_true(t->fetch_id == 7 && t->offset == 32 + k && t->split == 1);
        t->loader = 5 + (int)k;
    }
    assert_int_equal(zp_tasks_next(ts)->indices[0], 90);
    /* sample 12 loses its loader, held alone: once is chance, twice is the sample */
    assert_int_equal(zp_tasks_lose(ts, 7, 0, &culprit), 1);
    assert_null(culprit);
    zp_task_t *t = zp_tasks_next(ts);
    assert_true(t->indices[0] == 12 && t->losses == 1);
    t->loader = 20; /* a loader holding nothing else */
    assert_int_equal(zp_tasks_lose(ts, 20, 1, &culprit), 0);
    assert_non_null(culprit);
    assert_true(culprit->indices[0] == 12 && culprit->losses == 2 && culprit->hung == 1);
    assert_int_equal(zp_tasks_queued(ts), 0); /* not queued: the caller settles it */
    /* a suspect lost with another task held beside it proves nothing */
    zp_task_t *u = add(ts, 40, 1), *v = add(ts, 50, 1);
    u->suspect = 1;
    zp_tasks_next(ts)->loader = 3, zp_tasks_next(ts)->loader = 3;
    assert_int_equal(zp_tasks_lose(ts, 3, 0, &culprit), 2);
    assert_null(culprit);
    assert_true(u->losses == 0 && v->suspect); /* and the other is a suspect now */
    zp_tasks_destroy(&ts);
}

static void growing_the_table_keeps_the_queue_order(void **state)
{
    (void)state;
    zp_tasks_t *ts;
    assert_int_equal(zp_tasks_create(&ts), 0);
    for (uint32_t i = 0; i < 200; i++) { /* the FIFO's head moves on: growth has to unwrap it */
        add(ts, i, 1);
        zp_tasks_done(ts, zp_tasks_next(ts));
    }
    for (uint32_t i = 0; i < 1000; i++) /* past 256 and 512 records */
        add(ts, 1000 + i, 1);
    assert_int_equal(zp_tasks_queued(ts), 1000);
    for (uint32_t i = 0; i < 1000; i++)
        assert_int_equal(zp_tasks_next(ts)->indices[0], 1000 + i);
    zp_tasks_destroy(&ts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tasks_keep_their_indices_and_come_out_in_fifo_order),
        cmocka_unit_test(a_done_task_is_never_found_again_even_when_its_record_is_reused),
        cmocka_unit_test(a_dead_loaders_tasks_go_back_to_the_front_of_the_queue),
        cmocka_unit_test(growing_the_table_keeps_the_queue_order),
        cmocka_unit_test(a_lost_task_comes_back_one_sample_a_task_and_its_culprit_is_found),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

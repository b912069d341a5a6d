/* tasks.c — the broker's task table (tasks.h): a pool of records that grows
 * by doubling, a free list, and a ring buffer of record indices as the queue. */
#include "stages/cache/tasks.h"
#include "schemas/errors.h"

#include <stdlib.h>
#include <string.h>

struct zp_tasks {
    zp_task_t *pool;
    size_t cap;
    uint32_t *free_list; /* record indices not in use */
    size_t nfree;
    uint32_t *queue; /* FIFO of record indices waiting for a loader; cap entries */
    size_t qhead, qlen;
    uint64_t seq;
};

/* Doubles the pool (256 records at first): 0, ZP_EFULL or ZP_ENOMEM. */
static int grow(zp_tasks_t *ts)
{
    size_t cap = ts->cap ? ts->cap * 2 : 256;
    if (cap > ZP_TASKS_MAX)
        return ZP_EFULL;
    zp_task_t *p = realloc(ts->pool, cap * sizeof *p);
    if (p)
        ts->pool = p;
    uint32_t *fl = p ? realloc(ts->free_list, cap * sizeof *fl) : NULL;
    if (fl)
        ts->free_list = fl;
    uint32_t *q = fl ? malloc(cap * sizeof *q) : NULL;
    if (!q)
        return ZP_ENOMEM;
    for (size_t i = 0; i < ts->qlen; i++) /* unwrap the FIFO into the new array */
        q[i] = ts->queue[(ts->qhead + i) % ts->cap];
    free(ts->queue);
    ts->queue = q;
    ts->qhead = 0;
    memset(ts->pool + ts->cap, 0, (cap - ts->cap) * sizeof *p);
    for (size_t i = cap; i > ts->cap; i--)
        ts->free_list[ts->nfree++] = (uint32_t)(i - 1);
    ts->cap = cap;
    return 0;
}

int zp_tasks_create(zp_tasks_t **out)
{
    zp_tasks_t *ts = calloc(1, sizeof *ts);
    if (!ts || grow(ts)) {
        zp_tasks_destroy(&ts);
        *out = NULL;
        return ZP_ENOMEM;
    }
    *out = ts;
    return 0;
}

void zp_tasks_destroy(zp_tasks_t **tsp)
{
    zp_tasks_t *ts = tsp ? *tsp : NULL;
    if (!ts)
        return;
    for (size_t i = 0; i < ts->cap; i++)
        free(ts->pool[i].indices);
    free(ts->pool);
    free(ts->free_list);
    free(ts->queue);
    free(ts);
    *tsp = NULL;
}

int zp_tasks_add(zp_tasks_t *ts, const uint8_t *indices, uint64_t n, zp_task_t **out)
{
    int rc = ts->nfree ? 0 : grow(ts);
    if (rc)
        return rc;
    uint32_t i = ts->free_list[ts->nfree - 1];
    zp_task_t *t = &ts->pool[i];
    if (t->cap < n) {
        uint32_t *p = realloc(t->indices, n * sizeof *p);
        if (!p)
            return ZP_ENOMEM;
        t->indices = p;
        t->cap = n;
    }
    ts->nfree--;
    memcpy(t->indices, indices, n * 4);
    t->id = (++ts->seq << 20) | i;
    t->n = n;
    t->loader = -1;
    t->suspect = t->losses = t->hung = 0;
    ts->queue[(ts->qhead + ts->qlen++) % ts->cap] = i;
    *out = t;
    return 0;
}

zp_task_t *zp_tasks_lookup(zp_tasks_t *ts, uint64_t id)
{
    uint64_t i = id & (ZP_TASKS_MAX - 1);
    if (id == 0 || i >= ts->cap || ts->pool[i].id != id)
        return NULL;
    return &ts->pool[i];
}

void zp_tasks_done(zp_tasks_t *ts, zp_task_t *t)
{
    t->id = 0;
    ts->free_list[ts->nfree++] = (uint32_t)(t - ts->pool);
}

zp_task_t *zp_tasks_next(zp_tasks_t *ts)
{
    if (!ts->qlen)
        return NULL;
    zp_task_t *t = &ts->pool[ts->queue[ts->qhead]];
    ts->qhead = (ts->qhead + 1) % ts->cap;
    ts->qlen--;
    return t;
}

zp_task_t *zp_tasks_peek(zp_tasks_t *ts)
{
    return ts->qlen ? &ts->pool[ts->queue[ts->qhead]] : NULL;
}

int64_t zp_tasks_requeue(zp_tasks_t *ts, int loader)
{
    int64_t n = 0;
    for (size_t k = 0; k < ts->cap; k++) {
        zp_task_t *t = &ts->pool[k];
        if (t->id && t->loader == loader) {
            t->loader = -1;
            ts->qhead = (ts->qhead + ts->cap - 1) % ts->cap;
            ts->queue[ts->qhead] = (uint32_t)k;
            ts->qlen++;
            n++;
        }
    }
    return n;
}

static void push_front(zp_tasks_t *ts, uint32_t k)
{
    ts->qhead = (ts->qhead + ts->cap - 1) % ts->cap;
    ts->queue[ts->qhead] = k;
    ts->qlen++;
}

/* Task k (several samples) as one task a sample, each a suspect at the front
 * of the queue in the order of the samples; 0, or ZP_EFULL / ZP_ENOMEM with
 * nothing changed. */
static int split(zp_tasks_t *ts, uint32_t k)
{
    uint64_t n = ts->pool[k].n;
    for (uint64_t j = n - 1; j >= 1; j--) { /* the last first: they end up in order */
        zp_task_t *t;
        uint8_t one[4];
        memcpy(one, &ts->pool[k].indices[j], 4);
        int rc = zp_tasks_add(ts, one, 1, &t); /* queued last; moved to the front below */
        if (rc) {
            for (uint64_t undo = n - 1; undo > j; undo--) { /* back as it was */
                zp_task_t *u = &ts->pool[ts->queue[ts->qhead]];
                ts->qhead = (ts->qhead + 1) % ts->cap, ts->qlen--;
                zp_tasks_done(ts, u);
            }
            return rc;
        }
        const zp_task_t *whole = &ts->pool[k]; /* the pool may have moved */
        ts->qlen--; /* off the tail ... */
        t->prefetch = whole->prefetch;
        t->fetch_id = whole->fetch_id;
        t->split = whole->split, t->epoch = whole->epoch, t->has_epoch = whole->has_epoch;
        t->offset = whole->offset + j;
        t->suspect = 1;
        push_front(ts, (uint32_t)(t - ts->pool)); /* ... onto the head */
    }
    ts->pool[k].n = 1;
    return 0;
}

int64_t zp_tasks_lose(zp_tasks_t *ts, int loader, int hung, zp_task_t **culprit)
{
    int64_t n = 0, held = 0;
    *culprit = NULL;
    for (size_t k = 0; k < ts->cap; k++)
        held += ts->pool[k].id && ts->pool[k].loader == loader;
    for (size_t k = 0; k < ts->cap; k++) {
        zp_task_t *t = &ts->pool[k];
        if (!t->id || t->loader != loader)
            continue;
        t->loader = -1;
        t->hung = hung;
        if (t->suspect && held == 1 && ++t->losses >= ZP_TASK_CULPRIT_LOSSES && !*culprit) {
            *culprit = t;
            continue;
        }
        uint64_t was = t->n;
        if (was > 1 && split(ts, (uint32_t)k) == 0) {
            n += (int64_t)was - 1; /* its other samples, queued by split */
            /* its first sample, under a new id: the result of its old form from a loader
             * taken for lost (stopped, starved) that comes back is late, not a mismatch */
            ts->pool[k].id = (++ts->seq << 20) | k;
        }
        t = &ts->pool[k];
        t->suspect = 1;
        push_front(ts, (uint32_t)k);
        n++;
    }
    return n;
}

size_t zp_tasks_queued(const zp_tasks_t *ts)
{
    return ts->qlen;
}

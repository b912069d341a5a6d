/* tasks.h — the broker's task table: every task from the FETCH that made it
 * until its result is forwarded. A task is queued (FIFO, waiting for a loader
 * with credit) or held by one loader; a loader's death puts its tasks back at
 * the front of the queue, split into one task a sample when it held them
 * (zp_tasks_lose). Ids carry a sequence number, so a result for a task that
 * finished (its record reused since) is not mistaken for the new one's. */
#ifndef ZP_CACHE_TASKS_H
#define ZP_CACHE_TASKS_H

#include <stddef.h>
#include <stdint.h>

#define ZP_PEER_MAX 64 /* bytes of a ZeroMQ routing id we keep */
#define ZP_TASKS_MAX (1u << 20)

/* A ROUTER peer's routing id. */
typedef struct {
    uint8_t id[ZP_PEER_MAX];
    size_t idlen;
} zp_peer_t;

/* A task: a contiguous range of one fetch. */
typedef struct {
    uint64_t id;       /* (sequence << 20) | record index; 0 = unused */
    zp_peer_t prefetch; /* who asked */
    uint64_t fetch_id;
    uint64_t split, offset, n;
    uint64_t epoch, has_epoch; /* passed on to loaders that augment */
    uint32_t *indices; /* u32 sample indices [n]; owned by the table, reused */
    size_t cap;
    int loader;        /* the loader holding it; -1 while queued */
    /* A sample of a task whose loader was lost (died, or went silent):
     * handed to a loader that holds nothing else, so that a sample that
     * kills or hangs every loader is found (zp_tasks_lose). */
    int suspect;
    int losses;        /* times its loader was lost while it held this suspect alone */
    int hung;          /* the last loss was a silence (1) or a death (0) */
} zp_task_t;

typedef struct zp_tasks zp_tasks_t;

/* An empty table. Returns 0, or ZP_ENOMEM with *out NULL. */
int zp_tasks_create(zp_tasks_t **out);
/* Frees the table and every task's indices. Safe on NULL; nulls *ts. */
void zp_tasks_destroy(zp_tasks_t **ts);

/* A new task of n indices (u32 LE, copied; may be unaligned), queued last,
 * with a fresh id and loader -1; the caller fills in the other fields.
 * Returns 0; ZP_EFULL with ZP_TASKS_MAX tasks alive, or ZP_ENOMEM (nothing
 * added either way). *out is owned by the table: valid until zp_tasks_done. */
int zp_tasks_add(zp_tasks_t *ts, const uint8_t *indices, uint64_t n, zp_task_t **out);
/* The task with this id; NULL for 0, an id never given or one done. */
zp_task_t *zp_tasks_lookup(zp_tasks_t *ts, uint64_t id);
/* The task is finished: its id is never found again, its record reused. */
void zp_tasks_done(zp_tasks_t *ts, zp_task_t *t);
/* Takes the first queued task off the queue (its loader still -1: the caller
 * sets it); NULL when none waits. */
zp_task_t *zp_tasks_next(zp_tasks_t *ts);
/* The first queued task, left in the queue; NULL when none waits. */
zp_task_t *zp_tasks_peek(zp_tasks_t *ts);
/* Puts every task `loader` holds back at the front of the queue, loader -1.
 * Returns how many. */
int64_t zp_tasks_requeue(zp_tasks_t *ts, int loader);
/* The same for a loader lost while holding them (`hung`: silent, else
 * dead): a task of several samples is split into one task a sample, each a
 * suspect; a suspect lost ZP_TASK_CULPRIT_LOSSES times while its loader held
 * it alone is the culprit: not queued but returned in *culprit for the
 * caller to settle (skip or stop, loader.on_error; then zp_tasks_done). A
 * task that cannot be split (the table full) is queued whole. Returns the
 * tasks queued. */
#define ZP_TASK_CULPRIT_LOSSES 2
int64_t zp_tasks_lose(zp_tasks_t *ts, int loader, int hung, zp_task_t **culprit);
/* Tasks waiting in the queue. */
size_t zp_tasks_queued(const zp_tasks_t *ts);

#endif

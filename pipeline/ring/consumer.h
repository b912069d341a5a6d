/* consumer.h — the trainer side of one rank's ring: the PAIR socket to the
 * prefetch of that rank, the shared-memory ring it fills, and the checks a
 * BATCH passes before its slot is read. Messages are received, decoded and
 * dispatched by zp_inbox_recv to the routes the caller gives. Two callers:
 * the built-in trainer (stages/trainer/trainer.c) and the client library
 * for a user's own training program (client.c, zeus_pipe.h). */
#ifndef ZP_TRAINER_CONSUMER_H
#define ZP_TRAINER_CONSUMER_H

#include "pipeline/ring/ring.h"
#include "pipeline/net/inbox.h"
#include "pipeline/net/sock.h"
#include "pipeline/stage/stage.h"

/* One batch inside a ring slot: owned by the ring, valid during the call
 * that is given it (until the slot is FREE). */
typedef struct {
    int split, n;
    uint64_t epoch, index;  /* the epoch (from 0) and the batch within it */
    const uint32_t *idx;    /* n sample indices */
    const int32_t *labels;  /* n labels */
    const void *data;       /* n samples of meta.sample_bytes: float32 or uint8 */
    const zp_crop_t *crops; /* n crops: meaningful for train batches cropped at assembly
                               (zp_augment_whole), x = -1 where not known */
} zp_batch_view_t;

typedef struct {
    zp_stage_t *st;
    int rank;
    void *sock;            /* PAIR to the prefetch; owned */
    zp_ring_t *ring;       /* mapped at the first message; owned */
    int pinned;            /* the mapping may not change (a GPU page-locked it) */
    zp_ring_layout_t lay;
    zp_frames_t f;
    zp_inbox_t inbox;
    int64_t dropped;       /* messages and BATCHes dropped */
} zp_consumer_t;

/* Connects rank `rank`'s ring socket; messages go to `routes` (ctx: the
 * caller's). Returns 0, or ZP_EINVAL (a batch does not fit in memory,
 * logged) or ZP_EZMQ; zp_consumer_close in either case. */
int zp_consumer_open(zp_consumer_t *c, zp_stage_t *st, int rank, const zp_route_t *routes,
                     int nroutes);
void zp_consumer_close(zp_consumer_t *c);

/* Waits up to timeout_ms for the prefetch's next message and dispatches it
 * (the wait is charged to the stage's wait-in state).
 * Returns the route's result, 0 when none came (or it was dropped), or
 * ZP_ESTOP / ZP_EZMQ. */
int zp_consumer_wait(zp_consumer_t *c, void *ctx, int timeout_ms);

/* Maps this rank's ring, the one whose header carries `nonce` (0: the file
 * of that name now). A dead run's file of the same name (another nonce) is
 * refused and looked up again until the prefetch has replaced it, for 30 s.
 * Returns 0, ZP_ESTOP, or the error (logged). */
int zp_consumer_map(zp_consumer_t *c, uint64_t nonce);

/* A BATCH's slot as a view. Returns 0 with `v` filled; 1 when the BATCH
 * does not fit the ring (dropped, counted and its slot, if one of ours,
 * given back); or an error: the ring cannot be mapped, or a pinned ring is
 * not the BATCH's. */
int zp_consumer_view(zp_consumer_t *c, const zp_msg_t *m, zp_batch_view_t *v);

/* FREE(slot, gen): the slot is the prefetch's again. 0 or ZP_EZMQ. */
int zp_consumer_release(zp_consumer_t *c, uint64_t slot, uint64_t gen);

#endif

/* ringlog.c — the prefetch's log of the ring: each BATCH sent and FREE
 * received, batched into ring records for the logger. */
#include "stages/prefetch/ringlog.h"
#include "pipeline/stage/event.h"
#include "pipeline/base/log.h"
#include "schemas/records.h"

static void send_log(zp_ringlog_t *l, zp_stage_t *st)
{
    int64_t now = zp_now_ns(), before[ZP_RINGLOG_MAX];
    double wall = zp_wall_s();
    for (int i = 0; i < l->n; i++)
        before[i] = (now - l->at[i]) / 1000;
    zp_event_t ev;
    zp_event_record_at(st, &ev, ZP_REC_RING, wall);
    zp_event_ints(&ev, ZP_KEY(RING, at), before, l->n);
    zp_event_ints(&ev, ZP_KEY(RING, slot), l->slot, l->n);
    zp_event_ints(&ev, ZP_KEY(RING, gen), l->gen, l->n);
    zp_event_ints(&ev, ZP_KEY(RING, free), l->free, l->n);
    zp_event_int(&ev, ZP_KEY(RING, in_use), l->in_use);
    zp_event_send(st, &ev);
    l->n = 0;
}

void zp_ringlog_add(zp_ringlog_t *l, zp_stage_t *st, int is_free, uint32_t slot, uint32_t gen)
{
    l->at[l->n] = zp_now_ns();
    l->slot[l->n] = slot, l->gen[l->n] = gen, l->free[l->n] = is_free;
    l->n++;
    l->in_use += is_free ? -1 : 1;
    if (l->n == ZP_RINGLOG_MAX)
        send_log(l, st);
}

void zp_ringlog_tick(zp_ringlog_t *l, zp_stage_t *st, int force)
{
    int64_t now = zp_now_ns();
    if (!force && now < l->next_ns)
        return;
    l->next_ns = now + st->cfg.stat_interval_ms * 1000000;
    if (l->n)
        send_log(l, st);
}

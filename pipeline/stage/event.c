/* event.c — a record for the logger: an EVENT message whose body map has the
 * head (kind, stage, instance, pid, time, [event]) and the fields added,
 * counted as they come and the count written at send. */
#include "pipeline/stage/event.h"
#include "pipeline/base/log.h"
#include "pipeline/net/sock.h"

#include <unistd.h>
#include <zmq.h>

static int drop_write(void *data, const char *buf, size_t len)
{
    (void)data, (void)buf, (void)len;
    return 0;
}

static void ev_begin_at(zp_stage_t *st, zp_event_t *ev, const char *kind, double wall)
{
    static const char map32[5] = {(char)0xdf}; /* its size written by zp_event_send */
    ev->buf = zp_sock_thread_buffer(ZP_BUF_EVENT); /* NULL: the event is dropped, counted */
    msgpack_packer_init(&ev->pk, ev->buf, ev->buf ? msgpack_sbuffer_write : drop_write);
    zp_msg_pack_begin(&ev->pk, ZP_MSG_EVENT, 1);
    zp_msg_pack_str(&ev->pk, "body");
    ev->map_at = ev->buf ? ev->buf->size : 0;
    ev->fields = 0;
    ev->pk.callback(ev->pk.data, map32, sizeof map32);
    zp_event_str(ev, ZP_KEY(HEAD, kind), kind);
    zp_event_str(ev, ZP_KEY(HEAD, stage), st->name);
    zp_event_int(ev, ZP_KEY(HEAD, instance), st->instance);
    zp_event_int(ev, ZP_KEY(HEAD, pid), getpid());
    zp_event_num(ev, ZP_KEY(HEAD, time), wall);
}

void zp_event_begin(zp_stage_t *st, zp_event_t *ev, const char *kind)
{
    ev_begin_at(st, ev, kind, zp_wall_s());
}

void zp_event_record_at(zp_stage_t *st, zp_event_t *ev, zp_record_type_t type, double wall)
{
    ev_begin_at(st, ev, zp_records_kind_name(zp_records_kind(type)), wall);
    if (zp_records_kind(type) == ZP_KIND_METRIC)
        zp_event_str(ev, ZP_KEY(HEAD, event), zp_records_event(type));
}

void zp_event_record(zp_stage_t *st, zp_event_t *ev, zp_record_type_t type)
{
    zp_event_record_at(st, ev, type, zp_wall_s());
}

/* A field's key, counted. */
static void ev_key(zp_event_t *ev, const char *key)
{
    zp_msg_pack_str(&ev->pk, key);
    ev->fields++;
}

void zp_event_str(zp_event_t *ev, const char *key, const char *val)
{
    ev_key(ev, key);
    zp_msg_pack_str(&ev->pk, val);
}

void zp_event_int(zp_event_t *ev, const char *key, int64_t val)
{
    ev_key(ev, key);
    msgpack_pack_int64(&ev->pk, val);
}

void zp_event_num(zp_event_t *ev, const char *key, double val)
{
    ev_key(ev, key);
    msgpack_pack_double(&ev->pk, val);
}

void zp_event_ints(zp_event_t *ev, const char *key, const int64_t *v, int n)
{
    ev_key(ev, key);
    msgpack_pack_array(&ev->pk, (uint32_t)n);
    for (int i = 0; i < n; i++)
        msgpack_pack_int64(&ev->pk, v[i]);
}

void zp_event_send(zp_stage_t *st, zp_event_t *ev)
{
    if (!st->events || !ev->buf) {
        st->events_dropped++;
        return;
    }
    unsigned char *size = (unsigned char *)ev->buf->data + ev->map_at + 1; /* map32: big-endian */
    for (int i = 0; i < 4; i++)
        size[i] = (unsigned char)(ev->fields >> (24 - 8 * i));
    if (zmq_send(st->events, ev->buf->data, ev->buf->size, ZMQ_DONTWAIT) < 0)
        st->events_dropped++;
}

/* trace.c — RUN/trace.json, the run's timeline for Perfetto (trace.h).
 *
 * Not a renderer of the run model (model.h), by design: the model keeps
 * each region's statistics, while the trace draws every timer sample at the
 * time it started, every ring message and every stats record, and keeps
 * the earliest and the latest of them in bounded memory as it goes. So it
 * makes a streaming pass of its own over the raw records (eventlog.h). */
#define _GNU_SOURCE
#include "pipeline/report/trace.h"
#include "pipeline/report/eventlog.h"
#include "pipeline/base/files.h"
#include "pipeline/base/json.h"
#include "pipeline/base/names.h"
#include "pipeline/base/timer.h"
#include "schemas/errors.h"
#include "schemas/msg.h"
#include "schemas/records.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { C_QUEUE, C_ITEMS, C_BUSY, C_STATS, C_RING = C_STATS, C_COUNT };
static const char *const COUNTERS[C_COUNT] = {"queue", "items_per_s", "busy", "ring_slots_in_use"};

/* A prefetch's ring on tracks of its own: its BATCH and FREE messages as
 * instants on one, and each slot's batches, from BATCH to FREE (the time the
 * trainer held it), as complete events on one track per slot. */
#define RING_TID 900
#define SLOT_TID 1000
#define SLOTS_MAX 64 /* slots drawn; messages of others are instants only */

#define PROCS_MAX 4096

typedef struct {
    int64_t ts;    /* microseconds since 1970 */
    int64_t dur;   /* 'X': nanoseconds */
    double value;  /* 'C' */
    int32_t proc;  /* index into procs */
    int16_t what;  /* 'X': region; 'C': counter */
    char ph;
} tev_t;

typedef struct {
    char stage[ZP_REC_NAME_MAX];
    int64_t instance, os_pid;
    uint32_t regions; /* bit per region with a kept event */
    int ring;         /* a kept BATCH or FREE */
    uint64_t slots;   /* bit per slot with a kept hold */
    int64_t in_use;   /* the ring's slots held, message by message */
    int64_t batch_ts[SLOTS_MAX], batch_gen[SLOTS_MAX]; /* each slot's last BATCH; gen -1: none */
} proc_t;

typedef struct {
    tev_t *v;
    int64_t n, cap;
} vec_t;

typedef struct {
    int64_t max, seen, left_out, no_start, bad;
    int over;         /* past max: early and late are heaps */
    vec_t all;        /* every event, while not over */
    vec_t early;      /* max-heap by ts of the earliest max/2 */
    vec_t late;       /* min-heap by ts of the latest max - max/2 */
    proc_t *procs;
    int nprocs;
} trace_t;

static int push(vec_t *v, const tev_t *e)
{
    if (v->n == v->cap) {
        int64_t cap = v->cap ? v->cap * 2 : 1024;
        tev_t *p = realloc(v->v, (size_t)cap * sizeof *p);
        if (!p)
            return ZP_ENOMEM;
        v->v = p, v->cap = cap;
    }
    v->v[v->n++] = *e;
    return 0;
}

/* Heaps on ts: sign 1 keeps the largest on top, -1 the smallest. */
static int above(const tev_t *a, const tev_t *b, int sign)
{
    return sign > 0 ? a->ts > b->ts : a->ts < b->ts;
}

static void sift_down(vec_t *h, int64_t i, int sign)
{
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, top = i;
        if (l < h->n && above(&h->v[l], &h->v[top], sign))
            top = l;
        if (r < h->n && above(&h->v[r], &h->v[top], sign))
            top = r;
        if (top == i)
            return;
        tev_t t = h->v[i];
        h->v[i] = h->v[top], h->v[top] = t;
        i = top;
    }
}

static void heapify(vec_t *h, int sign)
{
    for (int64_t i = h->n / 2 - 1; i >= 0; i--)
        sift_down(h, i, sign);
}

static int by_time(const void *a, const void *b)
{
    const tev_t *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    if (x->proc != y->proc)
        return x->proc < y->proc ? -1 : 1;
    if (x->ph != y->ph)
        return x->ph < y->ph ? -1 : 1;
    return (x->what > y->what) - (x->what < y->what);
}

/* Past max: the earliest half and the latest rest become the two heaps. */
static int split(trace_t *t)
{
    qsort(t->all.v, (size_t)t->all.n, sizeof *t->all.v, by_time);
    int64_t ne = t->max / 2, nl = t->max - ne, drop = t->all.n - ne - nl;
    for (int64_t i = 0; i < t->all.n; i++)
        if ((i < ne && push(&t->early, &t->all.v[i])) ||
            (i >= ne + drop && push(&t->late, &t->all.v[i])))
            return ZP_ENOMEM;
    t->left_out += drop;
    free(t->all.v);
    t->all = (vec_t){0};
    heapify(&t->early, 1);
    heapify(&t->late, -1);
    t->over = 1;
    return 0;
}

/* Keeps e if it is among the earliest or the latest seen; one event is left out either way. */
static void keep_bounded(trace_t *t, tev_t e)
{
    if (t->early.n && e.ts < t->early.v[0].ts) {
        tev_t out = t->early.v[0];
        t->early.v[0] = e;
        sift_down(&t->early, 0, 1);
        e = out; /* no longer among the earliest: maybe among the latest */
    }
    if (t->late.n && e.ts > t->late.v[0].ts) {
        t->late.v[0] = e;
        sift_down(&t->late, 0, -1);
    }
    t->left_out++;
}

/* An event's time, µs from 1970, is within ±TS_LIMIT (±73,000 years), or its
 * record is unreadable: so the difference of two never overflows. */
#define TS_LIMIT ((int64_t)1 << 61)

/* time_us - ago into *ts: 0 when that overflows or falls outside ±TS_LIMIT. */
static int time_of(int64_t time_us, int64_t ago, int64_t *ts)
{
    return !__builtin_sub_overflow(time_us, ago, ts) && *ts >= -TS_LIMIT && *ts <= TS_LIMIT;
}

static int add(trace_t *t, const tev_t *e)
{
    if (e->ts < -TS_LIMIT || e->ts > TS_LIMIT) {
        t->bad++;
        return 0;
    }
    t->seen++;
    if (t->over) {
        keep_bounded(t, *e);
        return 0;
    }
    int rc = push(&t->all, e);
    return rc ? rc : t->all.n > t->max ? split(t) : 0;
}

/* The process of a stage instance, added on first sight; -1 past PROCS_MAX. */
static int proc_of(trace_t *t, const zp_rec_head_t *h)
{
    for (int i = 0; i < t->nprocs; i++)
        if (t->procs[i].instance == h->instance && !strcmp(t->procs[i].stage, h->stage)) {
            proc_t *p = &t->procs[i];
            if (p->os_pid != h->pid) { /* restarted (a resumed run): its ring starts empty */
                p->in_use = 0;
                for (int s = 0; s < SLOTS_MAX; s++)
                    p->batch_gen[s] = -1;
            }
            p->os_pid = h->pid;
            return i;
        }
    if (t->nprocs == PROCS_MAX)
        return -1;
    if (!(t->nprocs & (t->nprocs - 1)) || !t->procs) {
        proc_t *p = realloc(t->procs, (size_t)(t->nprocs ? t->nprocs * 2 : 8) * sizeof *p);
        if (!p)
            return -1;
        t->procs = p;
    }
    proc_t *p = &t->procs[t->nprocs];
    memset(p, 0, sizeof *p);
    for (int s = 0; s < SLOTS_MAX; s++)
        p->batch_gen[s] = -1;
    snprintf(p->stage, sizeof p->stage, "%s", h->stage);
    p->instance = h->instance;
    p->os_pid = h->pid;
    return t->nprocs++;
}

static int int_at(const msgpack_object *a, uint32_t i, int64_t *v)
{
    if (!a || a->type != MSGPACK_OBJECT_ARRAY || i >= a->via.array.size)
        return 0;
    const msgpack_object *o = &a->via.array.ptr[i];
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX)
        *v = (int64_t)o->via.u64;
    else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        *v = o->via.i64;
    else
        return 0;
    return 1;
}

static int on_timer(trace_t *t, int proc, int64_t time_us, const msgpack_object *b)
{
    zp_rec_timer_t x;
    zp_records_decode(ZP_REC_TIMER, b, &x);
    int region = zp_timer_region_of(x.region);
    uint32_t n = x.ns && x.ns->type == MSGPACK_OBJECT_ARRAY ? x.ns->via.array.size : 0;
    if (region < 0) {
        t->bad += n;
        return 0;
    }
    for (uint32_t i = 0; i < n; i++) {
        int64_t ns, start;
        if (!int_at(x.ns, i, &ns) || ns < 0) {
            t->bad++;
            continue;
        }
        if (!int_at(x.start, i, &start)) {
            t->no_start++;
            continue;
        }
        int64_t ts;
        if (!time_of(time_us, start, &ts)) {
            t->bad++;
            continue;
        }
        tev_t e = {.ts = ts, .dur = ns, .proc = proc, .what = (int16_t)region, .ph = 'X'};
        int rc = add(t, &e);
        if (rc)
            return rc;
    }
    return 0;
}

/* One BATCH or FREE of slot `slot`, generation gen, at ts: its instant, the
 * slot count after it, and for a FREE the hold since its BATCH. */
static int ring_message(trace_t *t, int proc, int64_t ts, int is_free, int64_t slot, int64_t gen)
{
    proc_t *p = &t->procs[proc];
    p->in_use += is_free ? -1 : 1;
    tev_t msg = {.ts = ts, .value = (double)slot, .proc = proc, .what = (int16_t)is_free, .ph = 'i'};
    tev_t count = {.ts = ts, .value = (double)p->in_use, .proc = proc, .what = C_RING, .ph = 'C'};
    int rc = add(t, &msg);
    if (!rc)
        rc = add(t, &count);
    if (rc || slot < 0 || slot >= SLOTS_MAX)
        return rc;
    if (!is_free) {
        p->batch_ts[slot] = ts, p->batch_gen[slot] = gen;
        return 0;
    }
    int64_t held; /* ns; both times within ±TS_LIMIT, the product may overflow */
    if (p->batch_gen[slot] != gen || ts < p->batch_ts[slot] ||
        __builtin_mul_overflow(ts - p->batch_ts[slot], 1000, &held))
        return 0; /* its BATCH came before the events file began, or was garbled */
    tev_t hold = {.ts = p->batch_ts[slot], .dur = held, .proc = proc,
                  .what = (int16_t)slot, .ph = 'S'};
    p->batch_gen[slot] = -1;
    return add(t, &hold);
}

static int on_ring(trace_t *t, int proc, int64_t time_us, const msgpack_object *b)
{
    zp_rec_ring_t x;
    zp_records_decode(ZP_REC_RING, b, &x);
    uint32_t n = x.at && x.at->type == MSGPACK_OBJECT_ARRAY ? x.at->via.array.size : 0;
    for (uint32_t i = 0; i < n; i++) {
        int64_t at, slot, gen, is_free, ts;
        if (!int_at(x.at, i, &at) || !int_at(x.slot, i, &slot) || !int_at(x.gen, i, &gen) ||
            !int_at(x.free, i, &is_free) || !time_of(time_us, at, &ts)) {
            t->bad++;
            continue;
        }
        int rc = ring_message(t, proc, ts, is_free != 0, slot, gen);
        if (rc)
            return rc;
    }
    return 0;
}

static int on_stats(trace_t *t, int proc, int64_t time_us, const msgpack_object *b)
{
    zp_rec_stats_t x;
    zp_records_decode(ZP_REC_STATS, b, &x);
    double v[C_STATS] = {[C_QUEUE] = (double)x.queue, [C_ITEMS] = x.items_per_s, [C_BUSY] = x.busy};
    for (int c = 0; c < C_STATS; c++) {
        tev_t e = {.ts = time_us, .value = isfinite(v[c]) ? v[c] : 0, .proc = proc, .what = (int16_t)c, .ph = 'C'};
        int rc = add(t, &e);
        if (rc)
            return rc;
    }
    return 0;
}

static int on_record(void *ctx, const msgpack_object *o)
{
    trace_t *t = ctx;
    const msgpack_object *b = zp_msg_map_get(o, "body");
    zp_rec_head_t h;
    zp_record_type_t type = b ? zp_records_head(b, &h) : ZP_REC_NONE;
    if (type != ZP_REC_TIMER && type != ZP_REC_STATS && type != ZP_REC_RING)
        return 0;
    double time = h.time * 1e6;
    int proc = isfinite(time) && fabs(time) < 9e18 ? proc_of(t, &h) : -1;
    if (proc < 0) {
        t->bad++;
        return 0;
    }
    int64_t time_us = (int64_t)llround(time);
    if (type == ZP_REC_RING)
        return on_ring(t, proc, time_us, b);
    return type == ZP_REC_TIMER ? on_timer(t, proc, time_us, b) : on_stats(t, proc, time_us, b);
}

static void write_meta(const trace_t *t, FILE *out)
{
    char name[ZP_REC_NAME_MAX + 32];
    for (int i = 0; i < t->nprocs; i++) {
        const proc_t *p = &t->procs[i];
        int stage = zp_names_stage_of(p->stage);
        snprintf(name, sizeof name, "%s[%lld]", p->stage, (long long)p->instance);
        fprintf(out, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":", i + 1);
        zp_json_str(out, name);
        fprintf(out, ",\"os_pid\":%lld}},\n", (long long)p->os_pid);
        fprintf(out, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,"
                     "\"args\":{\"sort_index\":%lld}},\n",
                i + 1, (long long)(stage < 0 ? 99 : stage) * 100000 + (p->instance & 0xffff));
        for (int r = 0; r < ZP_R_COUNT; r++) {
            if (!(p->regions >> r & 1))
                continue;
            fprintf(out, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", i + 1, r + 1);
            zp_json_str(out, zp_timer_region_name(r));
            fprintf(out, "}},\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,"
                         "\"args\":{\"sort_index\":%d}},\n", i + 1, r + 1, r + 1);
        }
        if (p->ring)
            fprintf(out, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,"
                         "\"args\":{\"name\":\"ring: BATCH and FREE\"}},\n", i + 1, RING_TID);
        for (int s = 0; s < SLOTS_MAX; s++)
            if (p->slots >> s & 1)
                fprintf(out, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,"
                             "\"args\":{\"name\":\"slot %d: held by the trainer\"}},\n",
                        i + 1, SLOT_TID + s, s);
    }
}

static void write_event(const trace_t *t, const tev_t *e, int64_t origin, FILE *out)
{
    const proc_t *p = &t->procs[e->proc];
    if (e->ph == 'X') {
        fputs("{\"ph\":\"X\",\"name\":", out);
        zp_json_str(out, zp_timer_region_name(e->what));
        fputs(",\"cat\":", out);
        zp_json_str(out, p->stage);
        fprintf(out, ",\"pid\":%d,\"tid\":%d,\"ts\":%lld,\"dur\":%.3f}", e->proc + 1, e->what + 1,
                (long long)(e->ts - origin), (double)e->dur / 1000);
    } else if (e->ph == 'i') {
        fprintf(out, "{\"ph\":\"i\",\"s\":\"t\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%lld,"
                     "\"args\":{\"slot\":%.0f}}", e->what ? "FREE" : "BATCH", e->proc + 1, RING_TID,
                (long long)(e->ts - origin), e->value); /* a slot past 2^63 as a double */
    } else if (e->ph == 'S') {
        fprintf(out, "{\"ph\":\"X\",\"name\":\"held\",\"cat\":\"ring\",\"pid\":%d,\"tid\":%d,"
                     "\"ts\":%lld,\"dur\":%.3f}", e->proc + 1, SLOT_TID + e->what,
                (long long)(e->ts - origin), (double)e->dur / 1000);
    } else {
        fprintf(out, "{\"ph\":\"C\",\"name\":\"%s\",\"pid\":%d,\"tid\":0,\"ts\":%lld,\"args\":{\"%s\":%.6g}}",
                COUNTERS[e->what], e->proc + 1, (long long)(e->ts - origin), COUNTERS[e->what], e->value);
    }
}

/* The kept events in time order, in one array (the heaps' storage reused). */
static int gather(trace_t *t, vec_t *kept, int64_t *nearly)
{
    *nearly = -1;
    if (!t->over) {
        *kept = t->all, t->all = (vec_t){0};
    } else {
        if (t->early.n) /* qsort of NULL, even of none, is undefined */
            qsort(t->early.v, (size_t)t->early.n, sizeof *t->early.v, by_time);
        if (t->late.n)
            qsort(t->late.v, (size_t)t->late.n, sizeof *t->late.v, by_time);
        *nearly = t->early.n;
        *kept = t->early, t->early = (vec_t){0};
        for (int64_t i = 0; i < t->late.n; i++)
            if (push(kept, &t->late.v[i]))
                return ZP_ENOMEM;
        return 0;
    }
    if (kept->n)
        qsort(kept->v, (size_t)kept->n, sizeof *kept->v, by_time);
    return 0;
}

static void write_all(trace_t *t, const vec_t *kept, int64_t nearly, const char *run,
                      const zp_eventlog_count_t *count, FILE *out)
{
    int64_t origin = kept->n ? kept->v[0].ts : 0;
    for (int64_t i = 0; i < kept->n; i++) {
        const tev_t *e = &kept->v[i];
        proc_t *p = &t->procs[e->proc];
        if (e->ph == 'X')
            p->regions |= 1u << e->what;
        p->ring |= e->ph == 'i';
        if (e->ph == 'S')
            p->slots |= 1ull << e->what;
    }
    fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"run\":", out);
    zp_json_str(out, run);
    fprintf(out, ",\"origin_unix_us\":%lld,\"records\":%lld,\"skipped_records\":%lld,"
                 "\"skipped_bytes\":%lld,\"events\":%lld,\"events_left_out\":%lld,\"max_events\":%lld,"
                 "\"samples_without_start\":%lld,\"unreadable\":%lld},\n\"traceEvents\":[\n",
            (long long)origin, (long long)count->records, (long long)count->skipped_records,
            (long long)count->skipped_bytes, (long long)kept->n, (long long)t->left_out,
            (long long)t->max, (long long)t->no_start, (long long)t->bad);
    write_meta(t, out);
    fputs("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"zeus-pipe\"}}", out);
    for (int64_t i = 0; i < kept->n; i++) {
        fputs(",\n", out);
        write_event(t, &kept->v[i], origin, out);
        if (i + 1 == nearly)
            fprintf(out, ",\n{\"ph\":\"i\",\"s\":\"g\",\"name\":\"trace truncated: %lld events left out "
                         "here (logger.trace_max_events=%lld)\",\"pid\":0,\"tid\":0,\"ts\":%lld}",
                    (long long)t->left_out, (long long)t->max, (long long)(kept->v[i].ts - origin));
    }
    fputs("\n]}\n", out);
}

int zp_trace(const char *data, size_t size, const char *run, int64_t max_events, FILE *out,
             zp_trace_info_t *info)
{
    trace_t t = {.max = max_events < 2 ? 2 : max_events};
    zp_eventlog_count_t count = {0};
    vec_t kept = {0};
    int64_t nearly;
    int rc = zp_eventlog_scan(data, size, on_record, &t, &count);
    if (!rc)
        rc = gather(&t, &kept, &nearly);
    if (!rc)
        write_all(&t, &kept, nearly, run, &count, out);
    if (info)
        *info = (zp_trace_info_t){.records = count.records, .events = kept.n,
                                  .left_out = t.left_out, .processes = t.nprocs};
    free(kept.v), free(t.all.v), free(t.early.v), free(t.late.v), free(t.procs);
    return rc;
}

typedef struct {
    const char *data, *run;
    size_t size;
    int64_t max_events;
    zp_trace_info_t *info;
} fill_t;

static int fill(FILE *out, void *ctx, char *err, size_t errlen)
{
    fill_t *f = ctx;
    int rc = zp_trace(f->data, f->size, f->run, f->max_events, out, f->info);
    if (rc)
        snprintf(err, errlen, "trace.json: out of memory");
    return rc;
}

int zp_trace_write(const char *run_dir, int64_t max_events, zp_trace_info_t *info, char *err,
                   size_t errlen)
{
    fill_t f = {.max_events = max_events, .info = info};
    int rc = zp_eventlog_map(run_dir, &f.data, &f.size, err, errlen);
    if (rc)
        return rc;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/trace.json", run_dir);
    const char *slash = strrchr(run_dir, '/');
    f.run = slash && slash[1] ? slash + 1 : run_dir;
    rc = zp_files_write_aside(path, fill, &f, err, errlen);
    zp_eventlog_unmap(&f.data, f.size);
    return rc;
}

/* model.c — the run model: a run's records read once, in one pass, into
 * everything its reports say (model.h). */
#include "pipeline/report/model.h"
#include "pipeline/report/report_bottleneck.h"
#include "schemas/errors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STAGES ZP_STAGE_COUNT

typedef struct {
    double *v; /* milliseconds */
    size_t n, cap;
} series_t;

typedef struct { /* one stats record, for the series over time and the phases */
    double t, items_per_s, wait_in;
    int64_t instance;
    int final;
    double busy, window_s; /* the window's busy share, and its length (0: none said) */
} point_t;

typedef struct {
    point_t *v;
    size_t n, cap;
} points_t;

typedef struct { /* one cache record: a prefetch's hits and lookups in one split of an epoch */
    int64_t epoch;
    double hits, lookups;
} cache_t;

typedef struct { /* the latest stats record of one stage instance */
    int stage;
    int64_t instance;
    double items, errors, uptime, busy, wait_in, wait_out;
} inst_t;

/* What the pass gathers; finish() makes the model of it. Everything here is owned. */
typedef struct {
    zp_model_t *m;
    series_t series[STAGES][ZP_R_COUNT]; /* timer samples */
    points_t points[STAGES];             /* stats records with a time */
    inst_t *inst;
    size_t ninst, inst_cap;
    cache_t *cache; /* every cache record, in the order read */
    size_t ncache, cache_cap;
    int32_t *row_of; /* epoch number -> 1 + its row in m->epoch; 0: none yet */
    int64_t nrow_of;
    size_t epoch_cap, skip_cap;
} load_t;

/* v, with room for `need` elements of `size` bytes (*cap of them now),
 * doubling; NULL when out of memory (v is then as it was). */
static void *grown(void *v, size_t need, size_t *cap, size_t size)
{
    if (need <= *cap)
        return v;
    size_t c = *cap ? 2 * *cap : 16;
    if (c < need)
        c = need;
    void *p = realloc(v, c * size);
    if (p)
        *cap = c;
    return p;
}

static int split_of(const char *name)
{
    for (int s = 0; s < ZP_SPLITS; s++)
        if (!strcmp(name, zp_dataset_split_name(s)))
            return s;
    return -1;
}

/* Whether `epoch` is one of the run's: under ZP_MODEL_EPOCH_MAX, and under
 * `epochs` when the record says how many the run has (> 0). */
static int in_run(int64_t epoch, int64_t epochs)
{
    return epoch >= 0 && epoch < ZP_MODEL_EPOCH_MAX && (epochs <= 0 || epoch < epochs);
}

/* The row of `epoch` (one of the run's), added with its figures absent on
 * first sight; NULL when out of memory. */
static zp_model_epoch_t *row_at(load_t *l, int64_t epoch)
{
    zp_model_t *m = l->m;
    if (epoch >= l->nrow_of) {
        int64_t n = epoch + 1 > 2 * l->nrow_of ? epoch + 1 : 2 * l->nrow_of;
        int32_t *p = realloc(l->row_of, (size_t)n * sizeof *p);
        if (!p)
            return NULL;
        memset(p + l->nrow_of, 0, (size_t)(n - l->nrow_of) * sizeof *p);
        l->row_of = p, l->nrow_of = n;
    }
    if (!l->row_of[epoch]) {
        zp_model_epoch_t *v = grown(m->epoch, (size_t)m->nepochs + 1, &l->epoch_cap, sizeof *v);
        if (!v)
            return NULL;
        m->epoch = v;
        v[m->nepochs] = (zp_model_epoch_t){.epoch = epoch};
        for (int s = 0; s < ZP_SPLITS; s++)
            v[m->nepochs].loss[s] = v[m->nepochs].acc[s] = -1;
        l->row_of[epoch] = (int32_t)++m->nepochs;
    }
    return &m->epoch[l->row_of[epoch] - 1];
}

static int on_epoch_end(load_t *l, const zp_rec_head_t *h, const msgpack_object *b)
{
    zp_rec_epoch_end_t x;
    zp_records_decode(ZP_REC_EPOCH_END, b, &x);
    int s = split_of(x.split);
    if (s < 0 || !in_run(x.epoch, x.epochs))
        return ZP_EPROTO;
    zp_model_epoch_t *r = row_at(l, x.epoch);
    if (!r)
        return ZP_ENOMEM;
    r->have[s] = 1;
    if (ZP_HAS(&x, EPOCH_END, loss)) /* a program's comes in its train_epoch/test_epoch record */
        r->loss[s] = x.loss;
    if (ZP_HAS(&x, EPOCH_END, accuracy))
        r->acc[s] = x.accuracy;
    r->samples[s] = x.samples, r->expected[s] = x.expected_samples;
    r->skipped[s] = x.skipped, r->distinct[s] = x.distinct, r->repeats[s] = x.repeats;
    snprintf(r->checksum[s], sizeof r->checksum[s], "%.16s", x.index_checksum);
    if (s == ZP_SPLIT_TRAIN)
        r->samples_per_s = x.samples_per_s, r->seconds = x.seconds;
    if (isfinite(h->time) && h->time > r->t_end) /* the epoch ends with its last split */
        r->t_end = h->time;
    return 0;
}

/* A program's own figures of an epoch (zp.log("test_epoch", loss=..., accuracy=...)). */
static int on_program_epoch(load_t *l, int s, const msgpack_object *b)
{
    zp_rec_train_epoch_t x; /* test_epoch has the very same fields */
    _Static_assert(sizeof(zp_rec_train_epoch_t) == sizeof(zp_rec_test_epoch_t), "alike");
    zp_records_decode(s == ZP_SPLIT_TEST ? ZP_REC_TEST_EPOCH : ZP_REC_TRAIN_EPOCH, b, &x);
    if (!in_run(x.epoch, 0))
        return ZP_EPROTO;
    zp_model_epoch_t *r = row_at(l, x.epoch);
    if (!r)
        return ZP_ENOMEM;
    if (ZP_HAS(&x, TRAIN_EPOCH, loss))
        r->loss[s] = x.loss;
    if (ZP_HAS(&x, TRAIN_EPOCH, accuracy))
        r->acc[s] = x.accuracy;
    return 0;
}

static int on_step(load_t *l, const msgpack_object *b)
{
    zp_rec_step_t x;
    zp_records_decode(ZP_REC_STEP, b, &x);
    double at = (double)x.step / (x.steps_per_epoch > 0 ? (double)x.steps_per_epoch : 1);
    int rc = zp_xy_push(&l->m->step_loss, at, x.loss);
    return rc ? rc : zp_xy_push(&l->m->step_acc, at, x.accuracy);
}

/* Every sample must be a duration in nanoseconds, or none is taken. */
static int on_timer(load_t *l, int stage, const msgpack_object *b)
{
    zp_rec_timer_t t;
    zp_records_decode(ZP_REC_TIMER, b, &t);
    int region = zp_timer_region_of(t.region);
    if (region < 0 || !t.ns)
        return ZP_EPROTO;
    const msgpack_object_array *ns = &t.ns->via.array;
    for (uint32_t i = 0; i < ns->size; i++)
        if (ns->ptr[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER || ns->ptr[i].via.u64 > INT64_MAX)
            return ZP_EPROTO;
    series_t *s = &l->series[stage][region];
    if (!ns->size)
        return 0;
    double *v = grown(s->v, s->n + ns->size, &s->cap, sizeof *v);
    if (!v)
        return ZP_ENOMEM;
    s->v = v;
    for (uint32_t i = 0; i < ns->size; i++)
        v[s->n++] = (double)ns->ptr[i].via.u64 / 1e6;
    return 0;
}

/* The latest counters of stage[instance], added on first sight; NULL when out of memory. */
static inst_t *instance_of(load_t *l, int stage, int64_t instance)
{
    for (size_t i = 0; i < l->ninst; i++)
        if (l->inst[i].stage == stage && l->inst[i].instance == instance)
            return &l->inst[i];
    inst_t *v = grown(l->inst, l->ninst + 1, &l->inst_cap, sizeof *v);
    if (!v)
        return NULL;
    l->inst = v;
    v[l->ninst] = (inst_t){.stage = stage, .instance = instance};
    return &v[l->ninst++];
}

static int on_stats(load_t *l, int stage, const zp_rec_head_t *h, const msgpack_object *b)
{
    zp_rec_stats_t x;
    zp_records_decode(ZP_REC_STATS, b, &x);
    inst_t *e = instance_of(l, stage, h->instance);
    if (!e)
        return ZP_ENOMEM;
    e->items = (double)x.total_items, e->errors = (double)x.errors, e->uptime = x.uptime_s;
    e->busy = x.total_busy_s, e->wait_in = x.total_wait_in_s, e->wait_out = x.total_wait_out_s;
    if (!isfinite(h->time))
        return 0; /* its counters count; a point over time needs a time */
    points_t *p = &l->points[stage];
    point_t *v = grown(p->v, p->n + 1, &p->cap, sizeof *v);
    if (!v)
        return ZP_ENOMEM;
    p->v = v;
    v[p->n++] = (point_t){h->time, x.items_per_s, x.wait_in, h->instance, x.final == 1,
                          x.busy, isfinite(x.window_s) && x.window_s > 0 ? x.window_s : 0};
    return 0;
}

static int on_skip(load_t *l, const msgpack_object *b)
{
    zp_model_t *m = l->m;
    zp_rec_sample_skipped_t x;
    zp_records_decode(ZP_REC_SAMPLE_SKIPPED, b, &x);
    int s = split_of(x.split);
    if (s < 0)
        return ZP_EPROTO;
    m->skip_events++;
    for (int i = 0; i < m->nskips; i++)
        if (m->skip[i].index == x.index && m->skip[i].split == s)
            return 0;
    if (m->nskips == ZP_MODEL_SKIPS_MAX)
        return 0;
    zp_model_skip_t *v = grown(m->skip, (size_t)m->nskips + 1, &l->skip_cap, sizeof *v);
    if (!v)
        return ZP_ENOMEM;
    m->skip = v;
    v[m->nskips] = (zp_model_skip_t){.split = s, .index = x.index};
    memcpy(v[m->nskips++].error, x.error, sizeof x.error);
    m->nskipped[s]++;
    return 0;
}

/* A prefetch's hits and misses in one split of an epoch (the cache on): what
 * tells a cold epoch from a warm one (model.h). Its stats records' hit_rate
 * cannot: it counts a batch's lookups as the batch starts and its hits as
 * it gets a slot, later, so that a warm epoch's windows read 0.6 to 5. */
static int on_cache(load_t *l, const msgpack_object *b)
{
    zp_rec_cache_t x;
    zp_records_decode(ZP_REC_CACHE, b, &x);
    if (split_of(x.split) < 0 || !in_run(x.epoch, 0) || x.hits < 0 || x.misses < 0)
        return ZP_EPROTO;
    cache_t *v = grown(l->cache, l->ncache + 1, &l->cache_cap, sizeof *v);
    if (!v)
        return ZP_ENOMEM;
    l->cache = v;
    v[l->ncache++] = (cache_t){x.epoch, (double)x.hits, (double)x.hits + (double)x.misses};
    return 0;
}

static void on_loader_lost(zp_model_t *m, const msgpack_object *b)
{
    zp_rec_loader_lost_t x;
    zp_records_decode(ZP_REC_LOADER_LOST, b, &x);
    m->loaders_lost++;
    m->tasks_requeued += x.requeued > 0 ? x.requeued : 0;
}

/* One record's body, {kind, stage, ...}: 0, ZP_EPROTO (unread, model.h's
 * rule) or ZP_ENOMEM. */
static int on_record(load_t *l, const msgpack_object *b)
{
    if (b->type != MSGPACK_OBJECT_MAP)
        return ZP_EPROTO;
    zp_rec_head_t h;
    zp_record_type_t type = zp_records_head(b, &h);
    if (isfinite(h.time) && h.time > 0 && (!l->m->t0 || h.time < l->m->t0))
        l->m->t0 = h.time;
    if (type == ZP_REC_AUTOSCALE) /* the supervisor's: no stage of its own */
        return zp_report_autoscale_add(&l->m->autoscale, b);
    int stage = zp_names_stage_of(h.stage);
    if (stage < 0)
        return ZP_EPROTO;
    switch (type) {
    case ZP_REC_TIMER: return on_timer(l, stage, b);
    case ZP_REC_STATS: return on_stats(l, stage, &h, b);
    case ZP_REC_EPOCH_END: return on_epoch_end(l, &h, b);
    case ZP_REC_TRAIN_EPOCH: return on_program_epoch(l, ZP_SPLIT_TRAIN, b);
    case ZP_REC_TEST_EPOCH: return on_program_epoch(l, ZP_SPLIT_TEST, b);
    case ZP_REC_STEP: return on_step(l, b);
    case ZP_REC_SAMPLE_SKIPPED: return on_skip(l, b);
    case ZP_REC_LOADER_LOST: on_loader_lost(l->m, b); return 0;
    case ZP_REC_CACHE: return on_cache(l, b);
    default: return 0; /* a record no report uses, or one this version does not know */
    }
}

/* The scan's callback: a record the model cannot use is counted, and the scan goes on. */
static int scan_body(void *ctx, const msgpack_object *b)
{
    load_t *l = ctx;
    int rc = on_record(l, b);
    l->m->unread += rc == ZP_EPROTO;
    return rc == ZP_EPROTO ? 0 : rc;
}

/* ---- from what the pass gathered to the model --------------------------------------------- */

static int by_epoch(const void *a, const void *b)
{
    int64_t x = ((const zp_model_epoch_t *)a)->epoch, y = ((const zp_model_epoch_t *)b)->epoch;
    return (x > y) - (x < y);
}

static int by_time(const void *a, const void *b)
{
    const point_t *x = a, *y = b;
    return (x->t > y->t) - (x->t < y->t);
}

/* Each stage's counters: sums, and the mean over its instances of their shares of uptime. */
static void stage_sums(const load_t *l, zp_model_stage_t *out)
{
    for (size_t i = 0; i < l->ninst; i++) {
        const inst_t *e = &l->inst[i];
        zp_model_stage_t *s = &out[e->stage];
        double up = e->uptime > 0 ? e->uptime : 1;
        s->instances++;
        s->items += e->items;
        s->items_per_s += e->items / up;
        s->errors += e->errors;
        s->busy += e->busy / up, s->wait_in += e->wait_in / up, s->wait_out += e->wait_out / up;
    }
    for (int s = 0; s < STAGES; s++)
        if (out[s].instances)
            out[s].busy /= out[s].instances, out[s].wait_in /= out[s].instances,
                out[s].wait_out /= out[s].instances;
}

/* A stage's value over time (its points in time order): after each point,
 * the sum (or, for `wait`, the mean) of every live instance's latest
 * items_per_s (wait_in); an instance's final record is its last. */
static int over_time(const points_t *p, double t0, int wait, zp_xy_t *out)
{
    int64_t id[ZP_MODEL_INSTANCES_MAX];
    double val[ZP_MODEL_INSTANCES_MAX];
    int live[ZP_MODEL_INSTANCES_MAX], n = 0;
    for (size_t i = 0; i < p->n; i++) {
        const point_t *s = &p->v[i];
        int k = 0;
        while (k < n && id[k] != s->instance)
            k++;
        if (k == n && n == ZP_MODEL_INSTANCES_MAX)
            continue;
        if (k == n)
            id[n++] = s->instance;
        val[k] = wait ? s->wait_in : s->items_per_s;
        live[k] = 1;
        double sum = 0;
        int count = 0;
        for (int j = 0; j < n; j++)
            if (live[j] && isfinite(val[j]))
                sum += val[j], count++;
        live[k] = !s->final;
        int rc = zp_xy_push(out, s->t - t0, wait && count ? sum / count : sum);
        if (rc)
            return rc;
    }
    return 0;
}

static int timelines(load_t *l)
{
    zp_model_t *m = l->m;
    for (int s = 0; s < STAGES; s++) {
        points_t *p = &l->points[s];
        if (p->n)
            qsort(p->v, p->n, sizeof *p->v, by_time);
        int rc = over_time(p, m->t0, 0, &m->stage[s].throughput);
        if (rc)
            return rc;
    }
    return over_time(&l->points[ZP_STAGE_TRAINER], m->t0, 1, &m->trainer_wait);
}

/* The time per region, the trainer's wait and the whole run's verdict (phases() may judge
 * the run phase by phase instead). */
static void verdict(load_t *l)
{
    zp_model_t *m = l->m;
    for (int s = 0; s < STAGES; s++)
        for (int g = 0; g < ZP_R_COUNT; g++)
            zp_timer_region_stats(l->series[s][g].v, l->series[s][g].n, &m->region[s][g]);
    double io = m->region[ZP_STAGE_TRAINER][ZP_R_IO].total,
           ep = m->region[ZP_STAGE_TRAINER][ZP_R_EPOCH].total;
    m->epoch_s = ep / 1000;
    m->wait_share = ep > 0 ? io / ep : -1;
    const zp_model_stage_t *st = m->stage; /* the data stages lead names.h */
    zp_data_stages_t d = {.busy = {st[0].busy, st[1].busy, st[2].busy},
                          .loaders = st[ZP_STAGE_LOADER].instances, .seconds = m->epoch_s};
    zp_report_bottleneck(&d, m->wait_share, m->bottleneck, sizeof m->bottleneck, m->advice,
                         sizeof m->phase->advice); /* it fits a phase: a one-phase run's holds it */
}

/* ---- the phases: cold and warm epochs, each judged on its own (model.h) -------------------- */

/* What the phases are made of: the epochs that ended at a known time, in
 * epoch order, and what each one's records say; then each phase's end and
 * the sums of its records' shares. Everything here is owned; see phases(). */
typedef struct {
    int64_t n;        /* epochs */
    int64_t *row;     /* each one's row in m->epoch */
    double *end;      /* its end, never before the one before it */
    double *hits, *lookups; /* the prefetches' cache hits and lookups in it */
    int *kind;        /* ZP_PHASE_*; -1: not known yet */
    double *phase_end; /* each phase's end: its last epoch's */
    double (*sum)[4], (*win)[4]; /* per phase: loader, cache, prefetch busy and the
                                  * trainer's wait, times their windows; the windows */
} ended_t;

/* The first of the n ascending `end`s at or after t: the epoch (or phase) a
 * record of time t belongs to; n when it came after the last one ended. */
static int64_t ending_at(const double *end, int64_t n, double t)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (end[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The ended epoch of number `epoch`, or -1 (their numbers ascend). */
static int64_t ended_of(const zp_model_t *m, const ended_t *e, int64_t epoch)
{
    int64_t lo = 0, hi = e->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (m->epoch[e->row[mid]].epoch < epoch)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < e->n && m->epoch[e->row[lo]].epoch == epoch ? lo : -1;
}

/* The kind of each ended epoch from its cache records (every split's and
 * every prefetch's hits over their lookups); 0 when the run has none at all
 * (the cache off): every epoch is then ZP_PHASE_RUN. */
static int epoch_kinds(const load_t *l, ended_t *e)
{
    for (size_t i = 0; i < l->ncache; i++) {
        int64_t k = ended_of(l->m, e, l->cache[i].epoch);
        if (k >= 0)
            e->hits[k] += l->cache[i].hits, e->lookups[k] += l->cache[i].lookups;
    }
    int kind = -1; /* the next epoch's with lookups of its own, scanning backwards */
    for (int64_t k = e->n - 1; k >= 0; k--) {
        if (e->lookups[k] > 0)
            kind = e->hits[k] / e->lookups[k] < ZP_PHASE_WARM_HIT_RATE ? ZP_PHASE_COLD : ZP_PHASE_WARM;
        e->kind[k] = kind;
    }
    if (kind < 0) /* no epoch has one */
        return 0;
    for (int64_t k = 1; k < e->n; k++) /* after the last one with lookups: its kind */
        if (e->kind[k] < 0)
            e->kind[k] = e->kind[k - 1];
    return 1;
}

/* The phases (epochs, kind, span) into m->phase, and their ends, from the
 * ended epochs: as many as runs of epochs of one kind. 0 or ZP_ENOMEM. */
static int group_phases(zp_model_t *m, ended_t *e)
{
    size_t count = 1;
    for (int64_t k = 1; k < e->n; k++)
        count += e->kind[k] != e->kind[k - 1];
    m->phase = calloc(count, sizeof *m->phase), e->phase_end = malloc(count * sizeof *e->phase_end);
    e->sum = calloc(count, sizeof *e->sum), e->win = calloc(count, sizeof *e->win);
    if (!m->phase || !e->phase_end || !e->sum || !e->win)
        return ZP_ENOMEM;
    int n = 0;
    double start = 0;
    for (int64_t k = 0; k < e->n; k++) {
        if (!n || e->kind[k] != m->phase[n - 1].kind) {
            m->phase[n++] = (zp_model_phase_t){.first = m->epoch[e->row[k]].epoch,
                                               .kind = e->kind[k]};
            start = k ? e->end[k - 1] : fmin(m->t0, e->end[0]);
        }
        m->phase[n - 1].last = m->epoch[e->row[k]].epoch;
        m->phase[n - 1].seconds = e->end[k] - start;
        e->phase_end[n - 1] = e->end[k];
    }
    m->nphases = n;
    return 0;
}

/* Sums each phase's records' shares (those of the first phase include the
 * start-up's; those after the last epoch, the stages' final ones, count in
 * none) and counts its loaders. */
static void phase_sums(const load_t *l, zp_model_t *m, ended_t *e)
{
    static const int stages[4] = {ZP_STAGE_LOADER, ZP_STAGE_CACHE, ZP_STAGE_PREFETCH,
                                  ZP_STAGE_TRAINER};
    for (int s = 0; s < 4; s++) {
        const points_t *p = &l->points[stages[s]];
        int64_t seen[ZP_MODEL_INSTANCES_MAX], at = -1; /* loaders seen in phase `at` */
        int nseen = 0;
        for (size_t i = 0; i < p->n; i++) { /* in time order: a phase's records are together */
            const point_t *x = &p->v[i];
            int64_t k = ending_at(e->phase_end, m->nphases, x->t);
            double v = stages[s] == ZP_STAGE_TRAINER ? x->wait_in : x->busy;
            if (k == m->nphases || !(x->window_s > 0) || !isfinite(v))
                continue;
            e->sum[k][s] += v * x->window_s, e->win[k][s] += x->window_s;
            if (stages[s] != ZP_STAGE_LOADER)
                continue;
            if (k != at)
                at = k, nseen = 0;
            int known = 0;
            for (int j = 0; j < nseen && !known; j++)
                known = seen[j] == x->instance;
            if (!known && nseen < ZP_MODEL_INSTANCES_MAX)
                seen[nseen++] = x->instance, m->phase[k].loaders++;
        }
    }
}

/* Each phase's shares, then its verdict. */
static void judge_phases(zp_model_t *m, const ended_t *e)
{
    for (int i = 0; i < m->nphases; i++) {
        zp_model_phase_t *ph = &m->phase[i];
        for (int s = 0; s < 3; s++)
            ph->busy[s] = e->win[i][s] > 0 ? e->sum[i][s] / e->win[i][s] : 0;
        ph->wait = e->win[i][3] > 0 ? e->sum[i][3] / e->win[i][3] : -1;
        zp_data_stages_t d = {.busy = {ph->busy[0], ph->busy[1], ph->busy[2]},
                              .loaders = ph->loaders, .seconds = ph->seconds, .phase = ph->kind};
        zp_report_bottleneck(&d, ph->wait, ph->stage, sizeof ph->stage, ph->advice,
                             sizeof ph->advice);
    }
}

/* The run's advice: each phase's sentence after its epochs and kind, as many
 * as m->advice holds (then a pointer to report.json's list); and its
 * bottleneck: the stage of the phase in which the trainer waited the most
 * seconds. */
static void phases_verdict(zp_model_t *m)
{
    static const char more[] = " (More phases: report.json's \"phases\".)";
    size_t used = 0;
    int worst = 0;
    for (int i = 0; i < m->nphases; i++) {
        const zp_model_phase_t *ph = &m->phase[i], *w = &m->phase[worst];
        if (fmax(ph->wait, 0) * ph->seconds > fmax(w->wait, 0) * w->seconds)
            worst = i;
        char one[sizeof ph->advice + 64];
        int n = ph->first == ph->last
                    ? snprintf(one, sizeof one, "%sEpoch %lld (%s): %s", i ? " " : "",
                               (long long)ph->first + 1, zp_report_bottleneck_phase_name(ph->kind), ph->advice)
                    : snprintf(one, sizeof one, "%sEpochs %lld-%lld (%s): %s", i ? " " : "",
                               (long long)ph->first + 1, (long long)ph->last + 1,
                               zp_report_bottleneck_phase_name(ph->kind), ph->advice);
        if (used == SIZE_MAX || n < 0)
            continue;
        if (used + (size_t)n + sizeof more > sizeof m->advice) {
            memcpy(m->advice + used, more, sizeof more);
            used = SIZE_MAX; /* full: the rest only in report.json */
            continue;
        }
        memcpy(m->advice + used, one, (size_t)n + 1);
        used += (size_t)n;
    }
    snprintf(m->bottleneck, sizeof m->bottleneck, "%s", m->phase[worst].stage);
}

/* The one phase of a run with one kind of epoch (`kind`), or with none that
 * phases could tell apart: the whole run's figures and verdict. */
static void whole_run_phase(zp_model_t *m, const ended_t *e, int kind)
{
    zp_model_phase_t *ph = &m->phase[0];
    *ph = (zp_model_phase_t){.first = m->epoch[e->row[0]].epoch,
                             .last = m->epoch[e->row[e->n - 1]].epoch, .kind = kind,
                             .seconds = m->epoch_s, .wait = m->wait_share,
                             .loaders = m->stage[ZP_STAGE_LOADER].instances};
    for (int s = 0; s < 3; s++) /* the data stages lead names.h */
        ph->busy[s] = m->stage[s].busy;
    snprintf(ph->stage, sizeof ph->stage, "%s", m->bottleneck);
    size_t n = strnlen(m->advice, sizeof ph->advice - 1); /* it fits: verdict() */
    memcpy(ph->advice, m->advice, n);
    ph->advice[n] = 0;
    m->nphases = 1;
}

static void ended_free(ended_t *e)
{
    free(e->row), free(e->end), free(e->hits), free(e->lookups), free(e->kind), free(e->phase_end);
    free(e->sum), free(e->win);
}

/* The epochs that ended at a known time, with room for their kinds. */
static int ended_epochs(const zp_model_t *m, ended_t *e)
{
    size_t n = (size_t)m->nepochs;
    e->row = malloc(n * sizeof *e->row), e->end = malloc(n * sizeof *e->end);
    e->hits = calloc(n, sizeof *e->hits), e->lookups = calloc(n, sizeof *e->lookups);
    e->kind = malloc(n * sizeof *e->kind);
    if (n && !(e->row && e->end && e->hits && e->lookups && e->kind))
        return ZP_ENOMEM;
    for (int64_t i = 0; i < m->nepochs; i++) {
        if (!(m->epoch[i].t_end > 0))
            continue;
        e->row[e->n] = i;
        e->end[e->n] = e->n ? fmax(m->epoch[i].t_end, e->end[e->n - 1]) : m->epoch[i].t_end;
        e->n++;
    }
    return 0;
}

/* The run's phases; with several, the advice and the bottleneck are theirs
 * (model.h). After verdict() and timelines() (the points in time order). */
static int phases(load_t *l)
{
    zp_model_t *m = l->m;
    ended_t e = {0};
    int rc = ended_epochs(m, &e);
    if (rc || !e.n)
        goto done;
    if (!epoch_kinds(l, &e))
        for (int64_t k = 0; k < e.n; k++)
            e.kind[k] = ZP_PHASE_RUN;
    if ((rc = group_phases(m, &e)))
        goto done;
    if (m->nphases == 1) {
        whole_run_phase(m, &e, e.kind[0]);
        goto done;
    }
    phase_sums(l, m, &e);
    int timed = 0; /* phases with a trainer's window: none in an older version's run */
    for (int i = 0; i < m->nphases; i++)
        timed += e.win[i][3] > 0;
    if (!timed) {
        whole_run_phase(m, &e, ZP_PHASE_RUN);
        goto done;
    }
    judge_phases(m, &e);
    phases_verdict(m);
done:
    ended_free(&e);
    return rc;
}

static int finish(load_t *l)
{
    zp_model_t *m = l->m;
    if (m->nepochs)
        qsort(m->epoch, (size_t)m->nepochs, sizeof *m->epoch, by_epoch);
    stage_sums(l, m->stage);
    verdict(l);
    int rc = timelines(l);
    return rc ? rc : phases(l);
}

static void release(load_t *l)
{
    for (int s = 0; s < STAGES; s++) {
        for (int g = 0; g < ZP_R_COUNT; g++)
            free(l->series[s][g].v);
        free(l->points[s].v);
    }
    free(l->inst);
    free(l->cache);
    free(l->row_of);
}

int zp_model_load(zp_model_t **out, const char *run_dir, char *err, size_t errlen)
{
    load_t l = {.m = calloc(1, sizeof(zp_model_t))};
    *out = NULL;
    if (!l.m) {
        snprintf(err, errlen, "%s: out of memory", run_dir);
        return ZP_ENOMEM;
    }
    const char *base = strrchr(run_dir, '/');
    snprintf(l.m->run, sizeof l.m->run, "%s", base && base[1] ? base + 1 : run_dir);
    int rc = zp_runscan(run_dir, scan_body, &l, &l.m->scan, err, errlen);
    if (!rc)
        rc = finish(&l);
    release(&l);
    if (rc == ZP_ENOMEM)
        snprintf(err, errlen, "%s: out of memory", run_dir);
    if (rc)
        zp_model_destroy(&l.m);
    *out = l.m;
    return rc;
}

void zp_model_destroy(zp_model_t **m)
{
    if (!m || !*m)
        return;
    zp_model_t *x = *m;
    free(x->epoch);
    zp_xy_free(&x->step_loss);
    zp_xy_free(&x->step_acc);
    for (int s = 0; s < STAGES; s++)
        zp_xy_free(&x->stage[s].throughput);
    zp_xy_free(&x->trainer_wait);
    free(x->phase);
    free(x->skip);
    zp_report_autoscale_free(&x->autoscale);
    free(x);
    *m = NULL;
}

int zp_model_curve(const zp_model_t *m, int split, int acc, zp_xy_t *out)
{
    for (int64_t i = 0; i < m->nepochs; i++) {
        const zp_model_epoch_t *e = &m->epoch[i];
        double v = acc ? e->acc[split] : e->loss[split];
        int rc = e->have[split] && v >= 0 ? zp_xy_push(out, (double)e->epoch + 1, v) : 0;
        if (rc)
            return rc;
    }
    return 0;
}

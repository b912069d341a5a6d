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

typedef struct { /* one stats record, for the series over time */
    double t, items_per_s, wait_in;
    int64_t instance;
    int final;
} point_t;

typedef struct {
    point_t *v;
    size_t n, cap;
} points_t;

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

static int on_epoch_end(load_t *l, const msgpack_object *b)
{
    zp_rec_epoch_end_t x;
    zp_record_decode(ZP_REC_EPOCH_END, b, &x);
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
    r->skipped[s] = x.skipped, r->distinct[s] = x.distinct;
    snprintf(r->checksum[s], sizeof r->checksum[s], "%.16s", x.index_checksum);
    if (s == ZP_SPLIT_TRAIN)
        r->samples_per_s = x.samples_per_s, r->seconds = x.seconds;
    return 0;
}

/* A program's own figures of an epoch (zp.log("test_epoch", loss=..., accuracy=...)). */
static int on_program_epoch(load_t *l, int s, const msgpack_object *b)
{
    zp_rec_train_epoch_t x; /* test_epoch has the very same fields */
    _Static_assert(sizeof(zp_rec_train_epoch_t) == sizeof(zp_rec_test_epoch_t), "alike");
    zp_record_decode(s == ZP_SPLIT_TEST ? ZP_REC_TEST_EPOCH : ZP_REC_TRAIN_EPOCH, b, &x);
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
    zp_record_decode(ZP_REC_STEP, b, &x);
    double at = (double)x.step / (x.steps_per_epoch > 0 ? (double)x.steps_per_epoch : 1);
    int rc = zp_xy_push(&l->m->step_loss, at, x.loss);
    return rc ? rc : zp_xy_push(&l->m->step_acc, at, x.accuracy);
}

/* Every sample must be a duration in nanoseconds, or none is taken. */
static int on_timer(load_t *l, int stage, const msgpack_object *b)
{
    zp_rec_timer_t t;
    zp_record_decode(ZP_REC_TIMER, b, &t);
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
    zp_record_decode(ZP_REC_STATS, b, &x);
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
    v[p->n++] = (point_t){h->time, x.items_per_s, x.wait_in, h->instance, x.final == 1};
    return 0;
}

static int on_skip(load_t *l, const msgpack_object *b)
{
    zp_model_t *m = l->m;
    zp_rec_sample_skipped_t x;
    zp_record_decode(ZP_REC_SAMPLE_SKIPPED, b, &x);
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

static void on_loader_lost(zp_model_t *m, const msgpack_object *b)
{
    zp_rec_loader_lost_t x;
    zp_record_decode(ZP_REC_LOADER_LOST, b, &x);
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
    zp_record_type_t type = zp_record_head(b, &h);
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
    case ZP_REC_EPOCH_END: return on_epoch_end(l, b);
    case ZP_REC_TRAIN_EPOCH: return on_program_epoch(l, ZP_SPLIT_TRAIN, b);
    case ZP_REC_TEST_EPOCH: return on_program_epoch(l, ZP_SPLIT_TEST, b);
    case ZP_REC_STEP: return on_step(l, b);
    case ZP_REC_SAMPLE_SKIPPED: return on_skip(l, b);
    case ZP_REC_LOADER_LOST: on_loader_lost(l->m, b); return 0;
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

/* The time per region, the trainer's wait and the verdict. */
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
                         sizeof m->advice);
}

static int finish(load_t *l)
{
    zp_model_t *m = l->m;
    if (m->nepochs)
        qsort(m->epoch, (size_t)m->nepochs, sizeof *m->epoch, by_epoch);
    stage_sums(l, m->stage);
    verdict(l);
    return timelines(l);
}

static void release(load_t *l)
{
    for (int s = 0; s < STAGES; s++) {
        for (int g = 0; g < ZP_R_COUNT; g++)
            free(l->series[s][g].v);
        free(l->points[s].v);
    }
    free(l->inst);
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

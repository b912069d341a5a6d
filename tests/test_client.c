/* test_client.c — the client library (pipeline/include/zeus_pipe.h) against a
 * prefetch played by a thread of this test (the reverse of
 * test_trainer_ring.c): the views' indices, labels and samples are those
 * written into the ring, each release FREEs the batch's slot and generation,
 * the epoch's proof (samples, distinct, index checksum as pipeline/base/hash.h
 * computes it) reaches the logger's socket as an epoch_end record, a metric
 * and a timer region land there too, and a missing run, a wrong rank and a
 * ring that is not there are refused with a sentence saying so; a seek
 * releases what came before the prefetch's SEEKED, a refused one says so, and
 * a position out of range is refused before anything is sent. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "pipeline/dataset/dataset.h"
#include "pipeline/dataset/sampler.h"
#include "pipeline/base/hash.h"
#include "pipeline/ring/ring.h"
#include "pipeline/net/sock.h"
#include "pipeline/include/zeus_pipe.h"
#include "schemas/errors.h"
#include "schemas/msg.h"
#include "schemas/records.h"

#define BATCH 8
#define SAMPLES 64
#define ELEMS 16
#define DEPTH 2

static const char CONFIG[] =
    "seed: 7\n"
    "dataset:\n  source: synthetic\n"
    "  synthetic: {train_samples: 64, test_samples: 0, shape: [1, 4, 4], classes: 4}\n"
    "prefetch: {batch_size: 8, depth: 2}\n"
    "trainer: {backend: null, epochs: 1}\n";

/* The sample at position p of train epoch 0: the sampler's order for
 * CONFIG's seed, as a prefetch sends it (a seek's batches before its
 * position are counted from it: zp_coverage_resume). */
static uint32_t index_at(int p)
{
    static uint32_t order[SAMPLES + 1]; /* order[SAMPLES]: 1 once filled */
    if (!order[SAMPLES]) {
        zp_sampler_t s;
        assert_int_equal(zp_sampler_init(&s, SAMPLES), 0);
        assert_int_equal(zp_sampler_epoch(&s, 7, 0, 0, true, 0, 1, 0), 0);
        memcpy(order, s.order, sizeof(uint32_t) * SAMPLES);
        order[SAMPLES] = 1;
        zp_sampler_free(&s);
    }
    return order[p];
}
static float value_of(uint32_t idx, int j) { return (float)idx * 100 + (float)j; }

typedef struct {
    char run[64];
    zp_ring_t *ring;
    void *ctx, *sock;
    zp_ring_layout_t lay;
    /* what the thread saw: checked by the main thread after the join */
    int frees, bad_frees;
    zp_msg_t seek;         /* the last SEEK that came */
    int seeks;
    uint32_t gens[DEPTH];  /* generation of each slot in flight */
    int in_flight[DEPTH];
} prefetch_t;

/* A FREE from the client: its slot must be one in flight, of that generation. */
static int take_free(prefetch_t *p, zp_frames_t *f)
{
    zmq_pollitem_t it = {p->sock, 0, ZMQ_POLLIN, 0};
    zp_msg_t m = {0};
    char why[256];
    if (zmq_poll(&it, 1, 10000) != 1 || zp_frames_recv(f, p->sock, 0))
        return -1;
    int bad = zp_frames_decode(f, 0, &m, why, sizeof why);
    zp_msg_release(&m); /* the fields stay: slot and gen are copies */
    if (!bad && m.type == ZP_MSG_SEEK) {
        p->seek = m, p->seeks++;
        return 1;
    }
    if (bad || m.type != ZP_MSG_FREE)
        return -1;
    if (m.slot >= DEPTH || !p->in_flight[m.slot] || m.gen != p->gens[m.slot] ||
        zp_ring_release(p->ring, (uint32_t)m.slot, (uint32_t)m.gen)) {
        p->bad_frees++;
        return -1;
    }
    p->in_flight[m.slot] = 0;
    p->frees++;
    return 0;
}

static void fill(prefetch_t *p, uint32_t slot, int k)
{
    uint8_t *base = zp_ring_slot(p->ring, slot);
    uint32_t *idx = (uint32_t *)(base + p->lay.indices);
    int32_t *labels = (int32_t *)(base + p->lay.labels);
    float *data = (float *)(base + p->lay.data);
    for (int i = 0; i < BATCH; i++) {
        idx[i] = index_at(k * BATCH + i);
        labels[i] = (int32_t)(idx[i] % 4);
        for (int j = 0; j < ELEMS; j++)
            data[i * ELEMS + j] = value_of(idx[i], j);
    }
}

/* Batches [from, to) of epoch 0 through a ring of 2 slots. 0, or -1 when
 * the client went away (or sent a SEEK: see p->seek). */
static int send_batches(prefetch_t *p, zp_frames_t *f, int from, int to)
{
    for (int k = from; k < to; k++) {
        uint32_t slot, gen;
        while (zp_ring_acquire(p->ring, &slot, &gen))
            if (take_free(p, f))
                return -1;
        fill(p, slot, k);
        zp_ring_publish(p->ring, slot);
        p->gens[slot] = gen, p->in_flight[slot] = 1;
        zp_msg_t b = {.type = ZP_MSG_BATCH, .slot = slot, .gen = gen, .nonce = p->ring->nonce,
                      .split = ZP_SPLIT_TRAIN, .epoch = 0, .index = (uint64_t)k,
                      .batches = SAMPLES / BATCH, .n = BATCH, .elems = ELEMS,
                      .dtype = ZP_DTYPE_F32, .present = ZP_B(dtype)};
        if (zp_sock_send(p->sock, NULL, &b, NULL, NULL, 0, 0))
            return -1;
    }
    return 0;
}

/* Every slot back, then the epoch's EPOCH_END (n samples) and END. */
static void finish(prefetch_t *p, zp_frames_t *f, uint64_t n)
{
    while (p->in_flight[0] || p->in_flight[1])
        if (take_free(p, f))
            return;
    zp_msg_t e = {.type = ZP_MSG_EPOCH_END, .split = ZP_SPLIT_TRAIN, .epoch = 0, .n = n};
    zp_msg_t end = {.type = ZP_MSG_END};
    if (!zp_sock_send(p->sock, NULL, &e, NULL, NULL, 0, 0))
        zp_sock_send(p->sock, NULL, &end, NULL, NULL, 0, 0);
}

/* One epoch of 8 batches through a ring of 2 slots, its EPOCH_END and END. */
static void *play_prefetch(void *arg)
{
    prefetch_t *p = arg;
    zp_frames_t f;
    zp_frames_init(&f);
    if (!send_batches(p, &f, 0, SAMPLES / BATCH))
        finish(p, &f, SAMPLES);
    zp_frames_free(&f);
    return NULL;
}

/* Waits for a SEEK (taking FREEs meanwhile) and answers SEEKED, with
 * `error` when given. 0, or -1. */
static int answer_seek(prefetch_t *p, zp_frames_t *f, const char *error)
{
    int seeks = p->seeks;
    while (p->seeks == seeks)
        if (take_free(p, f) < 0)
            return -1;
    zp_msg_t m = {.type = ZP_MSG_SEEKED, .id = p->seek.id};
    if (error) {
        snprintf(m.error, sizeof m.error, "%s", error);
        m.present = ZP_B(error);
    }
    return zp_sock_send(p->sock, NULL, &m, NULL, NULL, 0, 0) ? -1 : 0;
}

/* Batches 0 and 1; a SEEK refused; a SEEK answered: batches from its index
 * on, and an EPOCH_END counting those. */
static void *play_seek(void *arg)
{
    prefetch_t *p = arg;
    zp_frames_t f;
    zp_frames_init(&f);
    if (!send_batches(p, &f, 0, 2) && !answer_seek(p, &f, "not now") && !answer_seek(p, &f, NULL) &&
        !send_batches(p, &f, (int)p->seek.index, SAMPLES / BATCH))
        finish(p, &f, SAMPLES); /* the epoch's samples: the seek's are counted as trained */
    zp_frames_free(&f);
    return NULL;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void make_run(prefetch_t *p)
{
    char path[PATH_MAX];
    snprintf(p->run, sizeof p->run, "/tmp/zp-client-XXXXXX");
    assert_non_null(mkdtemp(p->run));
    snprintf(path, sizeof path, "%s/sock", p->run);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/config.yaml", p->run);
    write_file(path, CONFIG);
    p->ctx = zmq_ctx_new();
}

static void remove_run(prefetch_t *p)
{
    char cmd[PATH_MAX];
    zp_ring_destroy(&p->ring);
    zp_sock_destroy(&p->sock);
    zmq_ctx_term(p->ctx);
    snprintf(cmd, sizeof cmd, "rm -rf %s", p->run);
    assert_int_equal(system(cmd), 0);
}

/* The logger's side: every record the client sends. */
static void *bind_logger(prefetch_t *p)
{
    char ep[PATH_MAX + 32];
    assert_int_equal(zp_sock_endpoint(ep, sizeof ep, p->run, "events"), 0);
    void *pull;
    assert_int_equal(zp_sock_create(&pull, p->ctx, ZMQ_PULL, ep, 1, 0), 0);
    return pull;
}

typedef struct {
    int epoch_ends, metrics, timers;
    zp_rec_epoch_end_t epoch_end;
    double loss;
} seen_t;

static void read_records(void *pull, seen_t *s)
{
    zp_frames_t f;
    zp_frames_init(&f);
    zp_msg_t m;
    char why[256];
    while (zp_frames_recv(&f, pull, ZMQ_DONTWAIT) == 0) {
        assert_int_equal(zp_frames_decode(&f, 0, &m, why, sizeof why), 0);
        assert_int_equal(m.type, ZP_MSG_EVENT);
        zp_rec_head_t h;
        zp_record_type_t t = zp_records_head(&m.body, &h);
        if (t == ZP_REC_EPOCH_END && s->epoch_ends++ == 0)
            zp_records_decode(t, &m.body, &s->epoch_end);
        if (t == ZP_REC_TIMER)
            s->timers++;
        if (!strcmp(h.kind, "metric") && !strcmp(h.event, "train_step")) {
            s->metrics++;
            const msgpack_object_map *map = &m.body.via.map;
            for (uint32_t i = 0; i < map->size; i++)
                if (map->ptr[i].key.type == MSGPACK_OBJECT_STR &&
                    map->ptr[i].key.via.str.size == 4 &&
                    !memcmp(map->ptr[i].key.via.str.ptr, "loss", 4))
                    s->loss = map->ptr[i].val.via.f64;
        }
        zp_msg_release(&m);
    }
    zp_frames_free(&f);
}

static void check_batch(const zp_client_batch_t *b, uint64_t k)
{
    assert_int_equal(b->split, ZP_CLIENT_TRAIN);
    assert_int_equal(b->index, k);
    assert_int_equal(b->batches, SAMPLES / BATCH);
    assert_int_equal(b->n, BATCH);
    assert_int_equal(b->dtype, ZP_CLIENT_F32);
    assert_true(b->c == 1 && b->h == 4 && b->w == 4);
    assert_int_equal(b->sample_bytes, ELEMS * 4);
    const float *x = b->data;
    for (int i = 0; i < BATCH; i++) {
        assert_int_equal(b->indices[i], index_at((int)k * BATCH + i));
        assert_int_equal(b->labels[i], (int32_t)(b->indices[i] % 4));
        for (int j = 0; j < ELEMS; j++)
            assert_true(x[i * ELEMS + j] == value_of(b->indices[i], j));
    }
}

static void an_epoch_reaches_the_client_and_its_proof_the_logger(void **state)
{
    (void)state;
    static prefetch_t p;
    memset(&p, 0, sizeof p);
    make_run(&p);
    char name[128], ep[PATH_MAX + 32], err[1024];
    assert_int_equal(zp_ring_layout(&p.lay, BATCH, ELEMS * 4), 0);
    zp_ring_name(name, sizeof name, p.run, 0);
    assert_int_equal(zp_ring_create(&p.ring, name, DEPTH, p.lay.bytes), 0);
    assert_int_equal(zp_sock_endpoint(ep, sizeof ep, p.run, "ring-0"), 0);
    assert_int_equal(zp_sock_create(&p.sock, p.ctx, ZMQ_PAIR, ep, 1, 0), 0);
    void *logger = bind_logger(&p);

    zp_client_t *c = zp_client_attach(p.run, 0, 5000, err, sizeof err);
    if (!c)
        fail_msg("attach: %s", err);
    /* the normalisation of uint8 pixels: the config's default mean/std, for 1 channel */
    float mean[2], std[2];
    assert_int_equal(zp_client_normalization(c, mean, std, 0), ZP_EINVAL);
    assert_int_equal(zp_client_normalization(c, mean, std, 2), 1);
    assert_true(mean[0] == 0.2860f && std[0] == 0.3530f);
    void *base = NULL;
    size_t bytes = 0;
    assert_int_equal(zp_client_ring(c, &base, &bytes), ZP_EINVAL); /* no batch yet */
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, play_prefetch, &p), 0);
    zp_client_batch_t b;
    uint64_t k = 0, checksum = 0;
    int kind, epoch_ends = 0;
    while ((kind = zp_client_next(c, &b, 10000)) == ZP_CLIENT_BATCH ||
           kind == ZP_CLIENT_EPOCH_END) {
        if (kind == ZP_CLIENT_EPOCH_END) {
            assert_int_equal(b.split, ZP_CLIENT_TRAIN);
            assert_int_equal(b.epoch, 0);
            assert_int_equal(b.samples, SAMPLES);
            assert_int_equal(b.expected, SAMPLES);
            epoch_ends++;
            continue;
        }
        check_batch(&b, k++);
        if (k == 1) { /* the mapping every batch lies in, for a GPU to page-lock */
            assert_int_equal(zp_client_ring(c, &base, &bytes), 0);
            const uint8_t *lo = base, *d = b.data;
            assert_true(d >= lo && d + (size_t)b.n * b.sample_bytes <= lo + bytes);
        }
        for (int i = 0; i < BATCH; i++)
            checksum += zp_index_term(b.indices[i]);
        assert_int_equal(zp_client_region_begin(c, "forward"), 0);
        if (k == 1) /* already open: refused (and logged) */
            assert_int_equal(zp_client_region_begin(c, "forward"), ZP_EINVAL);
        assert_int_equal(zp_client_region_end(c, "forward"), 0);
        const char *keys[] = {"loss"};
        double loss = 1.0 / (double)k;
        assert_int_equal(zp_client_log(c, "train_step", (int64_t)k, 0, 1, keys, &loss), 0);
        assert_int_equal(zp_client_release(c, &b), 0);
    }
    assert_int_equal(kind, ZP_CLIENT_END);
    assert_int_equal(zp_client_region_begin(c, "no-such-region"), ZP_EINVAL);
    assert_int_equal(k, SAMPLES / BATCH);
    assert_int_equal(epoch_ends, 1);
    pthread_join(th, NULL);
    assert_int_equal(p.frees, SAMPLES / BATCH);
    assert_int_equal(p.bad_frees, 0);
    zp_client_destroy(&c);
    assert_null(c);
    zp_client_destroy(&c); /* twice: nothing */

    seen_t s = {0};
    usleep(200000); /* the records are sent before destroy returns; let them arrive */
    read_records(logger, &s);
    assert_int_equal(s.epoch_ends, 1);
    assert_int_equal(s.epoch_end.samples, SAMPLES);
    assert_int_equal(s.epoch_end.expected_samples, SAMPLES);
    assert_int_equal(s.epoch_end.distinct, SAMPLES);
    char want[24];
    snprintf(want, sizeof want, "%016llx", (unsigned long long)checksum);
    assert_string_equal(s.epoch_end.index_checksum, want);
    assert_int_equal(s.metrics, SAMPLES / BATCH);
    assert_true(s.loss == 1.0 / (SAMPLES / BATCH));
    assert_true(s.timers > 0);
    zp_sock_destroy(&logger);
    remove_run(&p);
}

/* The run of the first test: the ring, its socket and a logger. */
static void *open_run(prefetch_t *p)
{
    char name[128], ep[PATH_MAX + 32];
    memset(p, 0, sizeof *p);
    make_run(p);
    assert_int_equal(zp_ring_layout(&p->lay, BATCH, ELEMS * 4), 0);
    zp_ring_name(name, sizeof name, p->run, 0);
    assert_int_equal(zp_ring_create(&p->ring, name, DEPTH, p->lay.bytes), 0);
    assert_int_equal(zp_sock_endpoint(ep, sizeof ep, p->run, "ring-0"), 0);
    assert_int_equal(zp_sock_create(&p->sock, p->ctx, ZMQ_PAIR, ep, 1, 0), 0);
    return bind_logger(p);
}

static void a_seek_releases_what_came_before_and_starts_at_its_position(void **state)
{
    (void)state;
    static prefetch_t p;
    void *logger = open_run(&p);
    char err[1024];
    zp_client_t *c = zp_client_attach(p.run, 0, 5000, err, sizeof err);
    if (!c)
        fail_msg("attach: %s", err);
    /* out of range: refused here, with the range, and nothing sent */
    assert_int_equal(zp_client_seek(c, ZP_CLIENT_TRAIN, 0, 8, ZP_CLIENT_PLAN_TRAIN, err, sizeof err),
                     ZP_EINVAL);
    assert_non_null(strstr(err, "batches 0..7"));
    assert_int_equal(zp_client_seek(c, ZP_CLIENT_TRAIN, 1, 0, ZP_CLIENT_PLAN_TRAIN, err, sizeof err),
                     ZP_EINVAL);
    assert_non_null(strstr(err, "past the run's last"));
    assert_int_equal(zp_client_seek(c, ZP_CLIENT_TEST, 0, 0, ZP_CLIENT_PLAN_TRAIN, err, sizeof err),
                     ZP_EINVAL);
    assert_non_null(strstr(err, "no test batches"));
    assert_int_equal(zp_client_seek(c, ZP_CLIENT_TRAIN, 0, 0, 8, err, sizeof err), ZP_EINVAL);
    assert_non_null(strstr(err, "plan 8"));
    zp_client_run_t info;
    assert_int_equal(zp_client_run_info(c, &info), 0);
    assert_true(info.world == 1 && info.batch_size == BATCH && info.epochs == 1);
    assert_true(info.samples[0] == SAMPLES && info.samples[1] == 0 && info.batches[0] == 8);

    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, play_seek, &p), 0);
    zp_client_batch_t b;
    assert_int_equal(zp_client_next(c, &b, 10000), ZP_CLIENT_BATCH);
    check_batch(&b, 0);
    assert_int_equal(zp_client_release(c, &b), 0);
    /* refused by the prefetch: batch 1, sent before, is released unread */
    assert_int_equal(zp_client_seek(c, ZP_CLIENT_TRAIN, 0, 5, ZP_CLIENT_PLAN_TRAIN, err, sizeof err), 0);
    assert_int_equal(zp_client_next(c, &b, 10000), ZP_EINVAL);
    assert_int_equal(zp_client_seek(c, ZP_CLIENT_TRAIN, 0, 5, ZP_CLIENT_PLAN_TRAIN, err, sizeof err), 0);
    int kind;
    uint64_t k = 5;
    while ((kind = zp_client_next(c, &b, 10000)) == ZP_CLIENT_BATCH) {
        check_batch(&b, k++);
        assert_int_equal(zp_client_release(c, &b), 0);
    }
    assert_int_equal(kind, ZP_CLIENT_EPOCH_END); /* the epoch over both parts */
    assert_int_equal(b.samples, SAMPLES);
    assert_int_equal(b.expected, SAMPLES);
    assert_int_equal(zp_client_next(c, &b, 10000), ZP_CLIENT_END);
    pthread_join(th, NULL);
    assert_int_equal(p.seeks, 2);
    assert_true(p.seek.split == ZP_SPLIT_TRAIN && p.seek.epoch == 0 && p.seek.index == 5 &&
                p.seek.plan == ZP_CLIENT_PLAN_TRAIN);
    assert_int_equal(p.frees, 2 + 3); /* batch 1 released unread */
    assert_int_equal(p.bad_frees, 0);
    zp_client_destroy(&c);
    seen_t s = {0};
    usleep(200000);
    read_records(logger, &s);
    assert_int_equal(s.epoch_ends, 1); /* the phase left at batch 1 has none */
    assert_int_equal(s.epoch_end.samples, SAMPLES); /* batches 0..4 counted, 5..7 read */
    assert_int_equal(s.epoch_end.distinct, SAMPLES);
    zp_sock_destroy(&logger);
    remove_run(&p);
}

static void a_missing_run_a_wrong_rank_and_no_ring_are_refused(void **state)
{
    (void)state;
    char err[1024];
    assert_null(zp_client_attach("/tmp/zp-client-no-such-run", 0, 0, err, sizeof err));
    assert_non_null(strstr(err, "no such run directory"));

    prefetch_t p = {0};
    make_run(&p);
    assert_null(zp_client_attach(p.run, 1, 0, err, sizeof err));
    assert_non_null(strstr(err, "rank 1 is out of range"));
    assert_non_null(strstr(err, "1 trainer rank"));
    assert_null(zp_client_attach(p.run, -1, 0, err, sizeof err));
    assert_non_null(strstr(err, "out of range"));
    /* rank 0 of a run whose prefetch has not made the ring: waits 50 ms, then says so */
    assert_null(zp_client_attach(p.run, 0, 50, err, sizeof err));
    assert_non_null(strstr(err, "is not there after 50 ms"));
    char cfg[PATH_MAX];
    snprintf(cfg, sizeof cfg, "%s/config.yaml", p.run);
    unlink(cfg);
    assert_null(zp_client_attach(p.run, 0, 0, err, sizeof err));
    assert_non_null(strstr(err, "not a zeus-pipe run directory"));
    remove_run(&p);
}

static void the_api_version_is_the_headers(void **state)
{
    (void)state;
    assert_int_equal(zp_client_api_version(), ZP_CLIENT_API_VERSION);
    assert_non_null(strstr(zp_client_strerror(ZP_EINVAL), "EINVAL"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_api_version_is_the_headers),
        cmocka_unit_test(an_epoch_reaches_the_client_and_its_proof_the_logger),
        cmocka_unit_test(a_missing_run_a_wrong_rank_and_no_ring_are_refused),
        cmocka_unit_test(a_seek_releases_what_came_before_and_starts_at_its_position),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

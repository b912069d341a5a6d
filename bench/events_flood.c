/* events_flood.c — how many events rank 0's logger takes, against what one
 * rank sends (bench/logger_bench.py runs it).
 *
 *   zp-bench-events rate FILE
 *     One rank's events in a run's events.msgpack: every record but the
 *     logger's own, rank 0's alone (the trainer's step and epoch_end, the
 *     supervisor's) and each stage's last stats record (sent as it exits,
 *     once a run): each as [stage, kind, instance, bytes], with the seconds
 *     the file's records span.
 *   zp-bench-events flood ENDPOINT FILE RANKS LOGFILE
 *     Sends RANKS ranks' worth of those records to a logger's events socket:
 *     each of FILE's records once per rank, its instance moved to that rank's
 *     own (instance + (rank + 1) * 1000: apart from each other's and from the
 *     run's own stages), interleaved as ranks send. Blocking sends, so none is dropped; the time
 *     runs until LOGFILE (the logger's events.msgpack) has grown by every byte
 *     sent, i.e. until the logger has handled them all.
 *   zp-bench-events curve FILE RANKS
 *     The same messages over tcp with CURVE, as ranks reach rank 0, into a
 *     PULL socket that only receives: libzmq's ceiling on this machine.
 *
 * Each mode prints one JSON object. */
#define _GNU_SOURCE
#include <msgpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    fprintf(stderr, "zp-bench-events: %s\n", what);
    exit(1);
}

static int key_is(const msgpack_object *k, const char *s)
{
    return k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(s) &&
           !memcmp(k->via.str.ptr, s, k->via.str.size);
}

static const msgpack_object *get(const msgpack_object *map, const char *key)
{
    if (!map || map->type != MSGPACK_OBJECT_MAP)
        return NULL;
    for (uint32_t i = 0; i < map->via.map.size; i++)
        if (key_is(&map->via.map.ptr[i].key, key))
            return &map->via.map.ptr[i].val;
    return NULL;
}

static int str_is(const msgpack_object *o, const char *s)
{
    return o && key_is(o, s);
}

typedef struct {
    msgpack_object *msg; /* whole messages, {v, t, body} */
    int n, cap;
    msgpack_zone zone;
    char *data; /* the file: the objects point into it */
} records_t;

static void records_free(records_t *r)
{
    msgpack_zone_destroy(&r->zone);
    free(r->msg);
    free(r->data);
}

/* Reads FILE's messages, keeping those one rank sends (see the top). */
static void read_records(const char *path, records_t *r, int *all, int *steps, double *span)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die("cannot open the events file");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    char *data = r->data = malloc((size_t)size + 1);
    if (!data || fread(data, 1, (size_t)size, f) != (size_t)size)
        die("cannot read the events file");
    fclose(f);
    msgpack_zone_init(&r->zone, 1 << 20);
    size_t off = 0;
    double first = 0, last = 0;
    *all = *steps = 0;
    for (;;) {
        msgpack_object o;
        msgpack_unpack_return rc = msgpack_unpack(data, (size_t)size, &off, &r->zone, &o);
        if (rc != MSGPACK_UNPACK_SUCCESS && rc != MSGPACK_UNPACK_EXTRA_BYTES)
            break;
        ++*all;
        const msgpack_object *b = get(&o, "body"), *t = get(b, "time");
        if (t && t->type == MSGPACK_OBJECT_FLOAT64) {
            first = first ? first : t->via.f64;
            last = t->via.f64;
        }
        const msgpack_object *stage = get(b, "stage"), *ev = get(b, "event");
        if (str_is(ev, "step"))
            ++*steps; /* one per trainer.log_every_steps steps */
        const msgpack_object *final = get(b, "final");
        if (str_is(stage, "logger") || str_is(stage, "supervisor") || str_is(ev, "step") ||
            str_is(ev, "epoch_end") || (final && final->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
                                        final->via.u64 == 1))
            continue; /* a stage's last stats record: once a run, and `stat` would drop it */
        if (r->n == r->cap) {
            r->cap = r->cap ? 2 * r->cap : 1024;
            r->msg = realloc(r->msg, (size_t)r->cap * sizeof *r->msg);
            if (!r->msg)
                die("out of memory");
        }
        r->msg[r->n++] = o;
    }
    *span = last - first;
}

/* `o` packed, with body.instance moved by `shift`. */
static void pack_moved(msgpack_packer *pk, const msgpack_object *o, int64_t shift, int depth)
{
    if (o->type != MSGPACK_OBJECT_MAP || depth > 1) {
        msgpack_pack_object(pk, *o);
        return;
    }
    msgpack_pack_map(pk, o->via.map.size);
    for (uint32_t i = 0; i < o->via.map.size; i++) {
        const msgpack_object_kv *kv = &o->via.map.ptr[i];
        msgpack_pack_object(pk, kv->key);
        if (depth == 1 && key_is(&kv->key, "instance") && kv->val.type == MSGPACK_OBJECT_POSITIVE_INTEGER)
            msgpack_pack_int64(pk, (int64_t)kv->val.via.u64 + shift);
        else if (depth == 0 && key_is(&kv->key, "body"))
            pack_moved(pk, &kv->val, shift, 1);
        else
            msgpack_pack_object(pk, kv->val);
    }
}

typedef struct {
    char **data;
    size_t *len;
    long n;
    long long bytes;
} batch_t;

/* Every record once per rank, interleaved: record i of rank 0, 1, ..., then i+1. */
static void build(const records_t *r, int ranks, batch_t *b)
{
    b->n = (long)r->n * ranks;
    b->data = malloc((size_t)b->n * sizeof *b->data);
    b->len = malloc((size_t)b->n * sizeof *b->len);
    if (!b->data || !b->len)
        die("out of memory");
    b->bytes = 0;
    long k = 0;
    for (int i = 0; i < r->n; i++)
        for (int rank = 0; rank < ranks; rank++, k++) {
            msgpack_sbuffer sb;
            msgpack_sbuffer_init(&sb);
            msgpack_packer pk;
            msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
            pack_moved(&pk, &r->msg[i], (int64_t)(rank + 1) * 1000, 0);
            b->data[k] = sb.data;
            b->len[k] = sb.size;
            b->bytes += (long long)sb.size;
        }
}

static void build_from(const char *file, int ranks, batch_t *b)
{
    records_t r = {0};
    int all, steps;
    double span;
    read_records(file, &r, &all, &steps, &span);
    build(&r, ranks, b);
    records_free(&r);
}

static void batch_free(batch_t *b)
{
    for (long k = 0; k < b->n; k++)
        free(b->data[k]);
    free(b->data);
    free(b->len);
}

static void send_all(void *push, const batch_t *b)
{
    for (long k = 0; k < b->n; k++)
        if (zmq_send(push, b->data[k], b->len[k], 0) < 0)
            die("zmq_send failed");
}

static long long file_size(const char *path)
{
    struct stat s;
    return stat(path, &s) ? -1 : (long long)s.st_size;
}

static void print_str(const msgpack_object *o)
{
    if (o && o->type == MSGPACK_OBJECT_STR)
        printf("\"%.*s\"", (int)o->via.str.size, o->via.str.ptr);
    else
        printf("null");
}

static int rate(const char *file)
{
    records_t r = {0};
    int all, steps;
    double span;
    read_records(file, &r, &all, &steps, &span);
    printf("{\"records\": %d, \"span_s\": %.3f, \"step_records\": %d, \"rank\": [", all, span, steps);
    for (int i = 0; i < r.n; i++) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_object(&pk, r.msg[i]);
        const msgpack_object *b = get(&r.msg[i], "body"), *inst = get(b, "instance");
        printf("%s[", i ? ", " : "");
        print_str(get(b, "stage"));
        printf(", ");
        print_str(get(b, "kind"));
        printf(", %lld, %zu]", inst ? (long long)inst->via.i64 : -1, sb.size);
        msgpack_sbuffer_destroy(&sb);
    }
    printf("]}\n");
    records_free(&r);
    return 0;
}

static int flood(const char *endpoint, const char *file, int ranks, const char *logfile)
{
    batch_t b;
    build_from(file, ranks, &b);
    void *ctx = zmq_ctx_new(), *push = zmq_socket(ctx, ZMQ_PUSH);
    int hwm = 1000, linger = 10000;
    zmq_setsockopt(push, ZMQ_SNDHWM, &hwm, sizeof hwm); /* as a stage's */
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_connect(push, endpoint))
        die("cannot connect to the logger");
    usleep(200000); /* connected before the clock starts */
    long long start_size = file_size(logfile);
    if (start_size < 0)
        die("cannot stat the logger's events file");
    double t0 = now();
    send_all(push, &b);
    double sent = now() - t0, deadline = now() + 300;
    while (file_size(logfile) < start_size + b.bytes && now() < deadline)
        usleep(1000);
    double took = now() - t0;
    int done = file_size(logfile) >= start_size + b.bytes;
    printf("{\"ranks\": %d, \"events\": %ld, \"bytes\": %lld, \"sent_s\": %.4f, \"seconds\": %.4f, "
           "\"events_per_s\": %.1f, \"done\": %s}\n",
           ranks, b.n, b.bytes, sent, took, b.n / took, done ? "true" : "false");
    zmq_close(push);
    zmq_ctx_term(ctx);
    batch_free(&b);
    return done ? 0 : 1;
}

static int curve(const char *file, int ranks)
{
    batch_t b;
    build_from(file, ranks, &b);
    char spub[41], ssec[41], cpub[41], csec[41];
    if (zmq_curve_keypair(spub, ssec) || zmq_curve_keypair(cpub, csec))
        die("this libzmq has no CURVE");
    void *sctx = zmq_ctx_new(), *cctx = zmq_ctx_new();
    void *pull = zmq_socket(sctx, ZMQ_PULL), *push = zmq_socket(cctx, ZMQ_PUSH);
    int one = 1, hwm = 100000, linger = 0;
    zmq_setsockopt(pull, ZMQ_CURVE_SERVER, &one, sizeof one);
    zmq_setsockopt(pull, ZMQ_CURVE_SECRETKEY, ssec, 40);
    zmq_setsockopt(pull, ZMQ_RCVHWM, &hwm, sizeof hwm); /* as the logger's */
    if (zmq_bind(pull, "tcp://127.0.0.1:*"))
        die("cannot bind");
    char ep[256];
    size_t len = sizeof ep;
    zmq_getsockopt(pull, ZMQ_LAST_ENDPOINT, ep, &len);
    zmq_setsockopt(push, ZMQ_CURVE_SERVERKEY, spub, 40);
    zmq_setsockopt(push, ZMQ_CURVE_PUBLICKEY, cpub, 40);
    zmq_setsockopt(push, ZMQ_CURVE_SECRETKEY, csec, 40);
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_connect(push, ep))
        die("cannot connect");
    char buf[1 << 16];
    zmq_send(push, "x", 1, 0); /* the handshake, before the clock starts */
    zmq_recv(pull, buf, sizeof buf, 0);
    double t0 = now();
    long got = 0;
    for (long k = 0; k < b.n || got < b.n;) {
        while (k < b.n && zmq_send(push, b.data[k], b.len[k], ZMQ_DONTWAIT) >= 0)
            k++;
        while (got < b.n && zmq_recv(pull, buf, sizeof buf, ZMQ_DONTWAIT) >= 0)
            got++;
    }
    double took = now() - t0;
    printf("{\"ranks\": %d, \"events\": %ld, \"bytes\": %lld, \"seconds\": %.4f, "
           "\"events_per_s\": %.1f}\n", ranks, b.n, b.bytes, took, b.n / took);
    zmq_close(push);
    zmq_close(pull);
    zmq_ctx_term(cctx);
    zmq_ctx_term(sctx);
    batch_free(&b);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "rate"))
        return rate(argv[2]);
    if (argc == 6 && !strcmp(argv[1], "flood") && atoi(argv[4]) > 0)
        return flood(argv[2], argv[3], atoi(argv[4]), argv[5]);
    if (argc == 4 && !strcmp(argv[1], "curve") && atoi(argv[3]) > 0)
        return curve(argv[2], atoi(argv[3]));
    fprintf(stderr, "usage: zp-bench-events rate FILE\n"
                    "       zp-bench-events flood ENDPOINT FILE RANKS LOGFILE\n"
                    "       zp-bench-events curve FILE RANKS\n");
    return 2;
}

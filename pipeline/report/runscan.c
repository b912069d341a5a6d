/* runscan.c — a run's records from events.msgpack, or from metrics.jsonl and
 * stats.jsonl when that is missing or holds none (runscan.h). */
#define _GNU_SOURCE
#include "pipeline/report/runscan.h"
#include "pipeline/report/eventlog.h"
#include "schemas/errors.h"
#include "schemas/msg.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *p, *end;
    char *buf; /* decoded string; owned */
    size_t cap;
} lex_t;

static void skip_ws(lex_t *x)
{
    while (x->p < x->end && isspace((unsigned char)*x->p))
        x->p++;
}

static int put(lex_t *x, size_t *n, char c)
{
    if (*n + 1 >= x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 256;
        char *b = realloc(x->buf, cap);
        if (!b)
            return -1;
        x->buf = b, x->cap = cap;
    }
    x->buf[(*n)++] = c;
    return 0;
}

/* \uXXXX (x->p after the 'u') as UTF-8; a lone surrogate as U+FFFD. */
static int put_u(lex_t *x, size_t *n)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++, x->p++) {
        if (x->p >= x->end || !isxdigit((unsigned char)*x->p))
            return -1;
        v = v * 16 + (unsigned)(isdigit((unsigned char)*x->p) ? *x->p - '0' : (tolower(*x->p) - 'a' + 10));
    }
    if (v >= 0xd800 && v < 0xe000)
        v = 0xfffd; /* pairs are not worth joining for names and messages */
    if (v < 0x80)
        return put(x, n, (char)v);
    if (v < 0x800)
        return put(x, n, (char)(0xc0 | v >> 6)) || put(x, n, (char)(0x80 | (v & 0x3f)));
    return put(x, n, (char)(0xe0 | v >> 12)) || put(x, n, (char)(0x80 | (v >> 6 & 0x3f))) ||
           put(x, n, (char)(0x80 | (v & 0x3f)));
}

/* A string (x->p on its quote) into x->buf; its length, or -1. */
static long string(lex_t *x)
{
    size_t n = 0;
    x->p++;
    while (x->p < x->end && *x->p != '"') {
        char c = *x->p++;
        if (c == '\\') {
            if (x->p >= x->end)
                return -1;
            c = *x->p++;
            if (c == 'u') {
                if (put_u(x, &n))
                    return -1;
                continue;
            }
            const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t", *at = strchr(from, c);
            if (!at || !c)
                return -1;
            c = to[at - from];
        }
        if (put(x, &n, c))
            return -1;
    }
    if (x->p >= x->end)
        return -1;
    x->p++;
    return (long)n;
}

/* A nested array or object: skipped whole. */
static int skip_nested(lex_t *x)
{
    int depth = 0;
    while (x->p < x->end) {
        char c = *x->p;
        if (c == '"') {
            if (string(x) < 0)
                return -1;
            continue;
        }
        x->p++;
        depth += (c == '[' || c == '{') - (c == ']' || c == '}');
        if (!depth)
            return 0;
    }
    return -1;
}

static int value(lex_t *x, msgpack_packer *pk)
{
    skip_ws(x);
    if (x->p >= x->end)
        return -1;
    char c = *x->p;
    if (c == '"') {
        long n = string(x);
        return n < 0 ? -1 : (msgpack_pack_str(pk, (size_t)n), msgpack_pack_str_body(pk, x->buf, (size_t)n), 0);
    }
    if (c == '[' || c == '{')
        return skip_nested(x) ? -1 : (msgpack_pack_nil(pk), 0);
    static const char *const words[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t len = strlen(words[i]);
        if ((size_t)(x->end - x->p) >= len && !memcmp(x->p, words[i], len)) {
            x->p += len;
            i == 0 ? msgpack_pack_true(pk) : i == 1 ? msgpack_pack_false(pk) : msgpack_pack_nil(pk);
            return 0;
        }
    }
    char num[64];
    size_t n = 0;
    while (x->p + n < x->end && n < sizeof num - 1 && strchr("+-0123456789.eE", x->p[n]) && x->p[n])
        n++;
    memcpy(num, x->p, n);
    num[n] = 0;
    char *stop;
    if (!n)
        return -1;
    if (strpbrk(num, ".eE")) {
        double d = strtod(num, &stop);
        msgpack_pack_double(pk, d);
    } else {
        long long v = strtoll(num, &stop, 10);
        msgpack_pack_int64(pk, v);
    }
    x->p += n;
    return *stop ? -1 : 0;
}

/* The members of the object (x->p after its '{') into pk; their count, or -1. */
static long members(lex_t *x, msgpack_packer *pk)
{
    long count = 0;
    skip_ws(x);
    if (x->p < x->end && *x->p == '}')
        return x->p++, 0;
    for (;;) {
        skip_ws(x);
        long n = x->p < x->end && *x->p == '"' ? string(x) : -1;
        if (n < 0)
            return -1;
        msgpack_pack_str(pk, (size_t)n);
        msgpack_pack_str_body(pk, x->buf, (size_t)n);
        skip_ws(x);
        if (x->p >= x->end || *x->p++ != ':' || value(x, pk))
            return -1;
        count++;
        skip_ws(x);
        if (x->p < x->end && *x->p == ',') {
            x->p++;
            continue;
        }
        return x->p < x->end && *x->p++ == '}' ? count : -1;
    }
}

int zp_runscan_json_line(const char *line, size_t len, msgpack_sbuffer *sb)
{
    lex_t x = {.p = line, .end = line + len};
    msgpack_sbuffer body;
    msgpack_sbuffer_init(&body);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &body, msgpack_sbuffer_write);
    skip_ws(&x);
    long n = x.p < x.end && *x.p == '{' ? (x.p++, members(&x, &pk)) : -1;
    skip_ws(&x);
    if (n >= 0 && x.p == x.end) {
        msgpack_packer out;
        msgpack_packer_init(&out, sb, msgpack_sbuffer_write);
        msgpack_pack_map(&out, (size_t)n);
        msgpack_sbuffer_write(sb, body.data, body.size);
    }
    msgpack_sbuffer_destroy(&body);
    free(x.buf);
    return n >= 0 && x.p == x.end ? 0 : -1;
}

/* Every line of <run_dir>/<name> to fn; 0 (1 in *found when the file was
 * there), fn's value or ZP_ENOMEM. */
static int scan_jsonl(const char *run_dir, const char *name, zp_runscan_fn *fn, void *ctx,
                      zp_runscan_t *scan, int *found)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", run_dir, name);
    FILE *f = fopen(path, "r");
    *found = f != NULL;
    if (!f)
        return 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_unpacked one;
    msgpack_unpacked_init(&one);
    int rc = 0;
    while (!rc && (len = getline(&line, &cap, f)) > 0) {
        sb.size = 0;
        size_t off = 0;
        if (len == 1 && line[0] == '\n')
            continue;
        if (zp_runscan_json_line(line, (size_t)len, &sb) ||
            msgpack_unpack_next(&one, sb.data, sb.size, &off) != MSGPACK_UNPACK_SUCCESS) {
            scan->skipped_records++; /* a line torn by a kill, or not ours */
            scan->skipped_bytes += len;
            continue;
        }
        scan->records++;
        rc = fn(ctx, &one.data);
    }
    msgpack_unpacked_destroy(&one);
    msgpack_sbuffer_destroy(&sb);
    free(line);
    fclose(f);
    return rc;
}

typedef struct {
    zp_runscan_fn *fn;
    void *ctx;
} relay_t;

/* An EVENT record: its body to the caller (a record without one is handed as is). */
static int relay(void *ctx, const msgpack_object *record)
{
    relay_t *r = ctx;
    const msgpack_object *b = zp_msg_map_get(record, "body");
    return r->fn(r->ctx, b ? b : record);
}

/* The jsonl files instead of events.msgpack, whose state `why` gives. */
static int fallback(const char *run_dir, zp_runscan_fn *fn, void *ctx, zp_runscan_t *scan,
                    const char *why)
{
    int rc = scan_jsonl(run_dir, "metrics.jsonl", fn, ctx, scan, &scan->from_metrics);
    if (!rc)
        rc = scan_jsonl(run_dir, "stats.jsonl", fn, ctx, scan, &scan->from_stats);
    scan->source = scan->from_metrics && scan->from_stats ? "metrics.jsonl and stats.jsonl"
                   : scan->from_metrics                ? "metrics.jsonl"
                                                       : "stats.jsonl";
    if (scan->from_metrics || scan->from_stats)
        snprintf(scan->missing, sizeof scan->missing,
                 "events.msgpack is %s: this report is made of %s%s%s, without the time per "
                 "region (timer samples are in events.msgpack only)%s.", why,
                 scan->from_metrics ? "metrics.jsonl" : "",
                 scan->from_metrics && scan->from_stats ? " and " : "",
                 scan->from_stats ? "stats.jsonl" : "",
                 !scan->from_metrics ? " and without epochs (metrics.jsonl is missing too)"
                 : !scan->from_stats ? " and without stage counters (stats.jsonl is missing too)"
                                     : "");
    return rc;
}

int zp_runscan(const char *run_dir, zp_runscan_fn *fn, void *ctx, zp_runscan_t *scan, char *err,
               size_t errlen)
{
    memset(scan, 0, sizeof *scan);
    scan->source = "events.msgpack";
    const char *data;
    size_t size;
    int rc = zp_eventlog_map(run_dir, &data, &size, err, errlen);
    if (!rc) {
        relay_t r = {fn, ctx};
        zp_eventlog_count_t count = {0};
        rc = zp_eventlog_scan(data, size, relay, &r, &count);
        zp_eventlog_unmap(&data, size);
        scan->records = count.records;
        scan->skipped_bytes = count.skipped_bytes;
        scan->skipped_records = count.skipped_records;
        if (rc || count.records) {
            scan->from_events = 1;
            return rc;
        }
        if (size)
            snprintf(err, errlen, "%s/events.msgpack: not a stream of msgpack records: no "
                     "zeus-pipe event in its %zu bytes", run_dir, size);
        rc = size ? ZP_EPROTO : 0;
    }
    zp_runscan_t events = *scan;
    memset(scan, 0, sizeof *scan);
    int frc = fallback(run_dir, fn, ctx, scan,
                       rc == -ENOENT ? "missing" : rc ? "unreadable" : "empty");
    if (frc || scan->from_metrics || scan->from_stats)
        return frc;
    *scan = events; /* nothing else to read: events.msgpack's own state */
    scan->from_events = !rc;
    return rc;
}

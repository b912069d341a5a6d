/* cmd_stat.c — `zeus-pipe stat [RUN] [--watch SECONDS] [--json]`: the live
 * counters of every stage instance, from the logger's latest records, and
 * the bottleneck the report's rule (report_bottleneck.h) names from them at
 * each refresh; with --watch, a sparkline of each instance's items/s over
 * the last minute (the refreshes this command has seen, as `top` keeps its
 * own history). */
#define _GNU_SOURCE
#include "pipeline/cli/cmd.h"
#include "pipeline/report/report_bottleneck.h"
#include "pipeline/base/json.h"
#include "pipeline/base/log.h"
#include "pipeline/base/names.h"
#include "pipeline/supervisor/supervisor.h"
#include "pipeline/net/sock.h"
#include "schemas/records.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Rows of one reply: every stage instance of 1,024 Slurm ranks with up to 15
 * stages each (its loaders, prefetch, trainer; a node's cache). */
#define ROWS_MAX (1024 * 16)

typedef struct { /* one stage instance's latest stats record */
    zp_rec_head_t h;
    zp_rec_stats_t s;
} row_t;

/* Rows in data-path order (names.h); an unknown stage last. */
static int rank_of(const char *stage)
{
    int s = zp_names_stage_of(stage);
    return s < 0 ? ZP_STAGE_COUNT : s;
}

static int cmp_rows(const void *a, const void *b)
{
    const row_t *x = a, *y = b;
    int d = rank_of(x->h.stage) - rank_of(y->h.stage);
    return d ? d : (x->h.instance > y->h.instance) - (x->h.instance < y->h.instance);
}

#define HIST_MAX 120 /* points of a sparkline: the last minute at --watch 0.5 */

typedef struct { /* one stage instance's items/s at each refresh, oldest first */
    char stage[ZP_REC_NAME_MAX];
    int64_t instance;
    double v[HIST_MAX];
    int n;
} hist_t;

/* Appends the rows' items/s to their histories, keeping `keep` points. */
static void remember(hist_t *h, int *nh, const row_t *rows, int n, int keep)
{
    for (int i = 0; i < n; i++) {
        hist_t *e = NULL;
        for (int k = 0; k < *nh && !e; k++)
            if (h[k].instance == rows[i].h.instance && !strcmp(h[k].stage, rows[i].h.stage))
                e = &h[k];
        if (!e) {
            if (*nh == ROWS_MAX)
                continue;
            e = &h[(*nh)++];
            snprintf(e->stage, sizeof e->stage, "%s", rows[i].h.stage);
            e->instance = rows[i].h.instance, e->n = 0;
        }
        if (e->n == keep)
            memmove(e->v, e->v + 1, (size_t)(keep - 1) * sizeof *e->v), e->n--;
        e->v[e->n++] = rows[i].s.items_per_s;
    }
}

/* The row's history as eighth blocks scaled to its own peak ("" before two
 * points): the shape of its throughput, whatever its size. */
static void sparkline(char *buf, size_t len, const hist_t *h, int nh, const row_t *r)
{
    static const char *const bar[8] = {"\u2581", "\u2582", "\u2583", "\u2584",
                                       "\u2585", "\u2586", "\u2587", "\u2588"};
    buf[0] = 0;
    const hist_t *e = NULL;
    for (int k = 0; k < nh && !e; k++)
        if (h[k].instance == r->h.instance && !strcmp(h[k].stage, r->h.stage))
            e = &h[k];
    if (!e || e->n < 2)
        return;
    double peak = 0;
    for (int i = 0; i < e->n; i++)
        peak = fmax(peak, e->v[i]);
    size_t used = 0;
    for (int i = 0; i < e->n && used + 4 < len; i++) {
        int level = peak > 0 ? (int)(e->v[i] / peak * 7 + 0.5) : 0;
        used += (size_t)snprintf(buf + used, len - used, "%s", bar[level < 0 ? 0 : level > 7 ? 7 : level]);
    }
}

static void human(char *buf, size_t len, double v, const char *unit)
{
    const char *p[] = {"", "k", "M", "G", "T"};
    int i = 0;
    while (fabs(v) >= 1000 && i < 4)
        v /= 1000, i++;
    snprintf(buf, len, i ? "%.1f%s%s" : "%.0f%s%s", v, p[i], unit);
}

static int fetch_rows(const char *dir, row_t *rows, int max)
{
    zp_msg_t req = {.type = ZP_MSG_STAT_REQ};
    zp_frames_t f;
    zp_frames_init(&f);
    zp_msg_t m;
    char why[256];
    int rc = zp_sock_request(dir, zp_names_sock(ZP_SOCK_STAT), &req, &f, &m, why, sizeof why, 2000);
    if (rc == ZP_EPROTO) {
        fprintf(stderr, "zeus-pipe: %s: malformed stat reply: %s\n", dir, why);
        zp_frames_free(&f);
        return -1;
    }
    if (rc) {
        const char *base = strrchr(dir, '/');
        if (base && !strncmp(base + 1, "rank-", 5)) /* RUN/rank-<r> of a Slurm run: no logger there */
            fprintf(stderr, "zeus-pipe: %s is one Slurm rank's folder; rank 0's logger has every "
                            "rank's stages: zeus-pipe stat %.*s\n", dir, (int)(base - dir), dir);
        else
            fprintf(stderr, "zeus-pipe: %s: the logger did not answer (%s); is the run running?\n",
                    dir, zp_strerror(rc));
        return -1;
    }
    int n = 0;
    for (uint32_t i = 0; i < m.body.via.array.size && n < max; i++) {
        const msgpack_object *o = &m.body.via.array.ptr[i];
        row_t *r = &rows[n++];
        zp_records_head(o, &r->h);
        zp_records_decode(ZP_REC_STATS, o, &r->s);
    }
    zp_msg_release(&m);
    zp_frames_free(&f);
    if (n > 0)
        qsort(rows, (size_t)n, sizeof *rows, cmp_rows);
    return n;
}

/* The bottleneck now: the report's rule on the rows' last windows. Each data
 * stage's busy share and the trainer's wait for data are the means over
 * their instances; the loaders are the loader rows; the seconds measured are
 * the trainer's uptime (early in a run, too few for advice); the window is
 * cold or warm by the prefetches' cache hit rate in it (with the cache on).
 * Writes the rule's sentence to `advice`; returns the stage it names
 * (names.h), or -1 for none. */
static int judge(const row_t *rows, int n, char *advice, size_t len)
{
    double busy[3] = {0}, wait = 0, hits = 0, up = 0;
    int count[3] = {0}, trainers = 0, prefetches = 0;
    for (int i = 0; i < n; i++) {
        const zp_rec_stats_t *s = &rows[i].s;
        int stage = zp_names_stage_of(rows[i].h.stage);
        if (stage >= 0 && stage < 3) /* the data stages lead names.h */
            busy[stage] += s->busy, count[stage]++;
        if (stage == ZP_STAGE_TRAINER)
            wait += s->wait_in, trainers++, up = fmax(up, s->uptime_s);
        if (stage == ZP_STAGE_PREFETCH && s->hit_rate >= 0) /* -1: no lookup in the window */
            hits += fmin(s->hit_rate, 1), prefetches++;
    }
    zp_data_stages_t d = {.loaders = count[0], .seconds = up};
    for (int i = 0; i < 3; i++)
        d.busy[i] = count[i] ? busy[i] / count[i] : 0;
    if (prefetches)
        d.phase = hits / prefetches < ZP_PHASE_WARM_HIT_RATE ? ZP_PHASE_COLD : ZP_PHASE_WARM;
    char name[16];
    int k = zp_report_bottleneck(&d, trainers ? wait / trainers : -1, name, sizeof name, advice, len);
    return k == 3 ? ZP_STAGE_TRAINER : k;
}

/* How a column of the table shows its value. */
enum { AS_RATE, AS_BYTES, AS_SHARE, AS_COUNT, AS_SHARE_OR_DASH, AS_ERRORS };

/* One column of `stat`: its heading and width in the table (NULL: JSON
 * only), the stats record's field (records.h) whose wire name JSON uses,
 * where that field is in zp_rec_stats_t and whether it is an integer, its
 * decimals in JSON, and how the table shows it. */
typedef struct {
    const char *head;
    int width;
    const char *key;
    size_t at;
    int integer, prec, as;
} column_t;

/* The record's field names its wire key (records.h makes them alike); offsetof
 * refuses a name the record does not have. */
#define COLUMN(head, width, field, prec, as)                                                       \
    {head, width, #field, offsetof(zp_rec_stats_t, field),                                         \
     _Generic(((zp_rec_stats_t *)0)->field, int64_t: 1, default: 0), prec, as}

/* Every column, in the order of the table and of each JSON row. The
 * table's ERRORS (AS_ERRORS) adds lmdb_errors to errors; JSON gives both. */
static const column_t COLUMNS[] = {
    COLUMN("ITEMS/S", 10, items_per_s, 3, AS_RATE),
    COLUMN("BYTES/S", 11, bytes_per_s, 1, AS_BYTES),
    COLUMN("CPU", 5, cpu, 4, AS_SHARE),
    COLUMN("BUSY", 6, busy, 4, AS_SHARE),
    COLUMN("WAIT-IN", 8, wait_in, 4, AS_SHARE),
    COLUMN("WAIT-OUT", 9, wait_out, 4, AS_SHARE),
    COLUMN("QUEUE", 6, queue, 0, AS_COUNT),
    COLUMN("HIT", 5, hit_rate, 4, AS_SHARE_OR_DASH),
    COLUMN("ERRORS", 7, errors, 0, AS_ERRORS),
    COLUMN(NULL, 0, lmdb_errors, 0, AS_COUNT),
    COLUMN("READERS", 7, readers_busy, 4, AS_SHARE_OR_DASH),
    COLUMN(NULL, 0, uptime_s, 3, AS_COUNT),
};

static double value(const zp_rec_stats_t *s, const column_t *c)
{
    const char *p = (const char *)s + c->at;
    return c->integer ? (double)*(const int64_t *)p : *(const double *)p;
}

/* Column c of row s as the table shows it. */
static void cell(char *buf, size_t len, const zp_rec_stats_t *s, const column_t *c)
{
    double v = value(s, c);
    if (c->as == AS_ERRORS) /* malformed messages and failed items, and LMDB's */
        v += (double)s->lmdb_errors;
    if (c->as == AS_RATE || c->as == AS_BYTES)
        human(buf, len, v, c->as == AS_RATE ? "/s" : "B/s");
    else if (c->as == AS_COUNT || c->as == AS_ERRORS)
        snprintf(buf, len, "%.0f", v);
    else if (v < 0) /* AS_SHARE_OR_DASH: none measured */
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.0f%%", 100 * v);
}

static void print_json(const char *dir, const row_t *rows, int n)
{
    char advice[600];
    int hot = judge(rows, n, advice, sizeof advice);
    printf("{\"run\":");
    zp_json_str(stdout, dir);
    printf(",\"stages\":[");
    for (int i = 0; i < n; i++) {
        printf("%s{\"%s\":", i ? "," : "", ZP_KEY(HEAD, stage));
        zp_json_str(stdout, rows[i].h.stage); /* from the stage's events: bytes off a socket */
        printf(",\"%s\":%d", ZP_KEY(HEAD, instance), (int)rows[i].h.instance);
        for (size_t k = 0; k < sizeof COLUMNS / sizeof COLUMNS[0]; k++)
            printf(",\"%s\":%.*f", COLUMNS[k].key, COLUMNS[k].prec, value(&rows[i].s, &COLUMNS[k]));
        printf("}");
    }
    printf("],\"bottleneck\":{\"stage\":\"%s\",\"advice\":",
           hot < 0 ? "unknown" : zp_names_stage(hot));
    zp_json_str(stdout, advice);
    printf("}}\n");
}

static void print_table(const row_t *rows, int n, const hist_t *h, int nh)
{
    char advice[600];
    int hot = judge(rows, n, advice, sizeof advice);
    printf("%-9s %4s", "STAGE", "INST");
    for (size_t k = 0; k < sizeof COLUMNS / sizeof COLUMNS[0]; k++)
        if (COLUMNS[k].head)
            printf(" %*s", COLUMNS[k].width, COLUMNS[k].head);
    printf("%s\n", nh ? "  ITEMS/S, LAST MINUTE" : "");
    for (int i = 0; i < n; i++) {
        printf("%-9s %4d", rows[i].h.stage, (int)rows[i].h.instance);
        for (size_t k = 0; k < sizeof COLUMNS / sizeof COLUMNS[0]; k++) {
            char text[32];
            if (!COLUMNS[k].head)
                continue;
            cell(text, sizeof text, &rows[i].s, &COLUMNS[k]);
            printf(" %*s", COLUMNS[k].width, text);
        }
        char spark[HIST_MAX * 3 + 8];
        sparkline(spark, sizeof spark, h, nh, &rows[i]);
        printf("%s%s%s\n", spark[0] ? "  " : "", spark,
               hot >= 0 && zp_names_stage_of(rows[i].h.stage) == hot ? "  <- bottleneck" : "");
    }
    printf("%s\n", advice);
}

int cmd_stat(int argc, char **argv)
{
    const char *run = NULL;
    int json = 0;
    double watch = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--watch") && i + 1 < argc)
            watch = atof(argv[++i]);
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help") || argv[i][0] == '-' || run) {
            int help = !strcmp(argv[i], "-h") || !strcmp(argv[i], "--help");
            fprintf(help ? stdout : stderr,
                    "usage: zeus-pipe stat [RUN] [--watch SECONDS] [--json]\n\n"
                    "Shows every stage instance of a running pipeline: items/s, bytes/s, busy %%,\n"
                    "waiting for input %%, waiting on output %% (back pressure), queue depth,\n"
                    "the prefetch's readers' busy share (assembly: copying, cropping, decoding hits);\n"
                    "with --watch, each one's items/s over the last minute as a sparkline.\n"
                    "Under the table, the bottleneck: the report's rule (zeus-pipe report) on the\n"
                    "last window of every row, its stage's rows marked \"<- bottleneck\"; --json\n"
                    "gives it as \"bottleneck\": {\"stage\", \"advice\"}.\n"
                    "RUN is a run directory or a name under runs/; without it, the only running run.\n");
            return help ? 0 : 2;
        } else
            run = argv[i];
    }
    char dir[PATH_MAX];
    int rc = zp_rundir_find(run, dir, sizeof dir);
    if (rc)
        return rc;
    static row_t rows[ROWS_MAX];
    static hist_t hist[ROWS_MAX];
    int nh = 0, keep = watch > 0 ? (int)ceil(60 / watch) : 0;
    keep = keep > HIST_MAX ? HIST_MAX : keep;
    for (;;) {
        int n = fetch_rows(dir, rows, ROWS_MAX);
        if (n < 0)
            return 1;
        if (keep >= 2)
            remember(hist, &nh, rows, n, keep);
        if (json)
            print_json(dir, rows, n);
        else
            print_table(rows, n, hist, nh);
        fflush(stdout);
        if (watch <= 0)
            return 0;
        usleep((useconds_t)(watch * 1e6));
        if (!json)
            printf("\n");
    }
}

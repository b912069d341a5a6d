/* cmd_stat.c — `zeus-pipe stat [RUN] [--watch SECONDS] [--json]`: the live
 * counters of every stage instance, from the logger's latest records. */
#define _GNU_SOURCE
#include "pipeline/cli/cmd.h"
#include "pipeline/json.h"
#include "pipeline/log.h"
#include "pipeline/names.h"
#include "pipeline/supervisor/supervisor.h"
#include "pipeline/sock.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


typedef struct {
    char stage[16];
    int instance;
    double items, bytes, cpu, busy, wait_in, wait_out, queue, errors, hit_rate, lmdb_errors;
} row_t;

/* Rows in data-path order (names.h); an unknown stage last. */
static int rank_of(const char *stage)
{
    int s = zp_stage_of(stage);
    return s < 0 ? ZP_STAGE_COUNT : s;
}

static int cmp_rows(const void *a, const void *b)
{
    const row_t *x = a, *y = b;
    int d = rank_of(x->stage) - rank_of(y->stage);
    return d ? d : x->instance - y->instance;
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
    int rc = zp_request(dir, zp_sock_name(ZP_SOCK_STAT), &req, &f, 2000);
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
    zp_msg_t m;
    char why[256];
    int n = 0;
    if (zp_frames_decode(&f, 0, &m, why, sizeof why) || m.type != ZP_MSG_STAT_REP) {
        fprintf(stderr, "zeus-pipe: %s: malformed stat reply: %s\n", dir, why);
        n = -1;
    }
    for (uint32_t i = 0; n >= 0 && i < m.body.via.array.size && n < max; i++) {
        const msgpack_object *o = &m.body.via.array.ptr[i];
        row_t *r = &rows[n++];
        zp_map_str(o, "stage", r->stage, sizeof r->stage);
        r->instance = (int)zp_map_num(o, "instance", 0);
        r->items = zp_map_num(o, "items_per_s", 0);
        r->bytes = zp_map_num(o, "bytes_per_s", 0);
        r->cpu = zp_map_num(o, "cpu", 0);
        r->busy = zp_map_num(o, "busy", 0);
        r->wait_in = zp_map_num(o, "wait_in", 0);
        r->wait_out = zp_map_num(o, "wait_out", 0);
        r->queue = zp_map_num(o, "queue", 0);
        r->errors = zp_map_num(o, "errors", 0);
        r->hit_rate = zp_map_num(o, "hit_rate", -1);
        r->lmdb_errors = zp_map_num(o, "lmdb_errors", 0);
    }
    zp_msg_release(&m);
    zp_frames_close(&f);
    if (n > 0)
        qsort(rows, (size_t)n, sizeof *rows, cmp_rows);
    return n;
}

static void print_json(const char *dir, const row_t *r, int n)
{
    printf("{\"run\":");
    zp_json_str(stdout, dir);
    printf(",\"stages\":[");
    for (int i = 0; i < n; i++) {
        printf("%s{\"stage\":", i ? "," : "");
        zp_json_str(stdout, r[i].stage); /* from the stage's events: bytes off a socket */
        printf(",\"instance\":%d,\"items_per_s\":%.3f,\"bytes_per_s\":%.1f,"
               "\"cpu\":%.4f,\"busy\":%.4f,\"wait_in\":%.4f,\"wait_out\":%.4f,\"queue\":%.0f,"
               "\"errors\":%.0f,\"hit_rate\":%.4f,\"lmdb_errors\":%.0f}",
               r[i].instance, r[i].items, r[i].bytes, r[i].cpu, r[i].busy, r[i].wait_in,
               r[i].wait_out, r[i].queue, r[i].errors, r[i].hit_rate, r[i].lmdb_errors);
    }
    printf("]}\n");
}

static void print_table(const row_t *r, int n)
{
    int hot = -1;
    for (int i = 0; i < n; i++)
        if (zp_stage_of(r[i].stage) != ZP_STAGE_LOGGER &&
            (hot < 0 || fmax(r[i].busy, r[i].cpu) > fmax(r[hot].busy, r[hot].cpu)))
            hot = i;
    printf("%-9s %4s %10s %11s %5s %6s %8s %9s %6s %5s %7s\n", "STAGE", "INST", "ITEMS/S", "BYTES/S",
           "CPU", "BUSY", "WAIT-IN", "WAIT-OUT", "QUEUE", "HIT", "ERRORS");
    for (int i = 0; i < n; i++) {
        char items[24], bytes[24];
        human(items, sizeof items, r[i].items, "/s");
        human(bytes, sizeof bytes, r[i].bytes, "B/s");
        char hit[8] = "-";
        if (r[i].hit_rate >= 0)
            snprintf(hit, sizeof hit, "%.0f%%", 100 * r[i].hit_rate);
        printf("%-9s %4d %10s %11s %4.0f%% %5.0f%% %7.0f%% %8.0f%% %6.0f %5s %7.0f%s\n", r[i].stage,
               r[i].instance, items, bytes, 100 * r[i].cpu, 100 * r[i].busy, 100 * r[i].wait_in,
               100 * r[i].wait_out, r[i].queue, hit, r[i].errors + r[i].lmdb_errors,
               i == hot && fmax(r[i].busy, r[i].cpu) > 0.5 ? "  <- bottleneck" : "");
    }
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
                    "waiting for input %%, waiting on output %% (back pressure), queue depth.\n"
                    "RUN is a run directory or a name under runs/; without it, the only running run.\n");
            return help ? 0 : 2;
        } else
            run = argv[i];
    }
    char dir[PATH_MAX];
    int rc = zp_find_run(run, dir, sizeof dir);
    if (rc)
        return rc;
    row_t rows[1100];
    for (;;) {
        int n = fetch_rows(dir, rows, 1100);
        if (n < 0)
            return 1;
        if (json)
            print_json(dir, rows, n);
        else
            print_table(rows, n);
        fflush(stdout);
        if (watch <= 0)
            return 0;
        usleep((useconds_t)(watch * 1e6));
        if (!json)
            printf("\n");
    }
}

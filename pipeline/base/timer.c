/* timer.c — the named regions every stage times, their samples buffered per
 * thread and flushed to the logger, and the statistics of a region. */
#include "pipeline/base/timer.h"
#include "pipeline/base/log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ZP_REGION_NAME(id, name) name,
static const char *const NAMES[ZP_R_COUNT] = {ZP_REGIONS(ZP_REGION_NAME)};

const char *zp_timer_region_name(int region)
{
    return region >= 0 && region < ZP_R_COUNT ? NAMES[region] : NULL;
}

int zp_timer_region_of(const char *name)
{
    for (int r = 0; r < ZP_R_COUNT; r++)
        if (!strcmp(NAMES[r], name))
            return r;
    return -1;
}

void zp_timer_init(zp_timers_t *t, zp_timer_flush_fn *flush, void *ctx)
{
    memset(t, 0, sizeof *t);
    t->flush = flush;
    t->ctx = ctx;
}

int zp_timer_begin_at(zp_timers_t *t, int region, const char *file, int line)
{
    if (t->start[region]) {
        t->misuse++;
        zp_error("%s:%d: timer region \"%s\" opened again before it ended (opened at %s:%d)", file,
                 line, NAMES[region], t->file[region], t->line[region]);
        return ZP_EINVAL;
    }
    t->start[region] = zp_now_ns();
    t->file[region] = file;
    t->line[region] = line;
    return 0;
}

static void add_at(zp_timers_t *t, int region, int64_t ns, int64_t end);

int64_t zp_timer_end_at(zp_timers_t *t, int region, const char *file, int line)
{
    if (!t->start[region]) {
        t->misuse++;
        zp_error("%s:%d: timer region \"%s\" ended but it is not open", file, line, NAMES[region]);
        return -1;
    }
    int64_t now = zp_now_ns(), ns = now - t->start[region];
    t->start[region] = 0;
    add_at(t, region, ns, now);
    return ns;
}

static void flush_region(zp_timers_t *t, int r)
{
    if (t->n[r] && t->flush)
        t->flush(t->ctx, r, t->buf[r], t->end[r], t->n[r]);
    t->n[r] = 0;
}

static void add_at(zp_timers_t *t, int region, int64_t ns, int64_t end)
{
    if (t->n[region] == ZP_TIMER_BUF)
        flush_region(t, region);
    t->end[region][t->n[region]] = end;
    t->buf[region][t->n[region]++] = ns;
}

void zp_timer_add(zp_timers_t *t, int region, int64_t ns)
{
    add_at(t, region, ns, zp_now_ns());
}

void zp_timer_flush(zp_timers_t *t)
{
    for (int r = 0; r < ZP_R_COUNT; r++)
        flush_region(t, r);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void zp_timer_region_stats(double *x, size_t n, zp_region_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (!n)
        return;
    qsort(x, n, sizeof *x, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += x[i];
    double mean = sum / (double)n, ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (x[i] - mean) * (x[i] - mean);
    out->count = (int64_t)n;
    out->min = x[0];
    out->max = x[n - 1];
    out->mean = mean;
    out->total = sum;
    out->median = n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
    out->stdev = n > 1 ? sqrt(ss / (double)(n - 1)) : 0;
}

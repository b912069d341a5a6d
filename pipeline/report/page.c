/* page.c — head, foot and tables of the HTML reports (page.h). */
#include "pipeline/report/page.h"
#include "pipeline/base/hash.h"
#include "pipeline/report/escape.h"
#include "pipeline/report/report_html.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_MAX 100000000LL /* past this many indices (0.2 s of hashing), the checksum is not recomputed */

static const char STYLE[] =
    "body{font:14px/1.4 sans-serif;margin:24px;color:#222;max-width:1100px}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}"
    "code{background:#f4f4f4;padding:1px 4px}"
    ".bottleneck{background:#fff6d5;border-left:4px solid #e0a800;padding:8px 12px}"
    ".missing{background:#fde8e8;border-left:4px solid #c0392b;padding:8px 12px}"
    "figure.plot{display:inline-block;margin:8px 16px 8px 0;vertical-align:top}"
    "figcaption{font-weight:bold;margin-bottom:4px}"
    "svg.chart{background:#fff;border:1px solid #eee}"
    ".grid{stroke:#e6e6e6;stroke-width:1}.frame{fill:none;stroke:#888}"
    ".tick{font-size:11px;fill:#444;stroke:none}.label{font-size:12px;fill:#222;stroke:none}"
    ".line{fill:none;stroke-width:1.8}.dashed{stroke-dasharray:4 3;stroke-width:1.2}"
    ".band{stroke:none;fill-opacity:.18}circle{stroke:none}"
    ".legend span{margin-right:14px;white-space:nowrap}"
    ".legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px}"
    "table{border-collapse:collapse;margin:8px 0}"
    "td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}th{background:#f4f4f4}"
    "td.l,th.l{text-align:left}.bad{color:#c0392b;font-weight:bold}.ok{color:#1e8449}";

void zp_page_head(FILE *out, const char *title, const char *name)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>", out);
    zp_escape_html(out, title);
    zp_escape_html(out, name);
    fprintf(out, "</title>\n<style>%s</style></head>\n<body>\n<h1>", STYLE);
    zp_escape_html(out, title);
    fputs("<code>", out);
    zp_escape_html(out, name);
    fputs("</code></h1>\n", out);
}

void zp_page_foot(FILE *out, const char *again)
{
    fputs("<p class=\"foot\">Written by zeus-pipe from the runs' records; <code>", out);
    zp_escape_html(out, again);
    fputs("</code> writes it again.</p>\n</body></html>\n", out);
}

static int has(const zp_model_epoch_t *e) { return e->have[ZP_SPLIT_TRAIN] || e->have[ZP_SPLIT_TEST]; }

/* Whether the next epoch (the *rank-th of total) is shown: all of them up to
 * ZP_HTML_ROWS, else the first and the last half of that many. */
static int shown(int64_t *rank, int64_t total)
{
    int64_t k = (*rank)++;
    return total <= ZP_HTML_ROWS || k < ZP_HTML_ROWS / 2 || k >= total - ZP_HTML_ROWS / 2;
}

static int64_t count_epochs(const zp_model_t *m)
{
    int64_t total = 0;
    for (int64_t i = 0; i < m->nepochs; i++)
        total += has(&m->epoch[i]);
    return total;
}

static void cell(FILE *out, double v, const char *fmt)
{
    fputs("<td>", out);
    if (v >= 0)
        fprintf(out, fmt, v);
    else
        fputc('-', out);
    fputs("</td>", out);
}

static void gap_row(FILE *out, int64_t total, int cols)
{
    fprintf(out, "<tr><td class=\"l\" colspan=\"%d\">... %" PRId64 " epochs left out here (all "
                 "in report.json and metrics.jsonl)</td></tr>\n", cols, total - ZP_HTML_ROWS);
}

void zp_page_epochs(FILE *out, const zp_model_t *m)
{
    int64_t total = count_epochs(m), rank = 0;
    if (!total) {
        fputs("<p class=\"none\">No epoch finished.</p>\n", out);
        return;
    }
    fputs("<table id=\"epochs\"><tr><th>epoch</th><th>train loss</th><th>train accuracy</th>"
          "<th>test loss</th><th>test accuracy</th><th>samples/s</th><th>seconds</th></tr>\n", out);
    for (int64_t i = 0; i < m->nepochs; i++) {
        const zp_model_epoch_t *r = &m->epoch[i];
        if (!has(r))
            continue;
        if (!shown(&rank, total)) {
            if (rank == ZP_HTML_ROWS / 2 + 1)
                gap_row(out, total, 7);
            continue;
        }
        fprintf(out, "<tr class=\"epoch\"><td>%" PRId64 "</td>", r->epoch + 1);
        for (int s = 0; s < 2; s++) {
            cell(out, r->have[s] ? r->loss[s] : -1, "%.4f");
            cell(out, r->have[s] ? r->acc[s] : -1, "%.4f");
        }
        cell(out, r->have[0] ? r->samples_per_s : -1, "%.0f");
        cell(out, r->have[0] ? r->seconds : -1, "%.1f");
        fputs("</tr>\n", out);
    }
    fputs("</table>\n", out);
}

typedef struct { /* the checksum of the indices 0..n-1 */
    int64_t n;
    uint64_t sum;
} range_sum_t;

typedef struct {
    range_sum_t *v; /* sorted by n, each n once; owned, NULL when none */
    size_t count;
} range_sums_t;

/* samples less repeats, + skipped, of split s in row r: the range whose checksum the row
 * wants; -1 when that overflows or is past CHECK_MAX (not checked). */
static int64_t range_of(const zp_model_epoch_t *r, int s)
{
    int64_t once, n; /* the indices seen once, with the skipped ones */
    if (__builtin_sub_overflow(r->samples[s], r->repeats[s], &once) ||
        __builtin_add_overflow(once, r->skipped[s], &n) || n < 0 || n > CHECK_MAX)
        return -1;
    return n;
}

static int by_n(const void *a, const void *b)
{
    int64_t x = ((const range_sum_t *)a)->n, y = ((const range_sum_t *)b)->n;
    return (x > y) - (x < y);
}

/* The checksum of every range the rows want, in one pass up to the largest:
 * sorted by size, each range extends the one before. (Cached one size a
 * split, epochs of sizes that differ — a crafted metrics.jsonl — cost a pass
 * each: 28 s of CPU for 400 rows.) None when memory is short: then no row's
 * checksum is checked. */
static void range_sums(range_sums_t *rs, const zp_model_t *m)
{
    rs->count = 0;
    if (m->nepochs <= 0 || !(rs->v = malloc(ZP_SPLITS * (size_t)m->nepochs * sizeof *rs->v)))
        return;
    for (int64_t i = 0; i < m->nepochs; i++)
        for (int s = 0; s < ZP_SPLITS; s++)
            if (m->epoch[i].have[s] && range_of(&m->epoch[i], s) >= 0)
                rs->v[rs->count++] = (range_sum_t){range_of(&m->epoch[i], s), 0};
    if (rs->count)
        qsort(rs->v, rs->count, sizeof *rs->v, by_n);
    size_t kept = 0;
    int64_t at = 0;
    uint64_t sum = 0;
    for (size_t i = 0; i < rs->count; i++) {
        if (kept && rs->v[kept - 1].n == rs->v[i].n)
            continue;
        for (; at < rs->v[i].n; at++)
            sum += zp_index_term((uint64_t)at);
        rs->v[kept++] = (range_sum_t){at, sum};
    }
    rs->count = kept;
}

/* The checksum of the indices 0..n-1 less the skipped ones of split s; 0
 * with ok 0 when it cannot be known (too many indices, or skips of the
 * split that the model did not keep every one of). */
static uint64_t want_sum(const range_sums_t *rs, const zp_model_t *m, int s, int64_t n,
                         int64_t skipped, int *ok)
{
    range_sum_t key = {n, 0};
    const range_sum_t *hit = rs->count ? bsearch(&key, rs->v, rs->count, sizeof key, by_n) : NULL;
    *ok = hit && skipped == m->nskipped[s];
    if (!*ok)
        return 0;
    uint64_t sum = hit->sum;
    for (int i = 0; i < m->nskips; i++)
        if (m->skip[i].split == s)
            sum -= zp_index_term((uint64_t)m->skip[i].index);
    return sum;
}

static void coverage_row(FILE *out, const range_sums_t *rs, const zp_model_t *m,
                         const zp_model_epoch_t *r, int s)
{
    int64_t once, seen; /* the numbers come from a file: their sums may overflow */
    int counts = r->repeats[s] >= 0 &&
                 !__builtin_sub_overflow(r->samples[s], r->repeats[s], &once) &&
                 !__builtin_add_overflow(once, r->skipped[s], &seen) &&
                 seen == r->expected[s] && r->distinct[s] == once;
    int known;
    uint64_t want = want_sum(rs, m, s, range_of(r, s), r->skipped[s], &known);
    char hex[20];
    snprintf(hex, sizeof hex, "%016" PRIx64, want);
    int sum_ok = known && !strcmp(hex, r->checksum[s]);
    fprintf(out, "<tr class=\"cov\"><td>%" PRId64 "</td><td class=\"l\">%s</td><td>%" PRId64
                 "</td><td>%" PRId64 "</td><td>%" PRId64 "</td><td>%" PRId64 "</td><td class=\"l\"><code>",
            r->epoch + 1, zp_dataset_split_name(s), r->samples[s], r->expected[s], r->skipped[s],
            r->distinct[s]);
    zp_escape_html(out, r->checksum[s]);
    fputs("</code></td><td class=\"l\">", out);
    if (!counts)
        fputs("<span class=\"bad\">NOT exactly once: samples + skipped differ from expected, or "
              "a sample came twice</span>", out);
    else if (sum_ok && r->repeats[s])
        fprintf(out, "<span class=\"ok\">ok: every index once</span>, and %" PRId64 " trained "
                     "again after a resume (a rank had been ahead)", r->repeats[s]);
    else if (sum_ok)
        fputs("<span class=\"ok\">ok: every index once</span>", out);
    else if (known)
        fputs("once each, but not the indices 0..n-1 (a limited epoch, or a shard)", out);
    else
        fputs("once each (checksum not checked)", out);
    fputs("</td></tr>\n", out);
}

void zp_page_coverage(FILE *out, const zp_model_t *m)
{
    int64_t total = count_epochs(m), rank = 0;
    if (!total) {
        fputs("<p class=\"none\">No epoch finished: nothing to prove.</p>\n", out);
        return;
    }
    fputs("<p>Each epoch reached the trainer exactly once when samples + skipped = expected, "
          "distinct = samples, and the order-free checksum of the indices seen is that of "
          "0..n-1 less the skipped ones.</p>\n<table id=\"coverage\"><tr><th>epoch</th>"
          "<th class=\"l\">split</th><th>samples</th><th>expected</th><th>skipped</th>"
          "<th>distinct</th><th class=\"l\">index checksum</th><th class=\"l\">proof</th></tr>\n", out);
    range_sums_t rs = {0};
    range_sums(&rs, m);
    for (int64_t i = 0; i < m->nepochs; i++) {
        const zp_model_epoch_t *r = &m->epoch[i];
        if (!has(r))
            continue;
        if (!shown(&rank, total)) {
            if (rank == ZP_HTML_ROWS / 2 + 1)
                gap_row(out, total, 8);
            continue;
        }
        for (int s = 0; s < ZP_SPLITS; s++)
            if (r->have[s])
                coverage_row(out, &rs, m, r, s);
    }
    free(rs.v);
    fputs("</table>\n", out);
}

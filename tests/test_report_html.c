/* Unit tests of the HTML report (pipeline/report/report_html.h) and what it rests
 * on: escaping (html.h), the JSON-line reader of runscan.h, a page from a
 * run directory whose events.msgpack the test writes as the logger does, a
 * page bounded in size for a run of a million steps, a run without
 * events.msgpack reported from its jsonl files (text and page say so), a
 * sweep's comparison page, and the run model's one rule for an epoch no run
 * has, alike in text, JSON and page. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipeline/base/hash.h"
#include "pipeline/report/escape.h"
#include "pipeline/report/model.h"
#include "pipeline/base/log.h"
#include "pipeline/report/report.h"
#include "pipeline/report/report_html.h"
#include "pipeline/report/page.h"
#include "pipeline/report/report_sweep.h"
#include "pipeline/report/runscan.h"
#include "pipeline/report/svg.h"
#include "schemas/msg.h"

/* ---- escaping and parsing ---------------------------------------------------------------- */

static char *escaped(const char *s)
{
    char *buf;
    size_t n;
    FILE *f = open_memstream(&buf, &n);
    zp_escape_html(f, s);
    fclose(f);
    return buf;
}

static void markup_and_bad_bytes_are_escaped(void **state)
{
    (void)state;
    char *e = escaped("<script>alert('x') & \"y\"</script>");
    assert_string_equal(e, "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;");
    free(e);
    e = escaped("caf\xc3\xa9 \xff\xfe tab\there");
    assert_string_equal(e, "caf\xc3\xa9 &#xfffd;&#xfffd; tab here");
    free(e);
    e = escaped("\xe2\x82"); /* a sequence cut short */
    assert_string_equal(e, "&#xfffd;&#xfffd;");
    free(e);
}

/* The line as msgpack, unpacked; NULL when refused. */
static msgpack_object *parse(const char *line, msgpack_unpacked *u, msgpack_sbuffer *sb)
{
    sb->size = 0;
    if (zp_runscan_json_line(line, strlen(line), sb))
        return NULL;
    size_t off = 0;
    assert_int_equal(msgpack_unpack_next(u, sb->data, sb->size, &off), MSGPACK_UNPACK_SUCCESS);
    return &u->data;
}

static void a_json_line_becomes_the_same_record(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    msgpack_object *o = parse("{\"kind\":\"metric\", \"epoch\": 3, \"loss\": 0.25, \"e\": 1e-3, "
                              "\"s\":\"a\\\"b\\u00e9\\n\", \"ns\": [1, {\"x\": \"]\"}], \"ok\": true, "
                              "\"z\": null}\n", &u, &sb);
    assert_non_null(o);
    assert_int_equal(o->type, MSGPACK_OBJECT_MAP);
    assert_int_equal(o->via.map.size, 8);
    const msgpack_object *v = zp_msg_map_get(o, "epoch");
    assert_true(v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER && v->via.u64 == 3);
    v = zp_msg_map_get(o, "loss");
    assert_true(v && v->type == MSGPACK_OBJECT_FLOAT64 && v->via.f64 == 0.25);
    v = zp_msg_map_get(o, "s");
    assert_true(v && v->type == MSGPACK_OBJECT_STR && v->via.str.size == 6);
    assert_memory_equal(v->via.str.ptr, "a\"b\xc3\xa9\n", 6);
    v = zp_msg_map_get(o, "ns");
    assert_true(v && v->type == MSGPACK_OBJECT_NIL);
    assert_null(parse("{\"kind\":\"metric\", \"epoch\": 3", &u, &sb)); /* torn by a kill */
    assert_null(parse("[1, 2]", &u, &sb));
    assert_null(parse("{\"a\": 1} trailing", &u, &sb));
    assert_null(parse("{\"a\": 12abc}", &u, &sb));
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
}

/* ---- run directories written as the logger writes them ----------------------------------- */

static char dir[96], run[160], path[200], err[PATH_MAX + 256];
static msgpack_sbuffer sb;
static msgpack_packer pk;
static FILE *events;

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/zp-test-html-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    /* a run named with markup: the page must show it as text */
    snprintf(run, sizeof run, "%s/r<b>&'x", dir);
    if (mkdir(run, 0755))
        return -1;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    events = NULL;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (events)
        fclose(events);
    msgpack_sbuffer_destroy(&sb);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

static void str(const char *s) { msgpack_pack_str_with_body(&pk, s, strlen(s)); }
static void kv_str(const char *k, const char *v) { str(k), str(v); }
static void kv_int(const char *k, int64_t v) { str(k), msgpack_pack_int64(&pk, v); }
static void kv_num(const char *k, double v) { str(k), msgpack_pack_double(&pk, v); }

/* An EVENT message whose body has the head and n more fields to come. */
static void head(const char *kind, const char *stage, int64_t instance, double time, int n)
{
    sb.size = 0;
    zp_msg_pack_begin(&pk, ZP_MSG_EVENT, 1);
    str("body");
    msgpack_pack_map(&pk, (size_t)(5 + n));
    kv_str("kind", kind);
    kv_str("stage", stage);
    kv_int("instance", instance);
    kv_int("pid", 100 + instance);
    kv_num("time", time);
}

static void append(void)
{
    if (!events) {
        snprintf(path, sizeof path, "%s/events.msgpack", run);
        assert_non_null(events = fopen(path, "ab"));
    }
    assert_int_equal(fwrite(sb.data, 1, sb.size, events), sb.size);
}

/* The checksum of 0..n-1 without `left_out` (-1: none). */
static char checksum_of[24];
static const char *range_checksum(int64_t n, int64_t left_out)
{
    uint64_t s = 0;
    for (int64_t i = 0; i < n; i++)
        s += i == left_out ? 0 : zp_index_term((uint64_t)i);
    snprintf(checksum_of, sizeof checksum_of, "%016llx", (unsigned long long)s);
    return checksum_of;
}

/* n samples expected, of which `skipped` were left out. */
static void epoch_end(int epoch, const char *split, int64_t n, int64_t skipped, double loss,
                      double acc, const char *sum)
{
    head("metric", "trainer", 0, 1000 + epoch, 11);
    kv_str("event", "epoch_end");
    kv_str("split", split);
    kv_int("epoch", epoch);
    kv_int("samples", n - skipped);
    kv_int("expected_samples", n);
    kv_int("skipped", skipped);
    kv_int("distinct", n - skipped);
    kv_str("index_checksum", sum);
    kv_num("seconds", 2);
    kv_num("loss", loss);
    kv_num("accuracy", acc);
    append();
}

static void step(int64_t s, int64_t per_epoch, double loss)
{
    head("metric", "trainer", 0, 1000 + (double)s / per_epoch, 5);
    kv_str("event", "step");
    kv_int("step", s);
    kv_int("steps_per_epoch", per_epoch);
    kv_num("loss", loss);
    kv_num("accuracy", 1 - loss);
    append();
}

static void stats(const char *stage, int64_t instance, double time, double items_per_s, double wait)
{
    head("stats", stage, instance, time, 5);
    kv_num("items_per_s", items_per_s);
    kv_num("wait_in", wait);
    kv_num("uptime_s", time - 999);
    kv_num("total_busy_s", (time - 999) * 0.9);
    kv_int("final", 0);
    append();
}

static void timer(const char *stage, const char *region, int64_t ns)
{
    head("timer", stage, 0, 1001, 2);
    kv_str("region", region);
    str("ns");
    msgpack_pack_array(&pk, 2);
    msgpack_pack_int64(&pk, ns);
    msgpack_pack_int64(&pk, ns);
    append();
}

static void skipped(const char *error)
{
    head("metric", "loader", 1, 1001, 4);
    kv_str("event", "sample_skipped");
    kv_str("split", "train");
    kv_int("index", 7);
    kv_str("error", error);
    append();
}

/* zp_report_html of the run into a string (freed by the caller); its status in *rc. */
static char *page(int *rc)
{
    if (events)
        fclose(events), events = NULL;
    char *buf;
    size_t n;
    FILE *f = open_memstream(&buf, &n);
    err[0] = 0;
    *rc = zp_report_html(run, f, err, sizeof err);
    fclose(f);
    return buf;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

static void a_run_has_its_plots_tables_and_nothing_unescaped(void **state)
{
    (void)state;
    for (int e = 0; e < 3; e++) {
        /* sample 7 skipped every epoch */
        epoch_end(e, "train", 100, 1, 1.0 / (e + 1), 0.5 + 0.1 * e, range_checksum(100, 7));
        epoch_end(e, "test", 20, 0, 1.2 / (e + 1), 0.4 + 0.1 * e, "0000000000000bad");
    }
    for (int s = 0; s < 30; s++)
        step(s, 10, 1.0 / (s + 1));
    const char *stages[] = {"loader", "cache", "prefetch", "trainer", "logger"};
    for (int t = 0; t < 20; t++)
        for (int i = 0; i < 5; i++)
            stats(stages[i], 0, 1000 + t, 100 * (i + 1), 0.3);
    stats("loader", 1, 1005, 50, 0.1);
    timer("trainer", "io", 3000000000); /* 30% of 20 s of epochs: long enough for advice */
    timer("trainer", "epoch", 10000000000);
    timer("loader", "read", 2000000);
    skipped("bad.jpg: <img src=x onerror=alert(1)>");
    /* two nodes' loader.autoscale decisions, a reason with markup */
    for (int node = 0; node < 2; node++) {
        head("metric", "supervisor", node, 1004 + node, 6);
        kv_str("event", "autoscale");
        kv_int("change", -1);
        kv_int("workers_before", 2);
        kv_int("workers_after", 1);
        kv_num("busy", 0.05);
        kv_str("reason", "idle <b>twice</b>");
        append();
    }
    int rc;
    char *html = page(&rc);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(html, "<code>r&lt;b&gt;&amp;&#39;x</code>"));
    assert_null(strstr(html, "<b>"));
    assert_null(strstr(html, "<img"));
    assert_null(strstr(html, "<script"));
    assert_non_null(strstr(html, "bad.jpg: &lt;img src=x onerror=alert(1)&gt;"));
    for (int i = 0; i < 5; i++) {
        char want[64];
        snprintf(want, sizeof want, "<g class=\"series\" data-stage=\"%s\"", stages[i]);
        assert_int_equal(count(html, want), i == 3 ? 2 : 1); /* the trainer's wait too */
    }
    assert_non_null(strstr(html, "id=\"loss\""));
    assert_non_null(strstr(html, "id=\"accuracy\""));
    assert_non_null(strstr(html, "id=\"throughput\""));
    assert_non_null(strstr(html, "id=\"data-wait\""));
    assert_non_null(strstr(html, "<g class=\"bar\" data-label=\"trainer io\""));
    assert_int_equal(count(html, "<tr class=\"epoch\">"), 3);
    assert_int_equal(count(html, "ok: every index once"), 3);      /* train, less sample 7 */
    assert_int_equal(count(html, "not the indices 0..n-1"), 3);    /* test: a wrong checksum */
    assert_non_null(strstr(html, "the trainer waited for data 30.0% of its time while the 2 loader(s) were busy 90%"));
    assert_null(strstr(html, "class=\"missing\""));
    assert_non_null(strstr(html, "<h2>Loader autoscale</h2>"));
    assert_int_equal(count(html, "<td>2 &rarr; 1</td><td>-</td><td>5%</td><td>idle &lt;b&gt;twice&lt;/b&gt;</td>"), 2);
    assert_non_null(strstr(html, "<td>4.0 s</td><td>rank 0</td>")); /* after the first stats record */
    assert_non_null(strstr(html, "<td>5.0 s</td><td>rank 1</td>"));
    free(html);
}

static void a_series_constant_to_the_last_bits_gets_a_few_ticks(void **state)
{
    (void)state;
    /* a spread of one ulp at 10^4: a tick step there is one a double cannot add */
    stats("cache", 0, 1000, 10000.0, 0.3);
    stats("cache", 0, 1001, 10000.000000000002, 0.3);
    int rc;
    char *html = page(&rc);
    assert_int_equal(rc, 0);
    assert_true(strlen(html) < 200000);
    assert_true(count(html, "class=\"tick\"") < 4 * 2 * 20);
    free(html);
}

static void a_million_steps_make_a_page_of_bounded_size(void **state)
{
    (void)state;
    const int64_t steps = 1000000, per_epoch = 1000;
    for (int64_t s = 0; s < steps; s++) {
        if (s % 10 == 0) /* trainer.log_every_steps: 10 */
            step(s, per_epoch, 1.0 / (1 + s % 977));
        if (s % per_epoch == per_epoch - 1) {
            epoch_end((int)(s / per_epoch), "train", 64000, 0, 0.5, 0.5, "0");
            epoch_end((int)(s / per_epoch), "test", 1000, 0, 0.5, 0.5, "0");
        }
        if (s % 50 == 0)
            stats(s % 100 ? "loader" : "trainer", 0, 1000 + s / 50.0, (double)(s % 1000), 0.5);
    }
    int rc;
    char *html = page(&rc);
    assert_int_equal(rc, 0);
    size_t n = strlen(html);
    print_message("a million steps: a page of %zu bytes\n", n);
    assert_true(n < 1024 * 1024);
    /* each polyline holds at most ZP_SVG_BUCKETS points */
    for (const char *p = html; (p = strstr(p, "<polyline")); p++) {
        const char *end = strstr(p, "/>");
        int points = 0;
        for (const char *q = p; q < end; q++)
            points += *q == ',';
        assert_true(points <= ZP_SVG_BUCKETS);
    }
    assert_int_equal(count(html, "<tr class=\"epoch\">"), ZP_HTML_ROWS);
    assert_non_null(strstr(html, "800 epochs left out here"));
    free(html);
}

static void jsonl(const char *name, const char *text)
{
    snprintf(path, sizeof path, "%s/%s", run, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void a_run_without_events_is_reported_from_its_jsonl_files(void **state)
{
    (void)state;
    int rc;
    char *html = page(&rc);
    assert_int_equal(rc, -ENOENT); /* nothing at all: nothing to show */
    assert_non_null(strstr(err, "events.msgpack"));
    free(html);
    jsonl("metrics.jsonl",
          "{\"kind\":\"metric\",\"stage\":\"trainer\",\"instance\":0,\"time\":5.5,\"event\":\"epoch_end\","
          "\"split\":\"train\",\"epoch\":0,\"samples\":10,\"expected_samples\":10,\"distinct\":10,"
          "\"loss\":0.75,\"accuracy\":0.5,\"samples_per_s\":100,\"seconds\":0.1}\n"
          "{\"kind\":\"metric\",\"stage\":\"trainer\",\"instance\":0,\"time\":6,\"event\":\"epo");
    html = page(&rc);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(html, "events.msgpack is missing: this report is made of metrics.jsonl, "
                                 "without the time per region"));
    assert_non_null(strstr(html, "stats.jsonl is missing too"));
    assert_int_equal(count(html, "<tr class=\"epoch\">"), 1);
    assert_non_null(strstr(html, "<td>0.7500</td>"));
    assert_non_null(strstr(html, "metrics.jsonl: skipped 69 bytes (1 torn or garbled records)"));
    free(html);
    /* the text report says the same */
    char *text;
    size_t n;
    FILE *f = open_memstream(&text, &n);
    assert_int_equal(zp_report(run, f, NULL, err, sizeof err), 0);
    fclose(f);
    assert_non_null(strstr(text, "(events.msgpack is missing: this report is made of metrics.jsonl"));
    assert_non_null(strstr(text, "    1      0.7500     0.5000"));
    free(text);
    /* and the page is written beside and renamed over */
    assert_int_equal(zp_report_html_write(run, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/report.html", run);
    assert_int_equal(access(path, R_OK), 0);
}

static void a_sweep_page_links_every_run_and_draws_one_series_each(void **state)
{
    (void)state;
    epoch_end(0, "test", 20, 0, 0.9, 0.6, "0");
    epoch_end(1, "test", 20, 0, 0.7, 0.7, "0");
    free(page(&(int){0})); /* closes events.msgpack */
    zp_report_sweep_run_t runs[2] = {
        {"r<b>&'x", "lr=0.1", run, 0, {2, 0.5, 0.7, 0.7, 0.7, 4}},
        {"gone", "lr=\"1\"", "", 1, {0, -1, -1, -1, -1, 0}},
    };
    snprintf(path, sizeof path, "%s/s-sweep.html", dir);
    assert_int_equal(zp_report_sweep_write(path, "s", runs, 2, err, sizeof err), 0);
    char buf[65536];
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    assert_non_null(strstr(buf, "<a href=\"r&lt;b&gt;&amp;&#39;x/report.html\">r&lt;b&gt;&amp;&#39;x</a>"));
    assert_non_null(strstr(buf, "lr=&quot;1&quot;"));
    assert_non_null(strstr(buf, "failed: exit 1"));
    assert_int_equal(count(buf, "<g class=\"series\" data-run=\"r&lt;b&gt;&amp;&#39;x\""), 2);
    assert_int_equal(count(buf, "<tr class=\"run\">"), 2);
}

/* An epoch_end of epoch 5 in a run of 3 epochs. */
static void epoch_past_the_runs_count(void)
{
    head("metric", "trainer", 0, 1003, 5);
    kv_str("event", "epoch_end");
    kv_str("split", "train");
    kv_int("epoch", 5);
    kv_int("epochs", 3);
    kv_num("loss", 0.125);
    append();
}

/* A program's own train_epoch record, of any epoch number. */
static void program_epoch(int64_t epoch)
{
    head("metric", "trainer", 0, 1003, 3);
    kv_str("event", "train_epoch");
    kv_int("epoch", epoch);
    kv_num("loss", 0.125);
    append();
}

/* Every reader of the run once had its own rule for an epoch no run has:
 * the text report refused an epoch_end past 10^6 as unreadable and showed
 * one past the run's count, the page ignored both silently. Now the model
 * skips and counts them, and text, JSON and page say the same. */
static void an_epoch_outside_the_run_is_skipped_and_counted_alike_by_every_report(void **state)
{
    (void)state;
    epoch_end(0, "train", 10, 0, 0.5, 0.5, range_checksum(10, -1));
    epoch_end(1, "train", 10, 0, 0.25, 0.75, range_checksum(10, -1));
    epoch_end(ZP_MODEL_EPOCH_MAX, "train", 10, 0, 0.1, 0.9, "0");
    epoch_end(INT32_MAX, "test", 10, 0, 0.1, 0.9, "0");
    epoch_past_the_runs_count();
    program_epoch(-1);
    program_epoch(ZP_MODEL_EPOCH_MAX + 7);
    int rc;
    char *html = page(&rc);
    assert_int_equal(rc, 0);
    assert_int_equal(count(html, "<tr class=\"epoch\">"), 2);
    assert_int_equal(count(html, "<tr class=\"cov\">"), 2);
    assert_null(strstr(html, "<td>1000001</td>"));
    assert_null(strstr(html, "<td>6</td>"));
    assert_non_null(strstr(html, "5 records of events.msgpack were not understood and skipped."));
    free(html);

    char *text, *json;
    size_t tn, jn;
    FILE *t = open_memstream(&text, &tn), *j = open_memstream(&json, &jn);
    assert_int_equal(zp_report(run, t, j, err, sizeof err), 0);
    fclose(t);
    fclose(j);
    assert_non_null(strstr(text, "\n    1      0.5000     0.5000"));
    assert_non_null(strstr(text, "\n    2      0.2500     0.7500"));
    assert_null(strstr(text, "1000001  "));
    assert_null(strstr(text, "\n    6  "));
    assert_non_null(strstr(text, "(5 records of events.msgpack were not understood and skipped)"));
    assert_non_null(strstr(json, "\"unread_records\":5,"));
    assert_non_null(strstr(json, "\"epochs\":[{\"epoch\":1,"));
    assert_non_null(strstr(json, "{\"epoch\":2,"));
    assert_null(strstr(json, "{\"epoch\":3,"));
    assert_null(strstr(json, "\"epoch\":1000001"));
    free(text);
    free(json);

    zp_model_t *m;
    assert_int_equal(zp_model_load(&m, run, err, sizeof err), 0);
    assert_int_equal(m->nepochs, 2); /* nothing held for the epochs outside the run */
    assert_int_equal(m->unread, 5);
    zp_model_destroy(&m);
    assert_null(m);
    zp_model_destroy(&m); /* safe twice */
}

/* Epochs of different sizes each get their own checksum (one pass up to the
 * largest, not one pass a row), and counts that overflow when added are
 * "NOT exactly once", not undefined behaviour. */
static void each_epochs_checksum_is_of_its_own_size_and_huge_counts_do_not_overflow(void **state)
{
    (void)state;
    const int64_t sizes[] = {1000, 10, 0, 1000, 7, 999, 1};
    const int n = sizeof sizes / sizeof *sizes;
    zp_model_epoch_t rows[8] = {0};
    for (int e = 0; e < n; e++) {
        uint64_t sum = 0;
        for (int64_t i = 0; i < sizes[e]; i++)
            sum += zp_index_term((uint64_t)i);
        zp_model_epoch_t *r = &rows[e];
        r->epoch = e;
        r->have[0] = 1;
        r->samples[0] = r->expected[0] = r->distinct[0] = sizes[e];
        snprintf(r->checksum[0], sizeof r->checksum[0], "%016llx", (unsigned long long)sum);
    }
    zp_model_epoch_t *huge = &rows[n];
    huge->epoch = n;
    huge->have[0] = 1;
    huge->samples[0] = huge->distinct[0] = INT64_MAX, huge->skipped[0] = 1;
    huge->expected[0] = INT64_MIN; /* what INT64_MAX + 1 wraps to */
    snprintf(huge->checksum[0], sizeof huge->checksum[0], "0000000000000000");
    char *html;
    size_t len;
    FILE *out = open_memstream(&html, &len);
    zp_model_t model = {.epoch = rows, .nepochs = n + 1};
    zp_page_coverage(out, &model);
    fclose(out);
    assert_int_equal(count(html, "ok: every index once"), n);
    assert_int_equal(count(html, "NOT exactly once"), 1);
    free(html);
}

/* A point far outside the others' x range falls in the first or last bucket:
 * its bucket, computed as an int, overflowed. */
static void a_point_far_outside_the_range_is_drawn_at_an_edge(void **state)
{
    (void)state;
    zp_xy_t xy = {0};
    for (int i = 0; i < 2 * ZP_SVG_BUCKETS; i++)
        assert_int_equal(zp_xy_push(&xy, i == 7 ? -1e300 : i == 9 ? 1e300 : i, 1), 0);
    zp_svg_series_t series = {.name = "s", .key = "k", .xy = &xy};
    zp_svg_plot_t plot = {.id = "p", .title = "t", .xlabel = "x", .ylabel = "y"};
    char *svg;
    size_t len;
    FILE *out = open_memstream(&svg, &len);
    zp_svg_lines(out, &plot, &series, 1);
    fclose(out);
    assert_non_null(strstr(svg, "<svg"));
    free(svg);
    zp_xy_free(&xy);
}

int main(void)
{
    zp_log_set_level(ZP_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(markup_and_bad_bytes_are_escaped),
        cmocka_unit_test(a_json_line_becomes_the_same_record),
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(a_run_has_its_plots_tables_and_nothing_unescaped),
        T(a_series_constant_to_the_last_bits_gets_a_few_ticks),
        T(a_million_steps_make_a_page_of_bounded_size),
        T(a_run_without_events_is_reported_from_its_jsonl_files),
        T(a_sweep_page_links_every_run_and_draws_one_series_each),
        T(an_epoch_outside_the_run_is_skipped_and_counted_alike_by_every_report),
        cmocka_unit_test(each_epochs_checksum_is_of_its_own_size_and_huge_counts_do_not_overflow),
        cmocka_unit_test(a_point_far_outside_the_range_is_drawn_at_an_edge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

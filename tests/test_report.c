/* Unit tests of the report: the bottleneck rule on known figures (the
 * sentence a run ends with is a function of the trainer's data wait and the
 * data stages' busy shares, whatever the machine's timings were), and
 * zp_report / zp_report_summary on a run directory whose events.msgpack the
 * test writes as the logger does — each record sent by the stages' own
 * zp_event_* calls, received and appended as it came off the wire — including
 * a missing, empty, garbled or torn file; a cold-then-warm run judged phase
 * by phase; and the text and the page of one run saying the same, as
 * renderers of one run model. */
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
#include <unistd.h>
#include <zmq.h>

#include "pipeline/stage/event.h"
#include "pipeline/base/log.h"
#include "pipeline/report/report.h"
#include "pipeline/report/report_bottleneck.h"
#include "pipeline/report/report_html.h"
#include "pipeline/stage/stage.h"

static int name(double wait, double loader, double cache, double prefetch, int loaders,
                char *stage, char *advice)
{
    zp_data_stages_t d = {.busy = {loader, cache, prefetch}, .loaders = loaders, .seconds = 60};
    return zp_report_bottleneck(&d, wait, stage, 16, advice, 600);
}

static void a_run_too_short_for_its_shares_gets_no_advice(void **state)
{
    (void)state;
    char stage[16], advice[600];
    /* the figures of a loader-bound run, over 1.2 s of epochs: start-up, not a bottleneck */
    zp_data_stages_t d = {.busy = {0.97, 0.2, 0.3}, .loaders = 3, .seconds = 1.2};
    assert_int_equal(zp_report_bottleneck(&d, 0.6, stage, 16, advice, 600), -1);
    assert_string_equal(stage, "unknown");
    assert_non_null(strstr(advice, "over 1.2 s of epochs: too short a run"));
    assert_null(strstr(advice, "try"));
}

static void a_trainer_that_waits_under_a_tenth_is_the_bottleneck(void **state)
{
    (void)state;
    char stage[16], advice[600];
    assert_int_equal(name(0.099, 1.0, 1.0, 1.0, 2, stage, advice), 3);
    assert_string_equal(stage, "trainer");
    assert_non_null(strstr(advice, "waited for data 9.9% of its time"));
    assert_int_equal(name(0.0, 0, 0, 0, 1, stage, advice), 3);
}

static void the_busiest_data_stage_is_named_with_its_advice(void **state)
{
    (void)state;
    char stage[16], advice[600];
    assert_int_equal(name(0.6, 0.97, 0.2, 0.3, 3, stage, advice), 0);
    assert_string_equal(stage, "loader");
    assert_non_null(strstr(advice, "the 3 loader(s) were busy 97%"));
    assert_non_null(strstr(advice, "loader.workers=6"));
    assert_int_equal(name(0.1, 0.5, 0.8, 0.3, 1, stage, advice), 1);
    assert_string_equal(stage, "cache");
    assert_non_null(strstr(advice, "cache.commit_every"));
    assert_int_equal(name(0.9, 0.5, 0.6, 0.61, 1, stage, advice), 2);
    assert_string_equal(stage, "prefetch");
    assert_non_null(strstr(advice, "prefetch.readers"));
}

/* A cold phase's busy loaders are advised the warm cache first: the epochs
 * after it read from LMDB, not from the loaders. The whole run's sentence is
 * as it was; a warm phase's names the loaders for the cache's misses. */
static void busy_loaders_of_a_cold_phase_are_advised_to_warm_the_cache_first(void **state)
{
    (void)state;
    char stage[16], advice[600];
    zp_data_stages_t d = {.busy = {0.99, 0.05, 0.05}, .loaders = 1, .seconds = 20,
                          .phase = ZP_PHASE_COLD};
    assert_int_equal(zp_report_bottleneck(&d, 0.3, stage, 16, advice, 600), 0);
    assert_string_equal(stage, "loader");
    assert_non_null(strstr(advice, "The loaders are the bottleneck: the trainer waited for data "
                                   "30.0% of its time while the 1 loader(s) were busy 99% of theirs; "
                                   "warm the cache first (zeus-pipe warm CONFIG)"));
    assert_non_null(strstr(advice, "or more loaders (loader.workers=2) for cold epochs."));
    d.phase = ZP_PHASE_WARM;
    assert_int_equal(zp_report_bottleneck(&d, 0.3, stage, 16, advice, 600), 0);
    assert_null(strstr(advice, "zeus-pipe warm"));
    assert_non_null(strstr(advice, "loader.workers=2"));
    d.phase = ZP_PHASE_RUN;
    assert_int_equal(zp_report_bottleneck(&d, 0.3, stage, 16, advice, 600), 0);
    assert_non_null(strstr(advice, "; try more loaders (loader.workers=2) or warm the cache "
                                   "(zeus-pipe warm CONFIG) so that epochs read from LMDB."));
    assert_string_equal(zp_report_bottleneck_phase_name(ZP_PHASE_COLD), "cold");
    assert_string_equal(zp_report_bottleneck_phase_name(ZP_PHASE_RUN), "run");
}

/* The case that was advised wrong: the default config on the cuda backend, the
 * trainer waiting 32.4% with no data stage busy half its time. "A bigger
 * prefetch.depth and prefetch.window" made it wait 40.9%: no setting is
 * advised, the figures and the trace are named instead. */
static void waiting_with_no_busy_stage_advises_no_setting_and_no_timings_are_unknown(void **state)
{
    (void)state;
    char stage[16], advice[600];
    assert_int_equal(name(0.324, 0.12, 0.31, 0.44, 2, stage, advice), -1);
    assert_string_equal(stage, "unknown");
    assert_null(strstr(advice, "prefetch.depth"));
    assert_null(strstr(advice, "prefetch.window"));
    assert_null(strstr(advice, "try"));
    assert_non_null(strstr(advice, "32.4% of its time"));
    assert_non_null(strstr(advice, "(loaders 12%, cache 31%, prefetch 44%)"));
    assert_non_null(strstr(advice, "--trace"));
    assert_int_equal(name(-1, 1, 1, 1, 2, stage, advice), -1);
    assert_string_equal(stage, "unknown");
    assert_non_null(strstr(advice, "has not finished an epoch"));
}

/* ---- a run directory written as the stages and the logger write it ---------------------- */

static char dir[64], path[128], err[512];
static zp_stage_t *st; /* the sender; name and instance set per record */
static void *zctx, *pull;

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/zp-test-report-XXXXXX");
    if (!mkdtemp(dir) || !(st = calloc(1, sizeof *st)) || !(zctx = zmq_ctx_new()))
        return -1;
    snprintf(path, sizeof path, "%s/events.msgpack", dir);
    pull = zmq_socket(zctx, ZMQ_PULL);
    st->events = zmq_socket(zctx, ZMQ_PUSH);
    if (zmq_bind(pull, "inproc://events") || zmq_connect(st->events, "inproc://events"))
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    zmq_close(st->events);
    zmq_close(pull);
    zmq_ctx_term(zctx);
    free(st);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

/* Starts a record of `stage`[instance]. */
static void begin(zp_event_t *ev, const char *stage, int instance, const char *kind, int n)
{
    st->name = stage;
    st->instance = instance;
    zp_event_begin(st, ev, kind);
}

/* Sends the record and appends it to events.msgpack as the logger does. */
static void deliver(zp_event_t *ev)
{
    zp_event_send(st, ev);
    assert_int_equal(st->events_dropped, 0);
    char buf[4096];
    int n = zmq_recv(pull, buf, sizeof buf, 0);
    assert_true(n > 0 && n < (int)sizeof buf);
    FILE *f = fopen(path, "ab");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
}

static void epoch_end(int epoch, const char *split, double loss, double acc, double seconds)
{
    zp_event_t ev;
    begin(&ev, "trainer", 0, "metric", 7);
    zp_event_str(&ev, "event", "epoch_end");
    zp_event_str(&ev, "split", split);
    zp_event_int(&ev, "epoch", epoch);
    zp_event_num(&ev, "samples_per_s", 1000);
    zp_event_num(&ev, "seconds", seconds);
    zp_event_num(&ev, "loss", loss);
    zp_event_num(&ev, "accuracy", acc);
    deliver(&ev);
}

static void stats(const char *stage, int instance, double items, double uptime, double busy)
{
    zp_event_t ev;
    begin(&ev, stage, instance, "stats", 6);
    zp_event_int(&ev, "total_items", (int64_t)items);
    zp_event_int(&ev, "errors", 0);
    zp_event_num(&ev, "uptime_s", uptime);
    zp_event_num(&ev, "total_busy_s", busy);
    zp_event_num(&ev, "total_wait_in_s", uptime - busy);
    zp_event_num(&ev, "total_wait_out_s", 0);
    deliver(&ev);
}

static void timer(const char *stage, const char *region, const int64_t *ns, int n)
{
    zp_event_t ev;
    begin(&ev, stage, 0, "timer", 2);
    zp_event_str(&ev, "region", region);
    zp_event_ints(&ev, "ns", ns, n);
    deliver(&ev);
}

static void skipped(int64_t index)
{
    zp_event_t ev;
    begin(&ev, "loader", 1, "metric", 4);
    zp_event_str(&ev, "event", "sample_skipped");
    zp_event_str(&ev, "split", "train");
    zp_event_int(&ev, "index", index);
    zp_event_str(&ev, "error", "broken.jpg: not a JPEG");
    deliver(&ev);
}

/* Two epochs of a run whose two loaders were busy 90% while the trainer
 * waited for data 30% of its time; one sample skipped twice, one loader lost. */
static void a_run(void)
{
    epoch_end(0, "train", 0.9, 0.7, 2.5);
    epoch_end(0, "test", 0.6, 0.86, 0.5);
    epoch_end(1, "train", 0.5, 0.85, 2.0);
    epoch_end(1, "test", 0.45, 0.84, 0.5);
    stats("loader", 0, 500, 10, 9);
    stats("loader", 1, 300, 10, 9);
    stats("loader", 0, 1000, 20, 18); /* a later record of the same instance replaces the first */
    stats("cache", 0, 2000, 20, 2);
    stats("prefetch", 0, 2000, 20, 4);
    stats("trainer", 0, 2000, 20, 14);
    /* 30% of 20 s of epochs: long enough for bottleneck advice */
    timer("trainer", "io", (const int64_t[]){1000000000, 2000000000, 3000000000}, 3);
    timer("trainer", "epoch", (const int64_t[]){10000000000, 10000000000}, 2);
    skipped(17);
    skipped(17); /* the next epoch's skip of the same sample */
    zp_event_t ev;
    begin(&ev, "cache", 0, "metric", 2);
    zp_event_str(&ev, "event", "loader_lost");
    zp_event_int(&ev, "requeued", 3);
    deliver(&ev);
}

/* zp_report into two strings (freed by the caller). */
static int report(char **text, char **json)
{
    size_t tn, jn;
    FILE *t = open_memstream(text, &tn), *j = open_memstream(json, &jn);
    err[0] = 0;
    int rc = zp_report(dir, t, j, err, sizeof err);
    fclose(t);
    fclose(j);
    return rc;
}

static void the_report_of_a_run_has_its_epochs_stages_and_bottleneck(void **state)
{
    (void)state;
    a_run();
    char *text, *json;
    assert_int_equal(report(&text, &json), 0);
    assert_non_null(strstr(text, "run zp-test-report-"));
    assert_non_null(strstr(text, "    1      0.9000     0.7000     0.6000     0.8600       1000/s     2.5s\n"));
    assert_non_null(strstr(text, "    2      0.5000     0.8500     0.4500     0.8400       1000/s     2.0s\n"));
    /* io: 1, 2, 3 s */
    assert_non_null(strstr(text, "trainer   io                3  1000.000  2000.000  2000.000  3000.000  1000.000       6.00\n"));
    assert_non_null(strstr(text, "loader        2         1300"));
    assert_non_null(strstr(text, "Skipped samples (loader.on_error: skip): 1 distinct, 2 skips in all:\n"
                                 "  train 17: broken.jpg: not a JPEG\n"));
    assert_non_null(strstr(text, "Loaders lost (dead or silent past loader.liveness): 1; tasks re-queued: 3."));
    assert_non_null(strstr(text, "The trainer waited for data 30.0% of its time."));
    assert_non_null(strstr(text, "the 2 loader(s) were busy 90% of theirs"));
    assert_null(strstr(text, "skipped")); /* nothing torn, nothing unknown */

    assert_non_null(strstr(json, "\"skipped_bytes\":0,\"skipped_records\":0,\"epochs\":[{\"epoch\":1,"
                                 "\"train_loss\":0.9,\"train_accuracy\":0.7,\"test_loss\":0.6,"
                                 "\"test_accuracy\":0.86,\"samples_per_s\":1000,\"seconds\":2.5}"));
    assert_non_null(strstr(json, "{\"stage\":\"loader\",\"instances\":2,\"items\":1300,"));
    assert_non_null(strstr(json, "\"loaders_lost\":1,\"tasks_requeued\":3,\"skips\":2,\"skipped_samples\":"
                                 "[{\"split\":\"train\",\"index\":17,\"error\":\"broken.jpg: not a JPEG\"}]"));
    assert_non_null(strstr(json, "\"trainer_wait_share\":0.3,\"bottleneck\":{\"stage\":\"loader\","));
    /* the cache off: one phase, with the whole run's figures and sentence */
    assert_non_null(strstr(json, "\"phases\":[{\"first_epoch\":1,\"last_epoch\":2,\"kind\":\"run\","
                                 "\"seconds\":20,\"trainer_wait_share\":0.3,\"busy\":{\"loader\":0.9,"
                                 "\"cache\":0.1,\"prefetch\":0.2},\"loaders\":2,\"stage\":\"loader\","
                                 "\"advice\":\"The loaders are the bottleneck"));
    assert_null(strstr(text, "Epoch 1 ("));
    free(text);
    free(json);
}

/* ---- a cold epoch, then warm ones: each phase judged on its own ------------------------- */

#define T0 1000.0 /* the synthetic run's start, s since 1970 */

/* One stats record of stage[instance] at T0 + t: a window of 1 s with these shares. */
static void window(const char *stage, int instance, double t, double busy, double wait_in)
{
    zp_event_t ev;
    st->name = stage;
    st->instance = instance;
    zp_event_record_at(st, &ev, ZP_REC_STATS, T0 + t);
    zp_event_num(&ev, "busy", busy);
    zp_event_num(&ev, "wait_in", wait_in);
    zp_event_num(&ev, "window_s", 1);
    zp_event_num(&ev, "uptime_s", t);
    zp_event_num(&ev, "total_busy_s", busy * t); /* as if every window were this one */
    zp_event_num(&ev, "total_wait_in_s", wait_in * t);
    deliver(&ev);
}

/* The prefetch's cache record and the trainer's epoch_end records of one epoch ending at T0 + t. */
static void epoch_ended(int epoch, double t, int64_t hits, int64_t misses, double seconds)
{
    zp_event_t ev;
    st->name = "prefetch";
    st->instance = 0;
    zp_event_record_at(st, &ev, ZP_REC_CACHE, T0 + t - 0.1);
    zp_event_str(&ev, "split", "train");
    zp_event_int(&ev, "epoch", epoch);
    zp_event_int(&ev, "hits", hits);
    zp_event_int(&ev, "misses", misses);
    deliver(&ev);
    st->name = "trainer";
    for (int s = 0; s < ZP_SPLITS; s++) {
        zp_event_record_at(st, &ev, ZP_REC_EPOCH_END, T0 + t - 0.05 + 0.05 * s);
        zp_event_str(&ev, "split", zp_dataset_split_name(s));
        zp_event_int(&ev, "epoch", epoch);
        zp_event_num(&ev, "seconds", seconds);
        deliver(&ev);
    }
}

/* The user's run of issue 37: epoch 1 read through a slow loader (busy 99%,
 * the trainer waiting 30%) for 20 s; epochs 2-4 from the warm cache (the
 * loader idle, the trainer waiting 1%) for 10 s each. Over the whole run the
 * loader was busy 41% and the trainer waited 12.6%: "no data stage was busy
 * half of its time", which named nothing. */
static void a_cold_then_warm_run(void)
{
    for (int t = 0; t <= 50; t++) { /* the windows that end at T0 + 1 ... T0 + 50, and start-up */
        int cold = t <= 20;
        window("loader", 0, t, cold ? 0.99 : 0.02, cold ? 0.01 : 0.98);
        window("cache", 0, t, 0.05, 0.95);
        window("prefetch", 0, t, 0.05, cold ? 0.95 : 0.05);
        window("trainer", 0, t, cold ? 0.7 : 0.99, cold ? 0.3 : 0.01);
        if (t == 20)
            epoch_ended(0, t, 0, 3000, 20);
        else if (t > 20 && t % 10 == 0)
            epoch_ended(t / 10 - 2, t, 3000, 0, 10);
    }
    /* the whole run: 6.3 s of waiting in 50 s of epochs; the loader busy 20.4 s
     * of 50.5, as its final record says after the last epoch (in no phase) */
    window("loader", 0, 50.5, 20.4 / 50.5, 0);
    timer("trainer", "io", (const int64_t[]){6000000000, 300000000}, 2);
    timer("trainer", "epoch", (const int64_t[]){20000000000, 30000000000}, 2);
}

static void a_cold_then_warm_run_is_judged_phase_by_phase(void **state)
{
    (void)state;
    a_cold_then_warm_run();
    char *text, *json;
    assert_int_equal(report(&text, &json), 0);
    assert_non_null(strstr(text, "The trainer waited for data 12.6% of its time.\n"
                                 "Epoch 1 (cold): The loaders are the bottleneck: the trainer waited "
                                 "for data 30.0% of its time while the 1 loader(s) were busy 99% of "
                                 "theirs; warm the cache first (zeus-pipe warm CONFIG)"));
    assert_non_null(strstr(text, " Epochs 2-4 (warm): The trainer is the bottleneck: it waited for "
                                 "data 1.0% of its time"));
    assert_null(strstr(text, "hand-off"));
    /* the bottleneck is the cold phase's: the trainer waited 6 s there, 0.3 s in the warm one */
    assert_non_null(strstr(json, "\"bottleneck\":{\"stage\":\"loader\",\"advice\":\"Epoch 1 (cold): "));
    assert_non_null(strstr(json, "\"phases\":[{\"first_epoch\":1,\"last_epoch\":1,\"kind\":\"cold\","
                                 "\"seconds\":20,\"trainer_wait_share\":0.3,\"busy\":{\"loader\":0.99,"
                                 "\"cache\":0.05,\"prefetch\":0.05},\"loaders\":1,\"stage\":\"loader\","));
    assert_non_null(strstr(json, "{\"first_epoch\":2,\"last_epoch\":4,\"kind\":\"warm\","
                                 "\"seconds\":30,\"trainer_wait_share\":0.01,\"busy\":{\"loader\":0.02,"
                                 "\"cache\":0.05,\"prefetch\":0.05},\"loaders\":1,\"stage\":\"trainer\","
                                 "\"advice\":\"The trainer is the bottleneck"));
    /* the page says the same, phase by phase */
    char *html;
    size_t n;
    FILE *f = open_memstream(&html, &n);
    assert_int_equal(zp_report_html(dir, f, err, sizeof err), 0);
    fclose(f);
    const char *said = strstr(text, "Epoch 1 (cold): ");
    char advice[1600];
    snprintf(advice, sizeof advice, "%.*s", (int)strcspn(said, "\n"), said);
    assert_non_null(strstr(html, advice));
    free(html);
    free(text);
    free(json);
}

/* A short warm phase gets the rule's "too short" sentence, and the phase in
 * which the trainer waited the most is the one named. */
static void a_phase_too_short_for_advice_says_so(void **state)
{
    (void)state;
    for (int t = 0; t <= 25; t++) {
        window("loader", 0, t, t <= 20 ? 0.99 : 0.02, 0);
        window("trainer", 0, t, 0, t <= 20 ? 0.3 : 0.01);
        if (t == 20)
            epoch_ended(0, t, 0, 3000, 20);
        if (t == 25)
            epoch_ended(1, t, 3000, 0, 5);
    }
    char *text, *json;
    assert_int_equal(report(&text, &json), 0);
    assert_non_null(strstr(text, "Epoch 2 (warm): The trainer waited for data 1.0% of its time over "
                                 "5.0 s of epochs: too short a run"));
    assert_non_null(strstr(json, "\"bottleneck\":{\"stage\":\"loader\","));
    free(text);
    free(json);
}

static void the_summary_has_the_last_and_the_best_epoch(void **state)
{
    (void)state;
    a_run();
    zp_run_summary_t s;
    assert_int_equal(zp_report_summary(dir, &s, err, sizeof err), 0);
    assert_int_equal(s.epochs, 2);
    assert_float_equal(s.train_loss, 0.5, 1e-12);
    assert_float_equal(s.test_loss, 0.45, 1e-12);
    assert_float_equal(s.test_acc, 0.84, 1e-12);
    assert_float_equal(s.best_test_acc, 0.86, 1e-12);
    assert_float_equal(s.seconds, 4.5, 1e-12);
}

static void a_missing_events_file_is_enoent_naming_it(void **state)
{
    (void)state;
    char *text, *json;
    assert_int_equal(report(&text, &json), -ENOENT);
    assert_non_null(strstr(err, path));
    free(text);
    free(json);
    zp_run_summary_t s;
    assert_int_equal(zp_report_summary(dir, &s, err, sizeof err), -ENOENT);
    assert_int_equal(s.epochs, 0);
    assert_true(s.test_acc == -1 && s.best_test_acc == -1);
    /* a report that cannot be made leaves the previous one as it was */
    char old[PATH_MAX + 32], tmp[PATH_MAX + 32];
    snprintf(old, sizeof old, "%s/report.txt", dir);
    FILE *f = fopen(old, "w");
    assert_non_null(f);
    fputs("the previous report\n", f);
    fclose(f);
    assert_int_equal(zp_report_write(dir, NULL), -ENOENT);
    char buf[64] = "";
    f = fopen(old, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof buf, f));
    fclose(f);
    assert_string_equal(buf, "the previous report\n");
    snprintf(tmp, sizeof tmp, "%s/report.txt.tmp", dir);
    assert_int_not_equal(access(tmp, F_OK), 0);
    unlink(old);
}

static void an_empty_events_file_is_a_run_without_epochs(void **state)
{
    (void)state;
    fclose(fopen(path, "wb"));
    char *text, *json;
    assert_int_equal(report(&text, &json), 0);
    assert_non_null(strstr(text, "No trainer timings yet: the run has not finished an epoch."));
    assert_non_null(strstr(json, "\"epochs\":[],"));
    free(text);
    free(json);
    zp_run_summary_t s;
    assert_int_equal(zp_report_summary(dir, &s, err, sizeof err), 0);
    assert_int_equal(s.epochs, 0);
    assert_true(s.train_loss == -1 && s.best_test_acc == -1);
}

static void a_file_of_no_events_is_refused(void **state)
{
    (void)state;
    FILE *f = fopen(path, "wb");
    fputs("{\"this\": \"is json, not msgpack\"}\n", f);
    fclose(f);
    char *text, *json;
    assert_int_equal(report(&text, &json), ZP_EPROTO);
    assert_non_null(strstr(err, "not a stream of msgpack records: no zeus-pipe event in its 33 bytes"));
    free(text);
    free(json);
}

static void torn_garbled_and_unknown_records_are_skipped_and_counted(void **state)
{
    (void)state;
    epoch_end(0, "train", 0.9, 0.7, 2.5);
    FILE *f = fopen(path, "ab");
    fputs("GARBAGE", f); /* glued to the end of the first record: that span is not one object */
    fclose(f);
    epoch_end(1, "train", 0.5, 0.85, 2.0);
    zp_event_t ev;
    begin(&ev, "martian", 0, "stats", 1); /* a stage this version does not know */
    zp_event_int(&ev, "total_items", 1);
    deliver(&ev);
    epoch_end(2, "train", 0.4, 0.9, 2.0);
    f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    long whole = ftell(f);
    fclose(f);
    assert_int_equal(truncate(path, whole - 5), 0); /* the last record torn by a kill */
    char *text, *json;
    assert_int_equal(report(&text, &json), 0);
    assert_null(strstr(text, "\n    1  ")); /* the garbled one is gone */
    assert_non_null(strstr(text, "\n    2      0.5000"));
    assert_null(strstr(text, "\n    3  "));
    assert_non_null(strstr(text, "(1 records of events.msgpack were not understood and skipped)"));
    assert_non_null(strstr(text, "torn or garbled records); this report is of the rest)"));
    assert_non_null(strstr(json, "\"skipped_records\":2"));
    free(text);
    free(json);
    zp_run_summary_t s;
    assert_int_equal(zp_report_summary(dir, &s, err, sizeof err), 0);
    assert_int_equal(s.epochs, 1);
    assert_float_equal(s.train_loss, 0.5, 1e-12);
}

/* Appends the first 16 bytes of the file's first record (a record's start),
 * then `n` bytes of `tail`: a record msgpack-c cannot unpack. */
static void append_record_start_and(const uint8_t *tail, size_t n)
{
    uint8_t start[16];
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(start, 1, sizeof start, f), sizeof start);
    fclose(f);
    assert_non_null(f = fopen(path, "ab"));
    fwrite(start, 1, sizeof start, f);
    fwrite(tail, 1, n, f);
    fclose(f);
}

/* msgpack-c answers "no memory" for nesting deeper than 32 and for a length
 * no allocation can hold: such a record is skipped like a torn one, and
 * the report is of the others (it was lost whole, "out of memory"). */
static void a_record_msgpack_has_no_memory_for_is_skipped_and_counted(void **state)
{
    (void)state;
    epoch_end(0, "train", 0.9, 0.7, 2.5);
    uint8_t deep[34];
    memset(deep, 0x91, 33); /* 33 arrays of one, nested, then nil */
    deep[33] = 0xc0;
    append_record_start_and(deep, sizeof deep);
    epoch_end(1, "train", 0.5, 0.85, 2.0);
    const uint8_t huge_map[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
    append_record_start_and(huge_map, sizeof huge_map);
    const uint8_t big_array[] = {0xdd, 0x10, 0x00, 0x00, 0x00, 0xc0, 0xc0}; /* 2^28 elements */
    append_record_start_and(big_array, sizeof big_array);
    const uint8_t long_str[] = {0xdb, 0x7f, 0xff, 0xff, 0xff, 'a'};
    append_record_start_and(long_str, sizeof long_str);
    epoch_end(2, "train", 0.4, 0.9, 2.0);
    char *text, *json;
    assert_int_equal(report(&text, &json), 0);
    assert_non_null(strstr(text, "\n    1      0.9000"));
    assert_non_null(strstr(text, "\n    2      0.5000"));
    assert_non_null(strstr(text, "\n    3      0.4000"));
    assert_non_null(strstr(json, "\"skipped_records\":4"));
    free(text);
    free(json);
}

/* The page and the text once computed the loaders' busy share each their
 * own way (an instance with no uptime yet: busy 0 over 1 s in the text,
 * left out of the page), so they could name the bottleneck differently.
 * Both now say the one sentence of the run model. */
static void the_text_and_the_page_name_the_same_bottleneck(void **state)
{
    (void)state;
    a_run();
    stats("loader", 2, 0, 0, 0); /* a third loader, just started */
    char *text, *json, *html;
    assert_int_equal(report(&text, &json), 0);
    size_t n;
    FILE *f = open_memstream(&html, &n);
    assert_int_equal(zp_report_html(dir, f, err, sizeof err), 0);
    fclose(f);
    const char *said = strstr(text, "The loaders are the bottleneck");
    assert_non_null(said);
    assert_non_null(strstr(said, "the 3 loader(s) were busy 60% of theirs"));
    char sentence[600];
    snprintf(sentence, sizeof sentence, "%.*s", (int)strcspn(said, "\n"), said);
    assert_non_null(strstr(html, sentence));
    free(text);
    free(json);
    free(html);
}

static void report_write_leaves_text_and_json_in_the_run(void **state)
{
    (void)state;
    a_run();
    assert_int_equal(zp_report_write(dir, NULL), 0);
    char p[160], buf[8192];
    snprintf(p, sizeof p, "%s/report.json", dir);
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    assert_non_null(strstr(buf, "\"bottleneck\":{\"stage\":\"loader\""));
    assert_int_equal(buf[n - 1], '\n');
    snprintf(p, sizeof p, "%s/report.txt", dir);
    assert_int_equal(access(p, R_OK), 0);
}

int main(void)
{
    zp_log_set_level(ZP_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_trainer_that_waits_under_a_tenth_is_the_bottleneck),
        cmocka_unit_test(a_run_too_short_for_its_shares_gets_no_advice),
        cmocka_unit_test(the_busiest_data_stage_is_named_with_its_advice),
        cmocka_unit_test(waiting_with_no_busy_stage_advises_no_setting_and_no_timings_are_unknown),
        cmocka_unit_test(busy_loaders_of_a_cold_phase_are_advised_to_warm_the_cache_first),
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(the_report_of_a_run_has_its_epochs_stages_and_bottleneck),
        T(a_cold_then_warm_run_is_judged_phase_by_phase),
        T(a_phase_too_short_for_advice_says_so),
        T(the_summary_has_the_last_and_the_best_epoch),
        T(a_missing_events_file_is_enoent_naming_it),
        T(an_empty_events_file_is_a_run_without_epochs),
        T(a_file_of_no_events_is_refused),
        T(torn_garbled_and_unknown_records_are_skipped_and_counted),
        T(a_record_msgpack_has_no_memory_for_is_skipped_and_counted),
        T(the_text_and_the_page_name_the_same_bottleneck),
        T(report_write_leaves_text_and_json_in_the_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

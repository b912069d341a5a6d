/* Unit tests of the trace (pipeline/report/trace.h) on synthetic events.msgpack
 * bytes, packed as the stages pack them: timer samples become complete
 * events in time order whatever order their records came in, stats records
 * counters; past max_events the earliest and the latest halves are kept and
 * the rest is counted; strings from the events are escaped; records without
 * starts and torn bytes are counted, never drawn. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/report/trace.h"
#include "schemas/msg.h"

static msgpack_sbuffer sb;
static msgpack_packer pk;

static void str(const char *s) { msgpack_pack_str_with_body(&pk, s, strlen(s)); }

/* The head of a record of `stage`[instance] sent at `time` (seconds), and n more fields. */
static void head(const char *kind, const char *stage, int instance, double time, int n)
{
    zp_msg_pack_begin(&pk, ZP_MSG_EVENT, 1);
    str("body");
    msgpack_pack_map(&pk, (uint32_t)(5 + n));
    str("kind"), str(kind);
    str("stage"), str(stage);
    str("instance"), msgpack_pack_int64(&pk, instance);
    str("pid"), msgpack_pack_int64(&pk, 4242);
    str("time"), msgpack_pack_double(&pk, time);
}

static void ints(const char *key, const int64_t *v, int n)
{
    str(key);
    msgpack_pack_array(&pk, (uint32_t)n);
    for (int i = 0; i < n; i++)
        msgpack_pack_int64(&pk, v[i]);
}

/* n samples of `region`, sample i starting start_us[i] before `time`. */
static void timer(const char *stage, int instance, double time, const char *region,
                  const int64_t *ns, const int64_t *start_us, int n)
{
    head("timer", stage, instance, time, start_us ? 3 : 2);
    str("region"), str(region);
    ints("ns", ns, n);
    if (start_us)
        ints("start", start_us, n);
}

static void stats(const char *stage, int instance, double time, int64_t queue)
{
    head("stats", stage, instance, time, 3);
    str("queue"), msgpack_pack_int64(&pk, queue);
    str("items_per_s"), msgpack_pack_double(&pk, 100);
    str("busy"), msgpack_pack_double(&pk, 0.5);
}

static char *out;
static size_t outlen;
static zp_trace_info_t info;

static void trace(int64_t max)
{
    free(out);
    FILE *f = open_memstream(&out, &outlen);
    assert_non_null(f);
    assert_int_equal(zp_trace(sb.data, sb.size, "run \"x\"", max, f, &info), 0);
    fclose(f);
}

static int count(const char *needle)
{
    int n = 0;
    for (const char *p = out; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

/* The "ts" of every timed and counter event, in the order written; their count. */
static int timestamps(long long *ts, int max)
{
    int n = 0;
    for (const char *p = out; (p = strstr(p, "\n{\"ph\":\"")) && n < max; p++) {
        if (p[8] != 'X' && p[8] != 'C')
            continue;
        const char *t = strstr(p, "\"ts\":");
        assert_non_null(t);
        ts[n++] = atoll(t + 5);
    }
    return n;
}

static int setup(void **state)
{
    (void)state;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    msgpack_sbuffer_destroy(&sb);
    free(out);
    out = NULL;
    return 0;
}

static void samples_become_complete_events_in_time_order(void **state)
{
    (void)state;
    int64_t ns[] = {1500, 2000000}, later[] = {1000, 500}, earlier[] = {500000, 250000};
    timer("trainer", 0, 100.0, "forward", ns, later, 2); /* at 99.999 s and 99.9995 s */
    timer("loader", 1, 99.0, "read", ns, earlier, 2);    /* at 98.5 s and 98.75 s */
    stats("prefetch", 0, 98.0, 7);
    trace(1000);
    assert_int_equal(info.events, 4 + 3);
    assert_int_equal(info.processes, 3);
    assert_int_equal(count("{\"ph\":\"X\""), 4);
    assert_int_equal(count("{\"ph\":\"C\""), 3);
    assert_int_equal(count("\"name\":\"process_name\""), 3 + 1);
    assert_non_null(strstr(out, "{\"name\":\"trainer[0]\",\"os_pid\":4242}"));
    assert_non_null(strstr(out, "{\"name\":\"loader[1]\",\"os_pid\":4242}"));
    assert_non_null(strstr(out, "\"name\":\"queue\",\"pid\":3,\"tid\":0,\"ts\":0,\"args\":{\"queue\":7}"));
    assert_non_null(strstr(out, "\"dur\":1.500}"));
    assert_non_null(strstr(out, "\"dur\":2000.000}"));
    assert_int_equal(count("\"name\":\"thread_name\""), 2); /* forward, read */
    long long ts[16];
    int n = timestamps(ts, 16);
    assert_int_equal(n, 7);
    /* microseconds from the first event, the counters at 98 s */
    long long want[] = {0, 0, 0, 500000, 750000, 1999000, 1999500};
    for (int i = 0; i < n; i++)
        assert_int_equal(ts[i], want[i]);
    assert_non_null(strstr(out, "\"origin_unix_us\":98000000,"));
    assert_non_null(strstr(out, "\"run\":\"run \\\"x\\\"\""));
}

static void past_max_events_the_first_and_last_windows_are_kept(void **state)
{
    (void)state;
    enum { N = 1000, CHUNK = 100 };
    int64_t ns[CHUNK], start[CHUNK];
    for (int i = 0; i < CHUNK; i++)
        ns[i] = 10;
    /* chunk c holds samples c*100 .. c*100+99 us after 0; sent middle first, then the ends */
    int order[] = {5, 4, 6, 9, 0, 3, 7, 1, 8, 2};
    for (int k = 0; k < N / CHUNK; k++) {
        int c = order[k];
        double time = 10.0; /* every record sent at 10 s; sample j starts at c*100+j us */
        for (int j = 0; j < CHUNK; j++)
            start[j] = 10000000 - (c * CHUNK + j);
        timer("prefetch", 0, time, "collate", ns, start, CHUNK);
    }
    trace(100);
    assert_int_equal(info.events, 100);
    assert_int_equal(info.left_out, 900);
    assert_int_equal(count("{\"ph\":\"X\""), 100);
    assert_non_null(strstr(out, "\"events_left_out\":900,"));
    assert_int_equal(count("trace truncated: 900 events left out"), 1);
    long long ts[128];
    int n = timestamps(ts, 128);
    assert_int_equal(n, 100);
    for (int i = 0; i < 50; i++) {
        assert_int_equal(ts[i], i);              /* the earliest 50 */
        assert_int_equal(ts[50 + i], 950 + i);   /* the latest 50 */
    }
    /* the instant sits between the two windows */
    const char *gap = strstr(out, "trace truncated"), *last_early = strstr(out, "\"ts\":49,");
    assert_true(last_early && gap > last_early && !strstr(gap, "\"ts\":49,"));
    trace(2000); /* under the bound: all of them */
    assert_int_equal(info.events, N);
    assert_int_equal(info.left_out, 0);
    assert_int_equal(count("trace truncated"), 0);
}

static void strings_from_the_events_are_escaped(void **state)
{
    (void)state;
    int64_t ns[] = {1}, start[] = {0};
    timer("tr\"ai\\n\ner</script>\xff", 0, 1.0, "forward", ns, start, 1);
    timer("trainer", 0, 1.0, "no\"such region", ns, start, 1); /* not a region: counted */
    trace(1000);
    assert_non_null(strstr(out, "\"tr\\\"ai\\\\n\\u000aer</script>\\ufffd[0]\""));
    assert_null(strstr(out, "\xff"));
    assert_null(strstr(out, "no\"such"));
    assert_null(strstr(out, "such region"));
    assert_non_null(strstr(out, "\"unreadable\":1}"));
    assert_int_equal(info.events, 1);
}

static void samples_without_start_and_torn_bytes_are_counted_not_drawn(void **state)
{
    (void)state;
    int64_t ns[] = {5, 6, 7}, start[] = {3, 2, 1};
    msgpack_sbuffer_write(&sb, "\x81\xa1", 2);      /* torn */
    timer("trainer", 0, 1.0, "batch", ns, NULL, 3); /* an older version's record */
    timer("trainer", 0, 2.0, "batch", ns, start, 3);
    int64_t neg[] = {-1};
    timer("trainer", 0, 2.0, "io", neg, start, 1);  /* a negative duration: never drawn */
    trace(1000);
    assert_int_equal(info.events, 3);
    assert_int_equal(info.records, 3);
    assert_non_null(strstr(out, "\"samples_without_start\":3,"));
    assert_non_null(strstr(out, "\"skipped_records\":1,"));
    assert_non_null(strstr(out, "\"unreadable\":1}"));
    assert_null(strstr(out, "\"dur\":-"));
}

/* One "ring" record of n messages, message i at_us[i] before `time`. */
static void ring(double time, const int64_t *at_us, const int64_t *slot, const int64_t *gen,
                 const int64_t *is_free, int n)
{
    head("ring", "prefetch", 0, time, 5);
    ints("at", at_us, n);
    ints("slot", slot, n);
    ints("gen", gen, n);
    ints("free", is_free, n);
    str("in_use"), msgpack_pack_int64(&pk, 0);
}

static void ring_messages_become_instants_holds_and_a_slot_count(void **state)
{
    (void)state;
    /* slot 0 held from 1000 us to 400 us before 2.0 s; slot 1's FREE of generation 7 meets
     * a BATCH of generation 6 (never drawn as a hold); slot 1's gen 8 freed a record later */
    int64_t at[] = {1000, 900, 400, 300, 200}, slot[] = {0, 1, 0, 1, 1}, gen[] = {3, 6, 3, 7, 8},
            is_free[] = {0, 0, 1, 1, 0};
    ring(2.0, at, slot, gen, is_free, 5);
    int64_t at2[] = {50}, slot2[] = {1}, gen2[] = {8}, free2[] = {1};
    ring(2.5, at2, slot2, gen2, free2, 1);
    trace(1000);
    assert_int_equal(count("\"name\":\"BATCH\""), 3);
    assert_int_equal(count("\"name\":\"FREE\""), 3);
    assert_int_equal(count("\"name\":\"held\""), 2);
    assert_non_null(strstr(out, "\"tid\":1000,\"ts\":0,\"dur\":600.000}")); /* slot 0: 1000 -> 400 */
    assert_non_null(strstr(out, "\"tid\":1001,\"ts\":800,\"dur\":500150.000}"));
    assert_non_null(strstr(out, "slot 0: held by the trainer"));
    assert_non_null(strstr(out, "slot 1: held by the trainer"));
    /* the count after each message: 1 2 1 0 1 0 */
    assert_int_equal(count("\"ring_slots_in_use\":2}"), 1);
    assert_int_equal(count("\"ring_slots_in_use\":0}"), 2);
    assert_int_equal(info.events, 6 + 6 + 2); /* instants, counts, holds */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(samples_become_complete_events_in_time_order, setup, teardown),
        cmocka_unit_test_setup_teardown(past_max_events_the_first_and_last_windows_are_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(strings_from_the_events_are_escaped, setup, teardown),
        cmocka_unit_test_setup_teardown(samples_without_start_and_torn_bytes_are_counted_not_drawn, setup, teardown),
        cmocka_unit_test_setup_teardown(ring_messages_become_instants_holds_and_a_slot_count, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

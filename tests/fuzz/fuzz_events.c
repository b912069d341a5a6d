/* libFuzzer target: a run's events.msgpack, as its two readers see it —
 * the record scan (pipeline/report/eventlog.c) into the run model (model.h),
 * rendered as the text and JSON report and the HTML page, and the trace's
 * own pass. Any input: a model (maybe of no records) whose epochs are the
 * run's, in order, or a refusal that says why; never a crash, a sanitizer
 * report, or an allocation past libFuzzer's -malloc_limit_mb. The seed
 * corpus is a real run's events.msgpack (tests/fuzz/seeds/events).
 * Build and run: scripts/fuzz.sh [SECONDS]. */
#include "tests/fuzz/fuzz_model.h"
#include "pipeline/report/eventlog.h"
#include "pipeline/report/trace.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count_one(void *ctx, const msgpack_object *record)
{
    (void)record;
    ++*(int64_t *)ctx;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fuzz_rundir();
    zp_eventlog_count_t count = {0};
    int64_t seen = 0;
    if (zp_eventlog_scan((const char *)data, size, count_one, &seen, &count) || seen != count.records ||
        count.skipped_bytes < 0 || (size_t)count.skipped_bytes > size)
        abort(); /* the scan fails only with its callback, and counts what it skipped */
    fuzz_put("events.msgpack", data, size);
    fuzz_model(dir);
    zp_trace_info_t info;
    if (zp_trace((const char *)data, size, dir, 1000, fuzz_sink(), &info) || info.events > 1000)
        abort(); /* only ZP_ENOMEM fails, and the trace keeps max_events */
    return 0;
}

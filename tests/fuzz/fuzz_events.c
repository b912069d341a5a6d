/* libFuzzer target: a run's events.msgpack, as its two readers see it —
 * the record scan (pipeline/report/events.c) into the run model (model.h),
 * rendered as the text and JSON report and the HTML page, and the trace's
 * own pass. Any input: a model (maybe of no records) whose epochs are the
 * run's, in order, or a refusal that says why; never a crash, a sanitizer
 * report, or an allocation past libFuzzer's -malloc_limit_mb. The seed
 * corpus is a real run's events.msgpack (tests/fuzz/seeds/events).
 * Build and run: scripts/fuzz.sh [SECONDS]. */
#include "tests/fuzz/fuzz_rundir.h"
#include "pipeline/report/events.h"
#include "pipeline/report/report.h"
#include "pipeline/report/report_html.h"
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
    zp_events_count_t count = {0};
    int64_t seen = 0;
    if (zp_events_scan((const char *)data, size, count_one, &seen, &count) || seen != count.records ||
        count.skipped_bytes < 0 || (size_t)count.skipped_bytes > size)
        abort(); /* the scan fails only with its callback, and counts what it skipped */
    fuzz_put("events.msgpack", data, size);
    char err[4200] = "";
    zp_model_t *m;
    fuzz_said_why(zp_model_load(&m, dir, err, sizeof err), err);
    for (int64_t i = 0; m && i < m->nepochs; i++)
        if (m->epoch[i].epoch < (i ? m->epoch[i - 1].epoch + 1 : 0) ||
            m->epoch[i].epoch >= ZP_MODEL_EPOCH_MAX)
            abort(); /* the epochs held are the run's, each once, in order */
    if (m) {
        zp_report_text(m, fuzz_sink());
        zp_report_json(m, fuzz_sink());
        zp_report_html_page(m, fuzz_sink());
    }
    zp_model_destroy(&m);
    zp_trace_info_t info;
    if (zp_trace((const char *)data, size, dir, 1000, fuzz_sink(), &info) || info.events > 1000)
        abort(); /* only ZP_ENOMEM fails, and the trace keeps max_events */
    return 0;
}

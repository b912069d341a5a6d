/* libFuzzer target: the JSON-line files a run writes (metrics.jsonl,
 * stats.jsonl), as the line parser and the run model (model.h) read them
 * when events.msgpack is missing, rendered as the text and JSON report and
 * the HTML page. The input's first half is metrics.jsonl, the
 * second stats.jsonl. The seed corpus is a real run's two files, glued
 * (tests/fuzz/seeds/jsonl). Build and run: scripts/fuzz.sh [SECONDS]. */
#include "tests/fuzz/fuzz_rundir.h"
#include "pipeline/report/report.h"
#include "pipeline/report/report_html.h"
#include "pipeline/report/runscan.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fuzz_rundir();
    size_t half = size / 2;
    fuzz_put("events.msgpack", NULL, 0);
    fuzz_put("metrics.jsonl", data, half);
    fuzz_put("stats.jsonl", data + half, size - half);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    for (size_t at = 0; at < size;) { /* each line alone, as the scan hands them over */
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t len = nl ? (size_t)(nl - data) - at : size - at;
        sb.size = 0;
        zp_runscan_json_line((const char *)data + at, len, &sb);
        at += len + 1;
    }
    msgpack_sbuffer_destroy(&sb);
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
    return 0;
}

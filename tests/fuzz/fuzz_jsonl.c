/* libFuzzer target: the JSON-line files a run writes (metrics.jsonl,
 * stats.jsonl), as the line parser and the run model (model.h) read them
 * when events.msgpack is missing, rendered as the text and JSON report and
 * the HTML page. The input's first half is metrics.jsonl, the
 * second stats.jsonl. The seed corpus is a real run's two files, glued
 * (tests/fuzz/seeds/jsonl). Build and run: scripts/fuzz.sh [SECONDS]. */
#include "tests/fuzz/fuzz_model.h"
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
    fuzz_model(dir);
    return 0;
}

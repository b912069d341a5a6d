/* fuzz_model.h — what the two run-file fuzz targets (events.msgpack, the
 * jsonl files) check of the run model made from their input: it loads or
 * says why, its epochs are the run's, each once, in order, and every
 * renderer (text, JSON, HTML) takes it. */
#ifndef ZP_FUZZ_MODEL_H
#define ZP_FUZZ_MODEL_H

#include "tests/fuzz/fuzz_rundir.h"
#include "pipeline/report/model.h"
#include "pipeline/report/report.h"
#include "pipeline/report/report_html.h"

#include <stdint.h>

static void fuzz_model(const char *dir)
{
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
}

#endif

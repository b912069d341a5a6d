/* report_autoscale.c — the report's section on loader.autoscale; see
 * report_autoscale.h. */
#include "pipeline/report_autoscale.h"
#include "pipeline/json.h"
#include "schemas/errors.h"
#include "schemas/records.h"

#include <math.h>
#include <stdlib.h>

int zp_autoscale_log_add(zp_autoscale_log_t *l, double time, const msgpack_object *body)
{
    if (l->n == ZP_REPORT_AUTOSCALE_MAX) {
        l->left_out++;
        return 0;
    }
    if (!l->row && !(l->row = malloc(ZP_REPORT_AUTOSCALE_MAX * sizeof *l->row)))
        return ZP_ENOMEM;
    zp_rec_autoscale_t x;
    zp_record_decode(ZP_REC_AUTOSCALE, body, &x);
    zp_autoscale_row_t *r = &l->row[l->n++];
    *r = (zp_autoscale_row_t){time, (int)x.change, (int)x.workers_before, (int)x.workers_after,
                              x.wait, x.busy, ""};
    snprintf(r->reason, sizeof r->reason, "%.*s", (int)sizeof r->reason - 1, x.reason);
    return 0;
}

/* "45%", or "-" for a figure that was unknown */
static const char *share(char *buf, size_t len, double v)
{
    if (v < 0 || !isfinite(v))
        return "-";
    snprintf(buf, len, "%.0f%%", 100 * v);
    return buf;
}

void zp_autoscale_log_text(const zp_autoscale_log_t *l, double t0, FILE *out)
{
    if (!l->n)
        return;
    fprintf(out, "\nLoader autoscale (%d decision%s):\n  %8s  %7s  %5s  %5s  %s\n", l->n,
            l->n == 1 ? "" : "s", "AT", "LOADERS", "WAIT", "BUSY", "WHY");
    for (int i = 0; i < l->n; i++) {
        const zp_autoscale_row_t *r = &l->row[i];
        char at[16], loaders[16], w[8], b[8];
        snprintf(at, sizeof at, "%.1f s", r->time - t0);
        snprintf(loaders, sizeof loaders, "%d -> %d", r->before, r->after);
        fprintf(out, "  %8s  %7s  %5s  %5s  %s\n", at, loaders, share(w, sizeof w, r->wait),
                share(b, sizeof b, r->busy), r->reason);
    }
    if (l->left_out)
        fprintf(out, "  (%lld more left out)\n", (long long)l->left_out);
}

/* ,"key":v, or null for an unknown share */
static void num(FILE *out, const char *key, double v)
{
    if (v < 0 || !isfinite(v))
        fprintf(out, ",\"%s\":null", key);
    else
        fprintf(out, ",\"%s\":%.4f", key, v);
}

void zp_autoscale_log_json(const zp_autoscale_log_t *l, double t0, FILE *out)
{
    fprintf(out, "\"autoscale\":[");
    for (int i = 0; i < l->n; i++) {
        const zp_autoscale_row_t *r = &l->row[i];
        fprintf(out, "%s{\"at_s\":%.3f,\"change\":%d,\"workers_before\":%d,\"workers_after\":%d",
                i ? "," : "", r->time - t0, r->change, r->before, r->after);
        num(out, "wait", r->wait);
        num(out, "busy", r->busy);
        fprintf(out, ",\"reason\":");
        zp_json_str(out, r->reason); /* from a record: bytes off a socket */
        fputc('}', out);
    }
    fprintf(out, "],");
}

void zp_autoscale_log_free(zp_autoscale_log_t *l)
{
    free(l->row);
    *l = (zp_autoscale_log_t){0};
}

/* report_autoscale.c — the report's section on loader.autoscale; see
 * report_autoscale.h. */
#include "pipeline/report/report_autoscale.h"
#include "pipeline/report/escape.h"
#include "pipeline/base/json.h"
#include "schemas/errors.h"
#include "schemas/records.h"

#include <math.h>
#include <stdlib.h>

int zp_report_autoscale_add(zp_report_autoscale_t *l, const msgpack_object *body)
{
    if (l->n == ZP_REPORT_AUTOSCALE_MAX) {
        l->left_out++;
        return 0;
    }
    if (!l->row && !(l->row = malloc(ZP_REPORT_AUTOSCALE_MAX * sizeof *l->row)))
        return ZP_ENOMEM;
    zp_rec_head_t h;
    zp_rec_autoscale_t x;
    zp_records_head(body, &h);
    zp_records_decode(ZP_REC_AUTOSCALE, body, &x);
    zp_report_autoscale_row_t *r = &l->row[l->n++];
    *r = (zp_report_autoscale_row_t){h.time, h.instance, (int)x.change, (int)x.workers_before,
                              (int)x.workers_after, x.wait, x.busy, ""};
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

/* 1 when decisions came from more than one node (a Slurm run) */
static int nodes(const zp_report_autoscale_t *l)
{
    for (int i = 1; i < l->n; i++)
        if (l->row[i].node != l->row[0].node)
            return 1;
    return l->n && l->row[0].node != 0;
}

void zp_report_autoscale_text(const zp_report_autoscale_t *l, double t0, FILE *out)
{
    if (!l->n)
        return;
    int many = nodes(l);
    fprintf(out, "\nLoader autoscale (%d decision%s):\n  %8s  %s%7s  %5s  %5s  %s\n", l->n,
            l->n == 1 ? "" : "s", "AT", many ? "NODE OF  " : "", "LOADERS", "WAIT", "BUSY", "WHY");
    for (int i = 0; i < l->n; i++) {
        const zp_report_autoscale_row_t *r = &l->row[i];
        char at[16], node[24] = "", loaders[16], w[8], b[8];
        snprintf(at, sizeof at, isfinite(r->time - t0) ? "%.1f s" : "?", r->time - t0);
        if (many)
            snprintf(node, sizeof node, "rank %-3lld ", (long long)r->node);
        snprintf(loaders, sizeof loaders, "%d -> %d", r->before, r->after);
        fprintf(out, "  %8s  %s%7s  %5s  %5s  %s\n", at, node, loaders, share(w, sizeof w, r->wait),
                share(b, sizeof b, r->busy), r->reason);
    }
    if (l->left_out)
        fprintf(out, "  (%lld more left out)\n", (long long)l->left_out);
}

/* "key":v, or null for an unknown share (negative) or a figure that is no
 * number; the first of an object without its leading comma */
static void num(FILE *out, const char *key, double v, int first)
{
    if ((v < 0 && !first) || !isfinite(v))
        fprintf(out, "%s\"%s\":null", first ? "" : ",", key);
    else
        fprintf(out, "%s\"%s\":%.4f", first ? "" : ",", key, v);
}

void zp_report_autoscale_html(const zp_report_autoscale_t *l, double t0, FILE *out)
{
    if (!l->n)
        return;
    int many = nodes(l);
    fprintf(out, "<h2>Loader autoscale</h2>\n<table class=\"autoscale\"><tr><th>at</th>%s<th>loaders</th>"
                 "<th>trainer wait</th><th>loaders busy</th><th>why</th></tr>\n",
            many ? "<th>node of</th>" : "");
    for (int i = 0; i < l->n; i++) {
        const zp_report_autoscale_row_t *r = &l->row[i];
        char w[8], b[8];
        fprintf(out, isfinite(r->time - t0) ? "<tr><td>%.1f s</td>" : "<tr><td>?</td>", r->time - t0);
        if (many)
            fprintf(out, "<td>rank %lld</td>", (long long)r->node);
        fprintf(out, "<td>%d &rarr; %d</td><td>%s</td><td>%s</td><td>", r->before, r->after,
                share(w, sizeof w, r->wait), share(b, sizeof b, r->busy));
        zp_escape_html(out, r->reason); /* from a record: bytes off a socket */
        fputs("</td></tr>\n", out);
    }
    fputs("</table>\n", out);
    if (l->left_out)
        fprintf(out, "<p>(%lld more left out)</p>\n", (long long)l->left_out);
}

void zp_report_autoscale_json(const zp_report_autoscale_t *l, double t0, FILE *out)
{
    fprintf(out, "\"autoscale\":[");
    for (int i = 0; i < l->n; i++) {
        const zp_report_autoscale_row_t *r = &l->row[i];
        fprintf(out, "%s{", i ? "," : "");
        num(out, "at_s", r->time - t0, 1); /* a garbled time: null, not nan */
        fprintf(out, ",\"node\":%lld,\"change\":%d,\"workers_before\":%d,\"workers_after\":%d",
                (long long)r->node, r->change, r->before, r->after);
        num(out, "wait", r->wait, 0);
        num(out, "busy", r->busy, 0);
        fprintf(out, ",\"reason\":");
        zp_json_str(out, r->reason); /* from a record: bytes off a socket */
        fputc('}', out);
    }
    fprintf(out, "],");
}

void zp_report_autoscale_free(zp_report_autoscale_t *l)
{
    free(l->row);
    *l = (zp_report_autoscale_t){0};
}

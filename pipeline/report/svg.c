/* svg.c — line charts and bar charts as inline SVG (svg.h). */
#include "pipeline/report/svg.h"
#include "pipeline/report/escape.h"
#include "schemas/errors.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define W 640
#define H 280
#define LEFT 64
#define RIGHT 16
#define TOP 12
#define BOTTOM 44

static const char *const PALETTE[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
#define COLOURS (sizeof PALETTE / sizeof *PALETTE)

/* One bucket of a series as drawn. */
typedef struct {
    double x, y, lo, hi;
    int n;
} bucket_t;

/* The series' points, ZP_SVG_BUCKETS buckets at most, into b; their count. */
static int buckets(const zp_xy_t *xy, bucket_t *b)
{
    size_t n = xy ? xy->n : 0;
    int m = 0;
    if (n <= ZP_SVG_BUCKETS) {
        for (size_t i = 0; i < n; i++)
            if (isfinite(xy->x[i]) && isfinite(xy->y[i]))
                b[m++] = (bucket_t){xy->x[i], xy->y[i], xy->y[i], xy->y[i], 1};
        return m;
    }
    double x0 = xy->x[0], span = xy->x[n - 1] - x0;
    memset(b, 0, ZP_SVG_BUCKETS * sizeof *b);
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(xy->x[i]) || !isfinite(xy->y[i]))
            continue;
        /* clamped as a double: a point far outside the others' range is no int (nor is NaN) */
        double f = span > 0 ? (xy->x[i] - x0) / span * ZP_SVG_BUCKETS : 0;
        int k = !(f > 0) ? 0 : f >= ZP_SVG_BUCKETS ? ZP_SVG_BUCKETS - 1 : (int)f;
        bucket_t *e = &b[k];
        e->lo = e->n && e->lo < xy->y[i] ? e->lo : xy->y[i];
        e->hi = e->n && e->hi > xy->y[i] ? e->hi : xy->y[i];
        e->x += xy->x[i], e->y += xy->y[i], e->n++;
    }
    for (int k = 0; k < ZP_SVG_BUCKETS; k++)
        if (b[k].n)
            b[m++] = (bucket_t){b[k].x / b[k].n, b[k].y / b[k].n, b[k].lo, b[k].hi, b[k].n};
    return m;
}

/* A step of 1, 2 or 5 times a power of ten giving about 5 ticks over range. */
static double nice_step(double range)
{
    double raw = range / 5, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

typedef struct {
    double x0, x1, y0, y1;
} frame_t;

#define TICKS_MAX 20 /* nice_step gives about 5 */

static double px(const frame_t *f, double x) { return LEFT + (x - f->x0) / (f->x1 - f->x0) * (W - LEFT - RIGHT); }
static double py(const frame_t *f, double y) { return H - BOTTOM - (y - f->y0) / (f->y1 - f->y0) * (H - TOP - BOTTOM); }

static void tick_label(FILE *out, double v, int share)
{
    if (share)
        fprintf(out, "%.0f%%", 100 * v);
    else if (fabs(v) >= 1e6 || (fabs(v) < 1e-3 && v != 0))
        fprintf(out, "%.3g", v);
    else
        fprintf(out, "%.6g", fabs(v) < 1e-12 ? 0.0 : v);
}

static void axes(FILE *out, const frame_t *f, const zp_svg_plot_t *p)
{
    double ys = nice_step(f->y1 - f->y0), xs = nice_step(f->x1 - f->x0);
    /* ticks counted, not summed: a step a double cannot add would loop forever */
    double y = ceil(f->y0 / ys) * ys, x = ceil(f->x0 / xs) * xs;
    for (int i = 0; i < TICKS_MAX && y + i * ys <= f->y1 + ys * 1e-9; i++) {
        double v = y + i * ys;
        fprintf(out, "<line class=\"grid\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>"
                     "<text class=\"tick\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">", LEFT, W - RIGHT,
                py(f, v), py(f, v), LEFT - 4, py(f, v) + 4);
        tick_label(out, v, p->share);
        fputs("</text>\n", out);
    }
    for (int i = 0; i < TICKS_MAX && x + i * xs <= f->x1 + xs * 1e-9; i++) {
        double v = x + i * xs;
        fprintf(out, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/>"
                     "<text class=\"tick\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", px(f, v),
                px(f, v), TOP, H - BOTTOM, px(f, v), H - BOTTOM + 16);
        tick_label(out, v, 0);
        fputs("</text>\n", out);
    }
    fprintf(out, "<rect class=\"frame\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>\n", LEFT, TOP,
            W - LEFT - RIGHT, H - TOP - BOTTOM);
    fprintf(out, "<text class=\"label\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">", (LEFT + W - RIGHT) / 2, H - 6);
    zp_escape_html(out, p->xlabel);
    fprintf(out, "</text><text class=\"label\" transform=\"translate(14 %d) rotate(-90)\" "
                 "text-anchor=\"middle\">", (TOP + H - BOTTOM) / 2);
    zp_escape_html(out, p->ylabel);
    fputs("</text>\n", out);
}

/* The range of every series' buckets; 0 when there is no point. */
static int frame_of(bucket_t *const *b, const int *m, int n, int share, frame_t *f)
{
    int any = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < m[i]; k++) {
            const bucket_t *e = &b[i][k];
            if (!any)
                *f = (frame_t){e->x, e->x, e->lo, e->hi}, any = 1;
            f->x0 = fmin(f->x0, e->x), f->x1 = fmax(f->x1, e->x);
            f->y0 = fmin(f->y0, e->lo), f->y1 = fmax(f->y1, e->hi);
        }
    if (share)
        f->y0 = 0, f->y1 = 1;
    else if (f->y0 > 0 && f->y0 < 0.5 * f->y1)
        f->y0 = 0; /* near zero: from zero */
    /* a range too narrow for its magnitude (a constant series, to the last
     * bits) is widened, so that every tick step is one a double can add */
    if (f->x1 - f->x0 <= 1e-9 * fmax(1, fmax(fabs(f->x0), fabs(f->x1))))
        f->x0 -= f->x0 ? fabs(f->x0) * 0.1 : 0.5, f->x1 += f->x1 ? fabs(f->x1) * 0.1 : 0.5;
    if (f->y1 - f->y0 <= 1e-9 * fmax(1, fmax(fabs(f->y0), fabs(f->y1))))
        f->y0 -= f->y0 ? fabs(f->y0) * 0.1 : 0.5, f->y1 += f->y1 ? fabs(f->y1) * 0.1 : 0.5;
    return any;
}

static void series(FILE *out, const frame_t *f, const zp_svg_series_t *s, const bucket_t *b, int m,
                   const char *colour)
{
    fprintf(out, "<g class=\"series\" data-%s=\"", s->key);
    zp_escape_html(out, s->name);
    fprintf(out, "\" stroke=\"%s\" fill=\"%s\">\n", colour, colour);
    int band = 0;
    for (int k = 0; k < m && !band; k++)
        band = b[k].n > 1 && b[k].hi > b[k].lo;
    if (band) {
        fputs("<polygon class=\"band\" points=\"", out);
        for (int k = 0; k < m; k++)
            fprintf(out, "%.1f,%.1f ", px(f, b[k].x), py(f, b[k].hi));
        for (int k = m - 1; k >= 0; k--)
            fprintf(out, "%.1f,%.1f ", px(f, b[k].x), py(f, b[k].lo));
        fputs("\"/>\n", out);
    }
    fprintf(out, "<polyline class=\"line%s\" points=\"", s->dashed ? " dashed" : "");
    for (int k = 0; k < m; k++)
        fprintf(out, "%.1f,%.1f ", px(f, b[k].x), py(f, b[k].y));
    fputs("\"/>\n", out);
    for (int k = 0; s->dots && k < m; k++)
        fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\"/>", px(f, b[k].x), py(f, b[k].y));
    fputs("</g>\n", out);
}

static void legend(FILE *out, const zp_svg_series_t *s, int n)
{
    fputs("<div class=\"legend\">", out);
    for (int i = 0; i < n; i++) {
        fprintf(out, "<span><i style=\"background:%s\"></i>", PALETTE[i % COLOURS]);
        zp_escape_html(out, s[i].name);
        fputs("</span> ", out);
    }
    fputs("</div>\n", out);
}

void zp_svg_lines(FILE *out, const zp_svg_plot_t *p, const zp_svg_series_t *s, int n)
{
    bucket_t **b = calloc((size_t)(n > 0 ? n : 1), sizeof *b);
    int *m = calloc((size_t)(n > 0 ? n : 1), sizeof *m);
    for (int i = 0; b && m && i < n; i++)
        if ((b[i] = malloc(ZP_SVG_BUCKETS * sizeof **b)))
            m[i] = buckets(s[i].xy, b[i]);
    frame_t f = {0, 1, 0, 1};
    int any = b && m && frame_of(b, m, n, p->share, &f);
    fprintf(out, "<figure class=\"plot\"><figcaption>");
    zp_escape_html(out, p->title);
    fprintf(out, "</figcaption>\n<svg id=\"%s\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" "
                 "viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\">\n", p->id, W, H, W, H);
    if (any) {
        axes(out, &f, p);
        for (int i = 0; i < n; i++)
            if (b[i])
                series(out, &f, &s[i], b[i], m[i], PALETTE[i % COLOURS]);
    } else {
        fprintf(out, "<rect class=\"frame\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>"
                     "<text class=\"label\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">no data</text>\n",
                LEFT, TOP, W - LEFT - RIGHT, H - TOP - BOTTOM, W / 2, H / 2);
    }
    fputs("</svg>\n", out);
    if (any)
        legend(out, s, n);
    fputs("</figure>\n", out);
    for (int i = 0; b && i < n; i++)
        free(b[i]);
    free(b);
    free(m);
}

/* v in `unit`; seconds under one as ms or us. */
static void value_label(FILE *out, double v, const char *unit)
{
    if (!strcmp(unit, "s") && v > 0 && v < 1e-3)
        fprintf(out, "%.3g us", v * 1e6);
    else if (!strcmp(unit, "s") && v > 0 && v < 1)
        fprintf(out, "%.3g ms", v * 1e3);
    else
        fprintf(out, "%.3g %s", v, unit);
}

void zp_svg_bars(FILE *out, const char *id, const char *title, const zp_svg_bar_t *b, int n,
                 const char *unit)
{
    const int label = 170, row = 20, width = W;
    double max = 0;
    for (int i = 0; i < n; i++)
        max = fmax(max, b[i].value);
    fprintf(out, "<figure class=\"plot\"><figcaption>");
    zp_escape_html(out, title);
    fprintf(out, "</figcaption>\n<svg id=\"%s\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" "
                 "viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\">\n", id, width, n * row + 8, width,
            n * row + 8);
    for (int i = 0; i < n; i++) {
        double len = max > 0 && isfinite(b[i].value) ? b[i].value / max * (width - label - 90) : 0;
        int y = 4 + i * row;
        fputs("<g class=\"bar\" data-label=\"", out);
        zp_escape_html(out, b[i].label);
        fprintf(out, "\"><text class=\"tick\" x=\"%d\" y=\"%d\" text-anchor=\"end\">", label - 6, y + 13);
        zp_escape_html(out, b[i].label);
        fprintf(out, "</text><rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>"
                     "<text class=\"tick\" x=\"%.1f\" y=\"%d\">",
                label, y + 2, len < 1 && b[i].value > 0 ? 1 : len, row - 5, PALETTE[0],
                label + len + 4, y + 13);
        value_label(out, b[i].value, unit);
        fputs("</text></g>\n", out);
    }
    fputs("</svg></figure>\n", out);
}

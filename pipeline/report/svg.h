/* svg.h — plots as inline SVG for the HTML reports (report_html.h): line
 * charts of several series with axes, ticks and a legend, and horizontal bar
 * charts. Nothing but markup: no script, no font or style from elsewhere.
 *
 * Bounded: a series of more than ZP_SVG_BUCKETS points is drawn as
 * ZP_SVG_BUCKETS buckets of equal width in x, each at its mean with its
 * min..max as a light band, so a plot's size does not grow with the run.
 * Every name taken from data goes through zp_escape_html (escape.h). */
#ifndef ZP_SVG_H
#define ZP_SVG_H

#include "pipeline/report/xy.h"

#include <stddef.h>
#include <stdio.h>

#define ZP_SVG_BUCKETS 300

typedef struct {
    const char *name; /* the legend's text and the value of data-KEY; from data, escaped */
    const char *key;  /* the series' <g class="series" data-KEY="name">: a constant ("stage") */
    const zp_xy_t *xy; /* x non-decreasing; non-finite y are left out */
    int dots;          /* 1: a marker at each point (a few points, such as epochs) */
    int dashed;        /* 1: a dashed line */
} zp_svg_series_t;

typedef struct {
    const char *id;     /* the <svg>'s id: a constant */
    const char *title;  /* a constant */
    const char *xlabel, *ylabel; /* constants */
    int share;          /* 1: y values are shares, drawn 0..100% */
} zp_svg_plot_t;

/* A line chart of the n series (a frame saying "no data" when none has a
 * point), in a <figure> with the title and a legend. */
void zp_svg_lines(FILE *out, const zp_svg_plot_t *p, const zp_svg_series_t *s, int n);

typedef struct {
    const char *label; /* from data: escaped */
    double value;      /* >= 0 */
} zp_svg_bar_t;

/* Horizontal bars, one per entry, scaled to the largest, each labelled and
 * followed by its value and `unit` (a constant: "s"). */
void zp_svg_bars(FILE *out, const char *id, const char *title, const zp_svg_bar_t *b, int n,
                 const char *unit);

#endif

/* report_page.h — the parts the HTML pages of report_html.h share: the
 * page's head (title and inline style) and foot, and the tables of epochs
 * and of coverage. Every string from data goes through zp_html_str. */
#ifndef ZP_REPORT_PAGE_H
#define ZP_REPORT_PAGE_H

#include <stdint.h>
#include <stdio.h>

/* One epoch's records; [0] train, [1] test (ZP_SPLIT_*). */
typedef struct {
    int have[2];
    double loss[2], acc[2]; /* -1: none (no model) */
    int64_t samples[2], expected[2], skipped[2], distinct[2];
    char checksum[2][20];   /* 16 hex digits as the record has them */
    double samples_per_s, seconds; /* of the train split */
} zp_page_epoch_t;

/* <!DOCTYPE html> ... <body><h1>: `title` then `name` (from data) in <code>. */
void zp_page_head(FILE *out, const char *title, const char *name);
/* The page's end, saying which command (a constant) writes it again. */
void zp_page_foot(FILE *out, const char *again);

/* The table of the n epochs (rows[e] is epoch e; those with no record are
 * left out): loss and accuracy of each split, samples/s and seconds. Past
 * ZP_HTML_ROWS epochs, the first and the last ZP_HTML_ROWS/2 and a row
 * saying how many are left out. */
void zp_page_epochs(FILE *out, const zp_page_epoch_t *rows, int64_t n);

/* The coverage proof of every epoch and split: samples, expected, skipped,
 * distinct, the index checksum, and whether it is the checksum of the
 * indices 0..samples+skipped-1 less the skipped ones (`skipped[split]`,
 * nskipped[split] of them, every one the run skipped in that split). */
void zp_page_coverage(FILE *out, const zp_page_epoch_t *rows, int64_t n,
                      const int64_t *const skipped[2], const int nskipped[2]);

#endif

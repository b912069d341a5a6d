/* xy.h — a growing list of (x, y) points: the run model's series over time
 * or over epochs (model.h), and what the charts of svg.h draw. */
#ifndef ZP_XY_H
#define ZP_XY_H

#include <stddef.h>

/* Zero-initialised is empty. x and y hold n points each, room for cap;
 * both are owned by the list and freed by zp_xy_free. */
typedef struct {
    double *x, *y;
    size_t n, cap;
} zp_xy_t;

/* Appends (x, y); 0 or ZP_ENOMEM (the list is then as it was). */
int zp_xy_push(zp_xy_t *s, double x, double y);
/* Frees the points; the list is empty again, and safe to free twice. */
void zp_xy_free(zp_xy_t *s);

#endif

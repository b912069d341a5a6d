/* xy.c — a growing list of (x, y) points (xy.h). */
#include "pipeline/report/xy.h"
#include "schemas/errors.h"

#include <stdlib.h>

int zp_xy_push(zp_xy_t *s, double x, double y)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        double *nx = realloc(s->x, cap * sizeof *nx);
        if (!nx)
            return ZP_ENOMEM;
        s->x = nx;
        double *ny = realloc(s->y, cap * sizeof *ny);
        if (!ny)
            return ZP_ENOMEM;
        s->y = ny, s->cap = cap;
    }
    s->x[s->n] = x, s->y[s->n] = y, s->n++;
    return 0;
}

void zp_xy_free(zp_xy_t *s)
{
    free(s->x);
    free(s->y);
    *s = (zp_xy_t){0};
}

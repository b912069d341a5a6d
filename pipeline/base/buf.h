/* buf.h — a byte buffer grown on demand and kept: the data path's work
 * space (a decoded image, a record, a batch of cache values), allocated once
 * it has seen its largest size, never per sample. */
#ifndef ZP_BUF_H
#define ZP_BUF_H

#include "schemas/errors.h"

#include <stdint.h>
#include <stdlib.h>

/* Makes *buf (malloc'd or NULL, *cap bytes) hold at least `need` bytes,
 * growing it by half as much again so that a few larger needs cost few
 * reallocations; its bytes are kept. 0, or ZP_ENOMEM with *buf as it was. */
static inline int zp_buf_grow(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = need + need / 2;
    uint8_t *p = realloc(*buf, n);
    if (!p)
        return ZP_ENOMEM;
    *buf = p, *cap = n;
    return 0;
}

#endif

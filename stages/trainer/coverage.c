/* coverage.c — epoch accounting of sample indices; see coverage.h. */
#include "stages/trainer/coverage.h"
#include "pipeline/hash.h"
#include "pipeline/log.h"
#include "schemas/errors.h"

#include <stdlib.h>
#include <string.h>

int zp_coverage_init(zp_coverage_t *a, int64_t n)
{
    memset(a, 0, sizeof *a);
    a->n = n;
    a->order = ZP_ORDER_INIT;
    a->seen = calloc((size_t)(n + 8) / 8, 1);
    return a->seen ? 0 : ZP_ENOMEM;
}

void zp_coverage_free(zp_coverage_t *a)
{
    free(a->seen);
    a->seen = NULL;
}

static void reset(zp_coverage_t *a)
{
    uint8_t *seen = a->seen;
    int64_t n = a->n;
    memset(a, 0, sizeof *a);
    a->seen = seen, a->n = n;
    memset(a->seen, 0, (size_t)(n + 7) / 8);
    a->order = ZP_ORDER_INIT;
    a->start_ns = zp_now_ns();
}

void zp_coverage_add(zp_coverage_t *a, const uint32_t *idx, int64_t n)
{
    if (a->batches == 0 && a->samples == 0)
        reset(a);
    for (int64_t i = 0; i < n; i++) {
        uint32_t x = idx[i];
        a->order = zp_order_step(a->order, x);
        if (x >= a->n)
            continue;
        if (!(a->seen[x >> 3] & (1u << (x & 7)))) {
            a->seen[x >> 3] |= (uint8_t)(1u << (x & 7));
            a->distinct++;
            a->checksum += zp_index_term(x);
        }
    }
    a->samples += n;
    a->batches++;
}

void zp_coverage_end(zp_coverage_t *a) { a->samples = a->batches = 0; }

void zp_coverage_pack(const zp_coverage_t *a, double *s)
{
    s[0] = (double)a->samples, s[1] = (double)a->distinct;
    s[2] = (double)(a->checksum & 0xffffffffu), s[3] = (double)(a->checksum >> 32);
    s[4] = a->loss_sum, s[5] = (double)a->correct;
}

void zp_coverage_unpack(zp_coverage_t *a, const double *s)
{
    a->samples = (int64_t)s[0], a->distinct = (int64_t)s[1];
    a->checksum = (uint64_t)s[2] + ((uint64_t)s[3] << 32);
    a->loss_sum = s[4], a->correct = (int64_t)s[5];
}

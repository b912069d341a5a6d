/* coverage.c — epoch accounting of sample indices; see coverage.h. */
#include "pipeline/ring/coverage.h"
#include "pipeline/dataset/dataset.h"
#include "pipeline/dataset/sampler.h"
#include "pipeline/stage/event.h"
#include "pipeline/base/hash.h"
#include "pipeline/base/log.h"
#include "schemas/errors.h"
#include "schemas/records.h"

#include <stdio.h>

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

void zp_coverage_end(zp_coverage_t *a) { a->samples = a->batches = a->repeats = 0; }

int zp_coverage_exact(const zp_coverage_t *a, uint64_t n, uint64_t skipped)
{
    int64_t once = a->samples - a->repeats;
    return a->repeats >= 0 && once + (int64_t)skipped == (int64_t)n && a->distinct == once;
}

int zp_coverage_resume(zp_coverage_t *a, const zp_config_t *c, int split, uint64_t epoch,
                       int rank, int world, int64_t from, int64_t batches, int64_t repeats)
{
    zp_coverage_end(a);
    int64_t before = rank == 0 ? from : 0;
    if (before <= 0 && batches <= 0 && (rank != 0 || repeats <= 0))
        return 0;
    zp_sampler_t s;
    int shuffle = split == ZP_SPLIT_TRAIN && c->shuffle;
    int rc = zp_sampler_init(&s, a->n);
    if (!rc && before > 0) /* the whole permutation, by rank 0 of 1 */
        rc = zp_sampler_epoch(&s, (uint64_t)c->seed, split, (int64_t)epoch, shuffle, 0, 1, 0);
    if (!rc && before > 0)
        zp_coverage_add(a, s.order, before < s.count ? before : s.count); /* the epoch starts */
    if (!rc && batches > 0)
        rc = zp_sampler_epoch(&s, (uint64_t)c->seed, split, (int64_t)epoch, shuffle, rank, world,
                              from);
    if (!rc && batches > 0)
        zp_coverage_add(a, s.order, batches * c->batch_size < s.count ? batches * c->batch_size
                                                                       : s.count);
    if (rank == 0 && repeats > 0) { /* trained before, and here again: not distinct */
        if (a->samples == 0)
            reset(a);
        a->samples += repeats, a->repeats = repeats;
    }
    a->batches = 0; /* none of its batches came here */
    zp_sampler_free(&s);
    return rc;
}

void zp_coverage_pack(const zp_coverage_t *a, double *s)
{
    s[0] = (double)a->samples, s[1] = (double)a->distinct;
    s[2] = (double)(a->checksum & 0xffffffffu), s[3] = (double)(a->checksum >> 32);
    s[4] = a->loss_sum, s[5] = (double)a->correct, s[6] = (double)a->repeats;
}

void zp_coverage_unpack(zp_coverage_t *a, const double *s)
{
    a->samples = (int64_t)s[0], a->distinct = (int64_t)s[1];
    a->checksum = (uint64_t)s[2] + ((uint64_t)s[3] << 32);
    a->loss_sum = s[4], a->correct = (int64_t)s[5], a->repeats = (int64_t)s[6];
}

int zp_coverage_sum_ranks(zp_coverage_t *a, zp_comm_t *comm, uint64_t *n, uint64_t *skipped)
{
    double s[ZP_COVERAGE_SUMS + 2];
    float no_values = 0;
    zp_coverage_pack(a, s);
    s[ZP_COVERAGE_SUMS] = (double)*n, s[ZP_COVERAGE_SUMS + 1] = (double)*skipped;
    int rc = zp_comm_sum(comm, &no_values, 0, s, ZP_COVERAGE_SUMS + 2);
    if (rc)
        return rc;
    zp_coverage_unpack(a, s);
    *n = (uint64_t)s[ZP_COVERAGE_SUMS], *skipped = (uint64_t)s[ZP_COVERAGE_SUMS + 1];
    return 0;
}

void zp_coverage_record(zp_stage_t *st, const zp_coverage_t *a, const zp_epoch_info_t *e,
                        double dt)
{
    char sum[24], order[24];
    snprintf(sum, sizeof sum, "%016llx", (unsigned long long)a->checksum);
    snprintf(order, sizeof order, "%016llx", (unsigned long long)a->order);
    zp_event_t ev;
    zp_event_record(st, &ev, ZP_REC_EPOCH_END);
    zp_event_str(&ev, ZP_KEY(EPOCH_END, split), zp_dataset_split_name(e->split));
    zp_event_int(&ev, ZP_KEY(EPOCH_END, epoch), (int64_t)e->epoch);
    zp_event_int(&ev, ZP_KEY(EPOCH_END, epochs), e->epochs);
    zp_event_int(&ev, ZP_KEY(EPOCH_END, step), e->step);
    zp_event_int(&ev, ZP_KEY(EPOCH_END, samples), a->samples);
    zp_event_int(&ev, ZP_KEY(EPOCH_END, expected_samples), e->expected);
    zp_event_int(&ev, ZP_KEY(EPOCH_END, skipped), e->skipped);
    zp_event_int(&ev, ZP_KEY(EPOCH_END, distinct), a->distinct);
    if (a->repeats)
        zp_event_int(&ev, ZP_KEY(EPOCH_END, repeats), a->repeats);
    zp_event_str(&ev, ZP_KEY(EPOCH_END, index_checksum), sum);
    zp_event_str(&ev, ZP_KEY(EPOCH_END, order_digest), order);
    zp_event_num(&ev, ZP_KEY(EPOCH_END, samples_per_s), dt > 0 ? a->samples / dt : 0);
    zp_event_num(&ev, ZP_KEY(EPOCH_END, seconds), dt);
    if (e->with_model) {
        zp_event_num(&ev, ZP_KEY(EPOCH_END, loss), a->samples ? a->loss_sum / a->samples : 0);
        zp_event_num(&ev, ZP_KEY(EPOCH_END, accuracy),
                  a->samples ? (double)a->correct / a->samples : 0);
    }
    zp_event_send(st, &ev);
}

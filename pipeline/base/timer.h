/* timer.h — named regions that every stage times around its work (the
 * Deep500 model), and the statistics of their samples.
 *
 *     ZP_TIME_BEGIN(&st->timers, ZP_R_FORWARD);
 *     ... the work ...
 *     ZP_TIME_END(&st->timers, ZP_R_FORWARD);
 *
 * Each closed region adds one sample, its duration in nanoseconds, and when it
 * ended (zp_now_ns(); a sample added whole with zp_timer_add ended at the
 * call, so "other" = batch - the rest is drawn as the tail of its batch, and
 * a duration measured elsewhere, as the cuda backend's h2d/forward/backward
 * harvested a batch later, is drawn where it was harvested). Regions of
 * different names may nest or overlap. Opening a region that is already open,
 * or closing one that is not, is a bug of the stage: it is logged with the
 * call site (and where the region was opened), counted in `misuse`, and the
 * call does nothing else — the region keeps its first start.
 *
 * Samples are buffered per region; when a buffer fills, and whenever the
 * stage calls zp_timer_flush(), they are handed to `flush` (the stage sends
 * them to the logger as "timer" events). Not thread-safe: one zp_timers_t
 * per thread that times.
 */
#ifndef ZP_TIMER_H
#define ZP_TIMER_H

#include <stddef.h>
#include <stdint.h>

/* Every region name of every stage. Trainer: epoch, batch, io (waiting for a
 * batch), h2d, transform (normalising uint8 samples), augment, forward, backward,
 * comm, other (the rest of a batch).
 * Data stages: read, decode, transform, lmdb_get, lmdb_put, collate, send, wait
 * (and augment in loaders). */
#define ZP_REGIONS(X)                                                                              \
    X(EPOCH, "epoch") X(BATCH, "batch") X(IO, "io") X(H2D, "h2d") X(FORWARD, "forward")            \
    X(BACKWARD, "backward") X(COMM, "comm") X(OTHER, "other") X(READ, "read")                     \
    X(DECODE, "decode") X(TRANSFORM, "transform") X(LMDB_GET, "lmdb_get")                         \
    X(LMDB_PUT, "lmdb_put") X(COLLATE, "collate") X(SEND, "send") X(WAIT, "wait")                     \
    X(AUGMENT, "augment")

#define ZP_REGION_ENUM(id, name) ZP_R_##id,
enum { ZP_REGIONS(ZP_REGION_ENUM) ZP_R_COUNT };
#undef ZP_REGION_ENUM

#define ZP_TIMER_BUF 1024

/* ns[i]: the sample's duration; end[i]: when it ended (zp_now_ns()). */
typedef void zp_timer_flush_fn(void *ctx, int region, const int64_t *ns, const int64_t *end, int n);

typedef struct {
    int64_t start[ZP_R_COUNT]; /* 0 while closed */
    const char *file[ZP_R_COUNT];
    int line[ZP_R_COUNT];
    int64_t buf[ZP_R_COUNT][ZP_TIMER_BUF];
    int64_t end[ZP_R_COUNT][ZP_TIMER_BUF]; /* zp_now_ns() as each sample ended */
    int n[ZP_R_COUNT];
    int64_t misuse;
    zp_timer_flush_fn *flush; /* NULL: full buffers are dropped */
    void *ctx;
} zp_timers_t;

#define ZP_TIME_BEGIN(t, r) zp_timer_begin_at((t), (r), __FILE__, __LINE__)
#define ZP_TIME_END(t, r) zp_timer_end_at((t), (r), __FILE__, __LINE__)

/* Name of a region ("forward"); NULL when out of range. */
const char *zp_timer_region_name(int region);
/* Region of a name; -1 when unknown. */
int zp_timer_region_of(const char *name);

void zp_timer_init(zp_timers_t *t, zp_timer_flush_fn *flush, void *ctx);
/* 0, or ZP_EINVAL when the region is already open (logged, see above). */
int zp_timer_begin_at(zp_timers_t *t, int region, const char *file, int line);
/* The region's duration in ns, or -1 when it was not open (logged). */
int64_t zp_timer_end_at(zp_timers_t *t, int region, const char *file, int line);
static inline int zp_timer_is_open(const zp_timers_t *t, int region) { return t->start[region] != 0; }
/* Adds a sample measured elsewhere (e.g. "other" = batch - the rest). */
void zp_timer_add(zp_timers_t *t, int region, int64_t ns);
/* Hands every buffered sample to `flush`. */
void zp_timer_flush(zp_timers_t *t);

typedef struct {
    int64_t count;
    double min, mean, median, max, stdev, total; /* in the samples' unit */
} zp_region_stats_t;

/* Statistics of n samples; sorts x in place (for the median). stdev is the
 * sample standard deviation (n - 1), 0 with fewer than two samples; all 0
 * when n is 0. */
void zp_timer_region_stats(double *x, size_t n, zp_region_stats_t *out);

#endif

/* model.h — the run model: what a run's records say, read once.
 *
 * zp_model_load reads a run directory's records (events.msgpack, or
 * metrics.jsonl and stats.jsonl when that is gone: runscan.h) in one pass
 * and computes from them everything a report says: the epochs with their
 * figures and coverage proofs, each stage's counters and throughput over
 * time, the time per stage and region, the trainer's wait, the skipped
 * samples and lost loaders, loader.autoscale's decisions, the run's
 * phases (cold and warm epochs) and the bottleneck sentence. Every output is a renderer of this one model: the
 * text and JSON report (report.h), report.html (report_html.h) and a
 * sweep's page; none reads a record itself. (The trace, trace.h, keeps a
 * streaming pass of its own: it draws every timer sample where it started,
 * which no summary holds.)
 *
 * One rule for records the model cannot use, whatever renders it: a record
 * that is not a map, names a stage this version does not know, carries
 * timer samples that are not durations, names a split other than train and
 * test, is of an epoch outside the run (negative, ZP_MODEL_EPOCH_MAX or
 * more, or — for an epoch_end, which carries the run's epoch count — at or
 * past that count), or counts negative cache hits or misses is skipped and
 * counted in `unread`. A record of a kind
 * the model does not use is neither.
 *
 * Bounded: what the model holds grows with the records read (the epochs
 * held are those that had a record), never with a number a record states
 * (while loading, an index of 4 bytes per epoch number up to the largest
 * one read: 4 MB at most); at most ZP_MODEL_SKIPS_MAX distinct skipped
 * samples and ZP_REPORT_AUTOSCALE_MAX decisions are kept, the rest counted.
 *
 * Usage:
 *
 *     zp_model_t *m;
 *     if (zp_model_load(&m, "runs/mnist", err, sizeof err))
 *         ... err says why ...
 *     for (int64_t i = 0; i < m->nepochs; i++)
 *         ... m->epoch[i] ...
 *     zp_model_destroy(&m);
 *
 * A model is read-only once loaded: every pointer in it is owned by the
 * model and valid until zp_model_destroy.
 */
#ifndef ZP_MODEL_H
#define ZP_MODEL_H

#include "pipeline/report/report_autoscale.h"
#include "pipeline/report/report_bottleneck.h"
#include "pipeline/report/runscan.h"
#include "pipeline/report/xy.h"
#include "pipeline/dataset/dataset.h"
#include "pipeline/base/names.h"
#include "pipeline/base/timer.h"
#include "schemas/records.h"

#include <stddef.h>
#include <stdint.h>

/* Epoch numbers from here up are garbled: no run has a million epochs. */
#define ZP_MODEL_EPOCH_MAX 1000000
/* Distinct skipped samples kept (their split, index and error); the rest are counted. */
#define ZP_MODEL_SKIPS_MAX 10000

/* One epoch, from its epoch_end records (one per split) and a program's
 * own train_epoch / test_epoch records. Arrays are indexed by split
 * (ZP_SPLIT_TRAIN, ZP_SPLIT_TEST). */
typedef struct {
    int64_t epoch;                  /* from 0; reports show epoch + 1 */
    int have[ZP_SPLITS];            /* 1: an epoch_end of that split came; 0: not (yet) */
    double loss[ZP_SPLITS], acc[ZP_SPLITS]; /* -1: none (no model, or not sent) */
    /* the coverage proof, as the epoch_end says it: samples seen, samples the
     * prefetch expected, samples skipped, distinct indices among those seen,
     * and the samples among those seen trained twice across a resume */
    int64_t samples[ZP_SPLITS], expected[ZP_SPLITS], skipped[ZP_SPLITS], distinct[ZP_SPLITS];
    int64_t repeats[ZP_SPLITS];
    char checksum[ZP_SPLITS][20];   /* the order-free index checksum: 16 hex digits as sent */
    double samples_per_s, seconds;  /* of the train split */
    double t_end;                   /* when it ended: the latest time of its epoch_end records
                                     * (s since 1970); 0: none had a time */
} zp_model_epoch_t;

/* Epochs of one kind, one after the other: read through the loaders while
 * the cache fills (cold), read from the warm cache (warm), or every epoch of
 * a run whose cache is off (run). An epoch is cold when the prefetch's
 * cache hit rate over it (its cache records' hits over their lookups, every
 * split and every rank's prefetch together) is under ZP_PHASE_WARM_HIT_RATE
 * (report_bottleneck.h), warm from there up; an epoch with no cache record
 * of its own (a run cut short) takes the kind of the next one that has one,
 * else of the last one. An epoch ends at the latest of its epoch_end
 * records (t_end) and runs from the end of the one before (the first from
 * the run's start); a stats record belongs to the epoch, and so to the
 * phase, whose end is the first at or after its time. */
typedef struct {
    int64_t first, last;  /* its epochs, from 0 (reports show epoch + 1) */
    int kind;             /* ZP_PHASE_* (report_bottleneck.h) */
    double seconds;       /* from the end of the epoch before it (the run's start) to its end */
    /* its stats records' shares, weighted by their windows: the trainer's
     * wait for data (-1: no record) and each data stage's busy share
     * (loader, cache, prefetch; 0: no record), all instances together; a
     * run's one phase has the whole run's figures instead (below) */
    double wait, busy[3];
    int loaders;          /* loader instances that sent a record in it */
    char stage[16];       /* its verdict (report_bottleneck.h), or "unknown" */
    char advice[600];     /* its sentence */
} zp_model_phase_t;

/* One stage, from the latest stats record of each of its instances. */
typedef struct {
    int instances;             /* instances that sent a stats record */
    double items, items_per_s; /* total_items summed; and each one's over its uptime, summed */
    double errors;             /* summed */
    double busy, wait_in, wait_out; /* shares of uptime, 0..1, the mean over the instances */
    /* items/s over time (x: seconds since t0): after each stats record, the
     * sum of every live instance's latest items_per_s (an instance's final
     * record is its last); at most ZP_MODEL_INSTANCES_MAX instances. */
    zp_xy_t throughput;
} zp_model_stage_t;

/* Instances of a stage that the series over time follow; others are left out of them. */
#define ZP_MODEL_INSTANCES_MAX 1024

/* A sample a loader could not load (loader.on_error: skip). */
typedef struct {
    int split;                  /* ZP_SPLIT_* */
    int64_t index;
    char error[ZP_REC_TEXT_MAX]; /* the loader's sentence */
} zp_model_skip_t;

typedef struct {
    char run[256];       /* the run's name: the last part of its directory's path */
    zp_runscan_t scan;   /* what was read and what was missing (runscan.h) */
    int64_t unread;      /* records skipped under the rule above */
    double t0;           /* the earliest record's time (s since 1970): the run's start */

    zp_model_epoch_t *epoch; /* the epochs that had a record, by epoch number; nepochs of them */
    int64_t nepochs;
    zp_xy_t step_loss, step_acc; /* the trainer's step records (x: epochs, fractional) */

    zp_model_stage_t stage[ZP_STAGE_COUNT]; /* by names.h's stage number */
    zp_xy_t trainer_wait; /* the trainer's wait_in share over time, the mean of its instances */
    /* the timer samples of each stage and region, all instances together, in
     * milliseconds (count 0: none) */
    zp_region_stats_t region[ZP_STAGE_COUNT][ZP_R_COUNT];

    double epoch_s;     /* the trainer's epochs' time in all, seconds */
    double wait_share;  /* the trainer's io time over its epoch time, 0..1; -1: no timings */
    /* The run's phases (zp_model_phase_t), in epoch order; nphases of them
     * (none without an epoch that ended). One phase (the cache off, every
     * epoch warm or every one cold; or phases of which no trainer's stats
     * record says a window, a run of an older version: one "run" phase) is
     * judged on the whole run's figures (epoch_s, wait_share, each stage's
     * busy share) and gets the whole run's verdict. With several, the advice
     * is each phase's sentence after its epochs and kind ("Epoch 1 (cold):
     * ...", "Epochs 2-4 (warm): ..."), and the bottleneck is the stage of
     * the phase in which the trainer waited the most seconds (its wait share
     * times its seconds). */
    zp_model_phase_t *phase;
    int nphases;
    char bottleneck[16]; /* the verdict (report_bottleneck.h): "loader", ..., or "unknown" */
    char advice[1600];   /* its sentence, or the phases' sentences */

    zp_model_skip_t *skip; /* distinct skipped samples in the order first seen; nskips of them */
    int nskips;
    int nskipped[ZP_SPLITS]; /* of them, per split */
    int64_t skip_events;     /* every skip, each epoch's again, kept or not */
    int64_t loaders_lost, tasks_requeued; /* the cache stage's loader_lost records */
    zp_report_autoscale_t autoscale;         /* the supervisor's loader.autoscale decisions */
} zp_model_t;

/* Reads <run_dir>'s records into a new model in *out (NULL on error).
 * Returns 0, or an error with the path and the reason in err: -ENOENT or
 * ZP_EPROTO when the run holds nothing to read (runscan.h), ZP_ENOMEM.
 * A run with no record at all (an empty events.msgpack) is a model with no
 * epochs. Release with zp_model_destroy. */
int zp_model_load(zp_model_t **out, const char *run_dir, char *err, size_t errlen);

/* Frees the model and sets *m to NULL; safe on NULL and on a NULL *m. */
void zp_model_destroy(zp_model_t **m);

/* One split's loss (acc 0) or accuracy (acc 1) per epoch into `out` (x: the
 * epoch from 1), for the epochs that have that split and the figure.
 * 0 or ZP_ENOMEM. */
int zp_model_curve(const zp_model_t *m, int split, int acc, zp_xy_t *out);

#endif

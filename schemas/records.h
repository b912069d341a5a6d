/* records.h — the records every stage sends the logger, declared once.
 *
 * A record is the body of an EVENT message (msg.h): a msgpack map. The
 * logger writes "metric" and "warning" records to metrics.jsonl and "stats"
 * records to stats.jsonl, each as one line of JSON with these keys; it keeps
 * each stage instance's latest "stats" record for `zeus-pipe stat` (the
 * STAT_REP body is an array of them); `zeus-pipe report` reads them all back
 * from events.msgpack. Users read these keys: a key is renamed never, and a
 * new one is added here first.
 *
 * Every record starts with the head (ZP_RECORD_HEAD); its `kind` (and for a
 * metric its `event`) says which record it is (ZP_RECORDS); the rest are the
 * record's own fields, in the order the writer sends them.
 *
 * Rows are F(RECORD, key, type, fallback, meaning and unit). Types:
 *   I  integer (int64 on the wire)
 *   N  number (float64 on the wire)
 *   S  a name or a short string (read back at most ZP_REC_NAME_MAX - 1 bytes)
 *   T  text for a person (read back at most ZP_REC_TEXT_MAX - 1 bytes)
 *   A  array of integers (read back as the msgpack object)
 * `fallback` is what a reader sees for an I or N field that is absent or not
 * a number (strings read as "", arrays as NULL). A reader ignores keys it
 * does not know.
 *
 * Writers name a key with ZP_KEY(RECORD, key), which does not build for a
 * key the record does not declare; readers decode a record into its struct
 * (zp_rec_<name>_t) with zp_records_decode(). */
#ifndef ZP_RECORDS_SCHEMA_H
#define ZP_RECORDS_SCHEMA_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#define ZP_REC_NAME_MAX 64
#define ZP_REC_TEXT_MAX 512

/* Kinds of record: K(NAME, "wire name", meaning). */
#define ZP_RECORD_KINDS(K)                                                                         \
    K(STATS, "stats", "a stage's counters, every stats.interval_ms and once as it exits")          \
    K(TIMER, "timer", "durations of one timed region (pipeline/base/timer.h) since the last record")    \
    K(RING, "ring", "the BATCH and FREE messages of one ring since the last record")              \
    K(WARNING, "warning", "something a person should know; also printed by the logger")          \
    K(METRIC, "metric", "what the run did: `event` says which record")

/* Records: R(NAME, name, KIND, "event" (metric records only), sender and meaning). */
#define ZP_RECORDS(R)                                                                              \
    R(STATS, stats, STATS, "", "every stage: its counters over the last window and since start") \
    R(TIMER, timer, TIMER, "", "every stage: its timer samples, sent with each stats record")     \
    R(RING, ring, RING, "", "prefetch: each BATCH it sent its trainer and each FREE it got back") \
    R(WARNING, warning, WARNING, "", "cache: LMDB failed and caching stops")                      \
    R(STEP, step, METRIC, "step", "trainer (rank 0): the figures of the last train steps")        \
    R(EPOCH_END, epoch_end, METRIC, "epoch_end", "trainer (rank 0): one split of one epoch done") \
    R(CACHE, cache, METRIC, "cache", "prefetch: the cache's hits and misses in one epoch")        \
    R(TRAIN_EPOCH, train_epoch, METRIC, "train_epoch",                                             \
      "a trainer.command program (zp.log(\"train_epoch\", ...)): its own loss and accuracy of a train epoch") \
    R(TEST_EPOCH, test_epoch, METRIC, "test_epoch",                                                \
      "a trainer.command program (zp.log(\"test_epoch\", ...)): its own loss and accuracy of a test epoch") \
    R(LOADER_LOST, loader_lost, METRIC, "loader_lost",                                             \
      "cache: a loader fell silent past loader.liveness; its tasks went back to the queue")      \
    R(LOADER_REFUSED, loader_refused, METRIC, "loader_refused",                                    \
      "cache: a loader was refused (another dataset or transform); its tasks were re-queued")   \
    R(SAMPLE_SKIPPED, sample_skipped, METRIC, "sample_skipped",                                    \
      "loader: a sample could not be loaded and was left out (loader.on_error: skip)")          \
    R(AUTOSCALE, autoscale, METRIC, "autoscale",                                                   \
      "supervisor (loader.autoscale): a loader added or retired, or why none could be added")

/* Every record's first fields; `event` in metric records only. */
#define ZP_RECORD_HEAD(F)                                                                          \
    F(HEAD, kind, S, 0, "which kind of record (ZP_RECORD_KINDS)")                                   \
    F(HEAD, stage, S, 0, "the sender: loader, cache, prefetch, trainer, logger or supervisor")      \
    F(HEAD, instance, I, 0, "the sending stage's instance (a loader's number, a trainer's rank)")   \
    F(HEAD, pid, I, 0, "the sending process's pid")                                                \
    F(HEAD, time, N, 0, "wall-clock time of sending, seconds since 1970")                          \
    F(HEAD, event, S, 0, "metric records: which one (ZP_RECORDS)")

#define ZP_RECORD_STATS(F)                                                                         \
    F(STATS, hit_rate, N, -1, "share of cache lookups that hit in the window, 0..1; -1: none")    \
    F(STATS, cpu, N, 0, "CPU time of every thread over the window, in cores (0 in a first record)") \
    F(STATS, items_per_s, N, 0, "items per second in the window (samples; events for the logger)") \
    F(STATS, bytes_per_s, N, 0, "bytes per second in the window")                                  \
    F(STATS, busy, N, 0, "share of the window spent working, 0..1")                                \
    F(STATS, wait_in, N, 0, "share of the window spent waiting for input, 0..1")                   \
    F(STATS, wait_out, N, 0, "share of the window spent blocked on output (back pressure), 0..1")  \
    F(STATS, queue, I, 0, "the stage's queue depth now (tasks, fetches or batches)")                \
    F(STATS, total_items, I, 0, "items since the stage started")                                    \
    F(STATS, total_bytes, I, 0, "bytes since the stage started")                                    \
    F(STATS, errors, I, 0, "malformed or refused messages and failed items since start")          \
    F(STATS, lmdb_errors, I, 0, "LMDB errors on the prefetch's hit path since start")             \
    F(STATS, events_dropped, I, 0, "records this stage could not send to the logger")             \
    F(STATS, window_s, N, 0, "length of the window, seconds")                                       \
    F(STATS, uptime_s, N, 0, "seconds since the stage started")                                     \
    F(STATS, total_busy_s, N, 0, "seconds spent working since start")                               \
    F(STATS, total_wait_in_s, N, 0, "seconds spent waiting for input since start")                 \
    F(STATS, total_wait_out_s, N, 0, "seconds spent blocked on output since start")                \
    F(STATS, final, I, 0, "1 in the last record, sent as the stage exits; 0 before")             \
    F(STATS, readers_busy, N, -1, "share of the window the prefetch's reader threads spent "     \
      "copying hits into the ring, over prefetch.readers, 0..1; -1: none (another stage, "      \
      "or the cache off)")

#define ZP_RECORD_TIMER(F)                                                                         \
    F(TIMER, region, S, 0, "the timed region's name (pipeline/base/timer.h)")                            \
    F(TIMER, ns, A, 0, "durations of the region since the last record, nanoseconds")             \
    F(TIMER, start, A, 0, "when each of those began: microseconds before the record's `time`")

/* For the trace (pipeline/report/trace.h): sent with each stats record, or when
 * ZP_RINGLOG_MAX messages are gathered, so none is lost. */
#define ZP_RECORD_RING(F)                                                                          \
    F(RING, at, A, 0, "when each message went or came: microseconds before the record's `time`")  \
    F(RING, slot, A, 0, "its ring slot")                                                            \
    F(RING, gen, A, 0, "the slot's generation then: (slot, gen) names one batch")                 \
    F(RING, free, A, 0, "1: a FREE from the trainer; 0: a BATCH to it")                            \
    F(RING, in_use, I, 0, "slots the trainer held as the record was sent")

#define ZP_RECORD_WARNING(F) F(WARNING, message, T, 0, "what happened and what follows from it")

#define ZP_RECORD_STEP(F)                                                                          \
    F(STEP, split, S, 0, "train")                                                                   \
    F(STEP, epoch, I, 0, "epoch, from 0")                                                           \
    F(STEP, epochs, I, 1, "epochs in the run")                                                      \
    F(STEP, step, I, 0, "train steps (batches) since the start of training")                       \
    F(STEP, steps_per_epoch, I, 1, "train steps in one epoch")                                      \
    F(STEP, loss, N, 0, "mean loss over the samples since the last step record")                   \
    F(STEP, accuracy, N, 0, "share of those samples classified right, 0..1")                       \
    F(STEP, samples_per_s, N, 0, "samples per second since the last step record")                  \
    F(STEP, lr, N, 0, "learning rate now")                                                          \
    F(STEP, samples, I, 0, "samples since the last step record")

#define ZP_RECORD_EPOCH_END(F)                                                                     \
    F(EPOCH_END, split, S, 0, "train or test")                                                      \
    F(EPOCH_END, epoch, I, -1, "epoch, from 0")                                                     \
    F(EPOCH_END, epochs, I, 0, "epochs in the run")                                                 \
    F(EPOCH_END, step, I, 0, "train steps since the start of training")                             \
    F(EPOCH_END, samples, I, 0, "samples trained or evaluated in the epoch (every rank)")           \
    F(EPOCH_END, expected_samples, I, 0, "samples the prefetch said the epoch holds")               \
    F(EPOCH_END, skipped, I, 0, "samples left out because they could not be loaded")               \
    F(EPOCH_END, distinct, I, 0, "distinct sample indices seen in the epoch")                       \
    F(EPOCH_END, repeats, I, 0, "samples trained twice across a resume (a rank was ahead), in samples") \
    F(EPOCH_END, index_checksum, S, 0, "order-free checksum of the indices seen, 16 hex digits")   \
    F(EPOCH_END, order_digest, S, 0, "digest of the order the indices came in, 16 hex digits")    \
    F(EPOCH_END, samples_per_s, N, 0, "samples per second over the epoch")                          \
    F(EPOCH_END, seconds, N, 0, "the epoch's duration, seconds")                                    \
    F(EPOCH_END, loss, N, -1, "mean loss over the epoch; absent without a model (backend null)")   \
    F(EPOCH_END, accuracy, N, -1, "share classified right, 0..1; absent without a model")

/* A program's figures of one epoch: the report's epoch table, report.html's
 * loss and accuracy plots and TensorBoard's train/ and test/ tags take them
 * where the epoch_end record (the library's) has none. */
#define ZP_RECORD_TRAIN_EPOCH(F)                                                                   \
    F(TRAIN_EPOCH, epoch, I, -1, "epoch, from 0")                                                   \
    F(TRAIN_EPOCH, step, I, 0, "train steps since the start of training")                           \
    F(TRAIN_EPOCH, loss, N, -1, "the program's mean loss over the epoch")                          \
    F(TRAIN_EPOCH, accuracy, N, -1, "the program's share classified right, 0..1")

#define ZP_RECORD_TEST_EPOCH(F)                                                                    \
    F(TEST_EPOCH, epoch, I, -1, "epoch, from 0")                                                    \
    F(TEST_EPOCH, step, I, 0, "train steps since the start of training")                           \
    F(TEST_EPOCH, loss, N, -1, "the program's mean loss over the epoch")                           \
    F(TEST_EPOCH, accuracy, N, -1, "the program's share classified right, 0..1")

#define ZP_RECORD_CACHE(F)                                                                         \
    F(CACHE, split, S, 0, "train or test")                                                          \
    F(CACHE, epoch, I, 0, "epoch, from 0")                                                          \
    F(CACHE, hits, I, 0, "samples of the epoch read from the cache")                                \
    F(CACHE, misses, I, 0, "samples of the epoch fetched from the loaders")                         \
    F(CACHE, corrupt, I, 0, "cached samples that failed their check and were fetched again")       \
    F(CACHE, cached_at_start, I, 0, "samples in the cache when the epoch started")                  \
    F(CACHE, hit_rate, N, 0, "hits / (hits + misses), 0..1; 0 with neither")

#define ZP_RECORD_LOADER_LOST(F)                                                                   \
    F(LOADER_LOST, loader, I, 0, "the lost loader's instance")                                      \
    F(LOADER_LOST, requeued, I, 0, "its tasks put back on the queue")                               \
    F(LOADER_LOST, alive, I, 0, "loaders still alive")

#define ZP_RECORD_LOADER_REFUSED(F)                                                                \
    F(LOADER_REFUSED, loader, I, 0, "the refused loader's instance")                                \
    F(LOADER_REFUSED, requeued, I, 0, "its tasks put back on the queue")                            \
    F(LOADER_REFUSED, error, T, 0, "why it was refused")

#define ZP_RECORD_SAMPLE_SKIPPED(F)                                                                \
    F(SAMPLE_SKIPPED, split, S, 0, "train or test")                                                 \
    F(SAMPLE_SKIPPED, index, I, -1, "the sample's index in its split")                              \
    F(SAMPLE_SKIPPED, error, T, 0, "why it could not be loaded")

#define ZP_RECORD_AUTOSCALE(F)                                                                     \
    F(AUTOSCALE, change, I, 0, "+1: a loader added; -1: one retired or withdrawn; 0: none added")  \
    F(AUTOSCALE, workers_before, I, 0, "this node's loaders before the decision")                 \
    F(AUTOSCALE, workers_after, I, 0, "this node's loaders after it")                             \
    F(AUTOSCALE, min_workers, I, 0, "loader.min_workers")                                           \
    F(AUTOSCALE, max_workers, I, 0, "loader.max_workers, or the free cores it stood for")          \
    F(AUTOSCALE, wait, N, -1, "the trainers' share of time waiting for data in the window, 0..1")  \
    F(AUTOSCALE, wait_threshold, N, 0, "loader.autoscale_wait")                                     \
    F(AUTOSCALE, busy, N, -1, "the loaders' mean share of time busy in the window, 0..1")          \
    F(AUTOSCALE, window_s, N, 0, "the window the figures are over, seconds")                        \
    F(AUTOSCALE, mem_available, I, -1, "bytes of memory available (MemAvailable); -1: unknown")    \
    F(AUTOSCALE, loader_rss, I, 0, "bytes resident in the largest loader; 0: unknown")             \
    F(AUTOSCALE, reason, T, 0, "the rule that decided, in a sentence")

/* ---- derived from the lists above; nothing below names a key ---------------------------- */

#define ZP_KIND_ENUM_(NAME, wire, doc) ZP_KIND_##NAME,
enum { ZP_RECORD_KINDS(ZP_KIND_ENUM_) ZP_KIND_COUNT };
#undef ZP_KIND_ENUM_

/* Record types; ZP_REC_NONE for a kind or event this version does not know. */
#define ZP_REC_ENUM_(NAME, name, KIND, event, doc) ZP_REC_##NAME,
typedef enum { ZP_REC_NONE = 0, ZP_RECORDS(ZP_REC_ENUM_) ZP_REC_COUNT } zp_record_type_t;
#undef ZP_REC_ENUM_

/* Field numbers inside each record (ZP_RI_<RECORD>_<key>): the bit of the
 * field in its struct's `present`. */
#define ZP_RI_ENUM_(REC, key, type, fallback, doc) ZP_RI_##REC##_##key,
enum { ZP_RECORD_HEAD(ZP_RI_ENUM_) ZP_RI_HEAD_COUNT_ };
#define ZP_RI_LIST_(NAME, name, KIND, event, doc) enum { ZP_RECORD_##NAME(ZP_RI_ENUM_) ZP_RI_##NAME##_COUNT_ };
ZP_RECORDS(ZP_RI_LIST_)
#undef ZP_RI_LIST_
#undef ZP_RI_ENUM_

/* The wire name of a declared key: ZP_KEY(STATS, total_items) is "total_items". */
#define ZP_KEY(REC, key) ((void)ZP_RI_##REC##_##key, #key)
/* Whether a decoded record carried the field (with a usable type). */
#define ZP_HAS(rec, REC, key) (((rec)->present >> ZP_RI_##REC##_##key) & 1)

/* The C type of each field type. */
#define ZP_REC_MEMBER_I(key) int64_t key;
#define ZP_REC_MEMBER_N(key) double key;
#define ZP_REC_MEMBER_S(key) char key[ZP_REC_NAME_MAX];
#define ZP_REC_MEMBER_T(key) char key[ZP_REC_TEXT_MAX];
#define ZP_REC_MEMBER_A(key) const msgpack_object *key; /* points into the body; valid while it lives */
#define ZP_REC_MEMBER_(REC, key, type, fallback, doc) ZP_REC_MEMBER_##type(key)

/* zp_rec_head_t, and zp_rec_<name>_t for each record: a member per field. */
typedef struct {
    uint64_t present; /* bit ZP_RI_HEAD_<key> per field read */
    ZP_RECORD_HEAD(ZP_REC_MEMBER_)
} zp_rec_head_t;
#define ZP_REC_STRUCT_(NAME, name, KIND, event, doc)                                               \
    typedef struct {                                                                               \
        uint64_t present; /* bit ZP_RI_<NAME>_<key> per field read */                             \
        ZP_RECORD_##NAME(ZP_REC_MEMBER_)                                                           \
    } zp_rec_##name##_t;
ZP_RECORDS(ZP_REC_STRUCT_)
#undef ZP_REC_STRUCT_

/* A field as the codec sees it; type is 'I', 'N', 'S', 'T' or 'A'. */
typedef struct {
    const char *key;
    char type;
    double fallback;
    size_t offset, size; /* in the record's struct */
    const char *doc;
} zp_rec_field_t;

/* The fields of record `t` (ZP_REC_NONE: the head), in order; their count in *n. */
const zp_rec_field_t *zp_records_fields(zp_record_type_t t, int *n);
/* The wire name of a kind ("stats", ...), and the kind a record type has. */
const char *zp_records_kind_name(int kind);
int zp_records_kind(zp_record_type_t t);
/* A metric record's `event` ("step", ...); "" for another kind. */
const char *zp_records_event(zp_record_type_t t);
const char *zp_records_doc(zp_record_type_t t);

/* Reads the head of `body` into h and returns the record type its kind and
 * event name; ZP_REC_NONE when `body` is not a map or the kind or event is
 * not declared here (h is filled with what is there all the same). */
zp_record_type_t zp_records_head(const msgpack_object *body, zp_rec_head_t *h);
/* Reads the fields of record type t from body into `out`, a zp_rec_<name>_t
 * (the head is read by zp_records_head): a field that is absent or of another
 * type reads as its fallback with its `present` bit clear; an integer field
 * given as a float is truncated; unknown keys are ignored. Returns t, or
 * ZP_REC_NONE for a t that is not a record type (out untouched). */
zp_record_type_t zp_records_decode(zp_record_type_t t, const msgpack_object *body, void *out);

#endif

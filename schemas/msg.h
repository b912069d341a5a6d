/* msg.h — the wire contract: every message zeus-pipe sends, declared once.
 *
 * A message is a ZeroMQ multipart message. Frame 0 is a msgpack map header
 * {"v": 1, "t": NAME, FIELD: value, ...}; further frames carry raw bytes
 * (little-endian arrays), never msgpack. zp_msg_decode() rejects anything
 * malformed — wrong version, unknown type, missing or mistyped field, wrong
 * frame count, payload length that does not match the header — with a
 * ZP_EPROTO and a reason; the receiver counts it, logs it and goes on.
 * See schemas/protocol.md for the conversations.
 */
#ifndef ZP_MSG_H
#define ZP_MSG_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#define ZP_WIRE_VERSION 1
#define ZP_MAX_FRAMES 5
#define ZP_MAX_BATCH (1u << 20) /* indices per task, fetch or batch */
#define ZP_MAX_ELEMS (16u << 20) /* elements per sample (the config and the dataset probe refuse more) */
/* A label of -1 in SAMPLES or RESULT: the loader could not load that sample
 * (loader.on_error: skip); its data are zeros and it is trained on nowhere. */
#define ZP_LABEL_SKIPPED (-1)
/* A random-resized crop as it was cut (dataset.augment.resized_crop): the
 * box (x, y, w, h) on the whole image as the cache keeps it (img_w x img_h:
 * the same whether the cache is on or off), and whether it was flipped.
 * SAMPLES and RESULT of train samples may carry one per sample in a fifth
 * frame, and a ring slot holds one per sample, for batches.log. x = -1: not
 * known (a skipped sample, or a sender that sent none). Little-endian int32s. */
typedef struct {
    int32_t x, y, w, h, flip, img_w, img_h;
} zp_crop_t;

/* Liveness: a loader silent for loader.heartbeat_ms x liveness is dead to
 * the cache stage, and one whose get() of a sample runs a heartbeat longer
 * ends itself; during a loader's first task (imports, a lazy open) both
 * allow ZP_FIRST_TASK_GRACE times as long. */
#define ZP_FIRST_TASK_GRACE 10

/* Sample element types, on the wire (`dtype`) and in cache values. uint8
 * samples are raw pixels that the trainer normalises; float32 ones are
 * normalised by the loaders. */
enum { ZP_DTYPE_F32 = 1, ZP_DTYPE_U8 = 2 };
static inline size_t zp_dtype_size(uint64_t dtype) { return dtype == ZP_DTYPE_U8 ? 1 : 4; }

/* Header fields: F(name, kind, meaning). kind U = unsigned integer, S = string
 * (at most 255 bytes), M = a map (events) or array (stat replies) kept as a
 * msgpack object, valid while the decoded message lives. */
#define ZP_FIELDS(F)                                                                               \
    F(id, U, "request or task id, chosen by the sender of the request")                           \
    F(credit, U, "tasks the loader can take in addition to those it holds")                        \
    F(split, U, "0 = train, 1 = test")                                                             \
    F(epoch, U, "epoch number, from 0")                                                            \
    F(n, U, "number of samples (indices) the message carries")                                     \
    F(offset, U, "position of the first sample inside its fetch; in SEEK, the entry of the "     \
                 "epoch's permutation the ranks' shards start at (absent: 0)")                   \
    F(elems, U, "elements per sample")                                                             \
    F(dtype, U, "element type of the samples: 1 = float32 (when absent), 2 = uint8")             \
    F(slot, U, "ring slot")                                                                        \
    F(gen, U, "generation of the slot; a FREE must echo the BATCH's")                              \
    F(nonce, U, "the ring's nonce (its header's): a trainer reads no slot of a ring of another")  \
    F(index, U, "batch number inside the epoch")                                                   \
    F(skipped, U, "samples left out because they could not be loaded (loader.on_error: skip)")     \
    F(batches, U, "batches in this epoch")                                                         \
    F(fp, U, "the sender's dataset and transform fingerprint (zp_cachedb_fingerprint_hash)")      \
    F(plan, U, "the splits a trainer reads each epoch: ZP_PLAN_* bits")                            \
    F(error, S, "what went wrong, for a person")                                                   \
    F(cmd, S, "control command: down")                                                             \
    F(body, M, "event fields, or the stat reply's array of stage records")

/* Messages: X(NAME, "wire name", frames, required fields, direction and meaning). */
#define ZP_MSGS(X)                                                                                 \
    X(READY, "ready", 1, ZP_B(credit),                                                              \
      "loader -> cache: I can take `credit` more tasks; `fp` (optional on the wire, refused "    \
      "when absent) must be the run's")                                                           \
    X(REFUSED, "refused", 1, ZP_B(error),                                                            \
      "cache -> loader: no task will come to you because of `error` (another dataset or "       \
      "transform, samples of another size, not matching their task); exit with status 2")       \
    X(HEARTBEAT, "heartbeat", 1, 0,                                                                  \
      "loader <-> cache: alive; sent when nothing else was sent for loader.heartbeat_ms")         \
    X(RETIRE, "retire", 1, 0, "loader -> cache: send me no more tasks; answer RETIRED")           \
    X(RETIRED, "retired", 1, 0,                                                                      \
      "cache -> loader: every task meant for you was sent before this; finish them and exit")    \
    X(TASK, "task", 2, ZP_B(id) | ZP_B(split) | ZP_B(n),                                                    \
      "cache -> loader: load `n` samples; frame 1 = u32 indices[n]; `epoch` optional")                               \
    X(SAMPLES, "samples", 4, ZP_B(id) | ZP_B(split) | ZP_B(n) | ZP_B(elems),                                   \
      "loader -> cache: results of task `id`; frames u32 indices[n], i32 labels[n], "              \
      "data[n*elems] of `dtype` (optional), and optionally zp_crop_t crops[n]")                  \
    X(VALUES, "values", 2, ZP_B(id) | ZP_B(split) | ZP_B(n),                                       \
      "loader -> cache, before the SAMPLES of task `id`: `n` cache values to keep (whole train "  \
      "images, or the records __getitem__ returned before a step after the cache; "               \
      "pipeline/cachedb/cachedb.h) back to back in frame 1; sent when the sample is made at "     \
      "assembly and the cache is on")                                                             \
    X(FAIL, "fail", 1, ZP_B(id) | ZP_B(error),                                                           \
      "loader -> cache, cache -> prefetch: task or fetch `id` failed with `error`")              \
    X(FETCH, "fetch", 2, ZP_B(id) | ZP_B(split) | ZP_B(n),                                                  \
      "prefetch -> cache: load `n` samples; frame 1 = u32 indices[n]; `epoch` optional")                             \
    X(RESULT, "result", 4, ZP_B(id) | ZP_B(split) | ZP_B(n) | ZP_B(elems) | ZP_B(offset),                         \
      "cache -> prefetch: samples for fetch `id` starting at `offset`; frames as SAMPLES")        \
    X(SYNC, "sync", 1, ZP_B(id),                                                                     \
      "prefetch -> cache: commit what you hold, then answer SYNCED with the same id")            \
    X(SYNCED, "synced", 1, ZP_B(id),                                                                 \
      "cache -> prefetch: every sample received before the SYNC is committed")                    \
    X(BATCH, "batch", 1, ZP_B(slot) | ZP_B(gen) | ZP_B(nonce) | ZP_B(split) | ZP_B(epoch) | ZP_B(index) | ZP_B(batches) | ZP_B(n) | ZP_B(elems), \
      "prefetch -> trainer: slot `slot` of the ring whose nonce is `nonce` holds batch `index` of `batches`")                   \
    X(FREE, "free", 1, ZP_B(slot) | ZP_B(gen), "trainer -> prefetch: the trainer is done with the slot") \
    X(EPOCH_END, "epoch_end", 1, ZP_B(split) | ZP_B(epoch) | ZP_B(batches) | ZP_B(n),                          \
      "prefetch -> trainer: the epoch's last batch was sent; `n` samples in all, of which "      \
      "`skipped` (optional) were left out")                                                      \
    X(END, "end", 1, 0, "prefetch -> trainer: no more batches; finish")                           \
    X(SEEK, "seek", 1, ZP_B(id) | ZP_B(split) | ZP_B(epoch) | ZP_B(index) | ZP_B(plan),              \
      "trainer -> prefetch: my next batch is batch `index` of `split` epoch `epoch` (of shards " \
      "from entry `offset` of its permutation, optional); after that "                          \
      "phase the phases I read are those of `plan`. Drop what you prepared; answer SEEKED")     \
    X(SEEKED, "seeked", 1, ZP_B(id),                                                                 \
      "prefetch -> trainer: what came before this was sent before SEEK `id`; what follows starts " \
      "at its position. With `error` the SEEK was refused and nothing changed")                  \
    X(REDUCE, "reduce", 3, ZP_B(id) | ZP_B(n) | ZP_B(elems),                                          \
      "trainer rank -> rank 0, and rank 0's sum back to every rank: reduction `id`; frames "       \
      "f32 values[n], f64 sums[elems] (trainer.gpus > 1 on the cpu backend)")                    \
    X(EVENT, "event", 1, ZP_B(body),                                                                  \
      "any stage -> logger: body {kind, stage, instance, ...}; sent without blocking")            \
    X(STAT_REQ, "stat_req", 1, 0, "stat -> logger: the latest counters of every stage")           \
    X(STAT_REP, "stat_rep", 1, ZP_B(body), "logger -> stat: body = array of stage records")          \
    X(CTL, "ctl", 1, ZP_B(cmd), "down -> supervisor: a control command")                             \
    X(CTL_REP, "ctl_rep", 1, 0, "supervisor -> down: accepted, or `error`")

/* SEEK's plan: the splits read each epoch, and their order (train first
 * unless ZP_PLAN_TEST_FIRST). Without a SEEK the prefetch runs both, train
 * first. */
enum { ZP_PLAN_TRAIN = 1, ZP_PLAN_TEST = 2, ZP_PLAN_TEST_FIRST = 4, ZP_PLAN_ALL = 7 };

#define ZP_FIELD_ENUM(name, kind, doc) ZP_F_##name,
enum { ZP_FIELDS(ZP_FIELD_ENUM) ZP_F_COUNT };
#undef ZP_FIELD_ENUM
#define ZP_B(f) (1u << ZP_F_##f)

#define ZP_MSG_ENUM(name, wire, frames, req, doc) ZP_MSG_##name,
typedef enum { ZP_MSG_NONE = 0, ZP_MSGS(ZP_MSG_ENUM) ZP_MSG_COUNT } zp_msg_type_t;
#undef ZP_MSG_ENUM

/* A decoded (or to-be-encoded) message. Payload pointers point into the
 * frames given to zp_msg_decode() and are valid while those frames live. */
typedef struct {
    zp_msg_type_t type;
    uint32_t present; /* bit per field seen */
    uint64_t id, credit, split, epoch, n, offset, elems, dtype, slot, gen, nonce, index, skipped,
        batches, fp, plan;
    char error[256], cmd[32];
    msgpack_object body;   /* M field; points into `unpacked` */
    msgpack_unpacked unpacked; /* owned; released by zp_msg_release() */
    int has_unpacked;
    /* payload frames, as {data, size}; frames[0] is the header */
    const void *frame[ZP_MAX_FRAMES];
    size_t frame_size[ZP_MAX_FRAMES];
    int nframes;
} zp_msg_t;

const char *zp_msg_name(zp_msg_type_t t);

/* Arithmetic on a peer's u64 fields that cannot wrap, for checks the codec
 * cannot make alone. zp_span_fits: [offset, offset + n) lies within `total`
 * items. zp_credit_add: have + more, saturated at max (have in 0..max). */
static inline int zp_span_fits(uint64_t offset, uint64_t n, uint64_t total)
{
    return offset <= total && n <= total - offset;
}
static inline int64_t zp_credit_add(int64_t have, uint64_t more, int64_t max)
{
    return have >= max || more >= (uint64_t)(max - have) ? max : have + (int64_t)more;
}

/* Decodes frames[0..nframes) into m. Returns 0, or ZP_EPROTO with a reason in
 * `why` (m must still be released). */
int zp_msg_decode(zp_msg_t *m, const void *const *frames, const size_t *sizes, int nframes,
                  char *why, size_t whylen);
void zp_msg_release(zp_msg_t *m);

/* Encodes the header of `m` (its type's required fields, and the optional ones
 * whose bit is set in m->present, from m's values) into
 * `sb`, which the caller initialised. For EVENT and STAT_REP use the packer
 * helpers below instead. */
int zp_msg_encode(const zp_msg_t *m, msgpack_sbuffer *sb);

/* Starts a header map of type t with `extra` more key/value pairs to come;
 * the caller packs them with msgpack_pack_* (used for EVENT and STAT_REP,
 * whose body is one map/array the caller writes: pass extra = 1 and pack
 * the key "body" and its value). */
void zp_msg_pack_begin(msgpack_packer *pk, zp_msg_type_t t, int extra);
void zp_msg_pack_str(msgpack_packer *pk, const char *s);

/* Looks up `key` in a msgpack map; NULL when absent. */
const msgpack_object *zp_msg_map_get(const msgpack_object *map, const char *key);
/* Typed lookups with a fallback value. */
double zp_msg_map_num(const msgpack_object *map, const char *key, double fallback);
/* Copies a string value into buf (empty when absent or not a string). */
const char *zp_msg_map_str(const msgpack_object *map, const char *key, char *buf, size_t len);

#endif

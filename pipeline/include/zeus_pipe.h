/* zeus_pipe.h — the public API of zeus-pipe: the trainer side of one rank's
 * ring, for a user's own training program. Link with -lzeuspipe
 * (libzeuspipe.so, built beside the zeus-pipe binary); nothing else of
 * zeus-pipe is needed to compile against this header.
 *
 *     char err[512];
 *     zp_client_t *c = zp_client_attach("runs/fashion-mnist", 0, 30000, err, sizeof err);
 *     if (!c) { fprintf(stderr, "%s\n", err); return 1; }
 *     zp_client_batch_t b;
 *     int k;
 *     while ((k = zp_client_next(c, &b, -1)) > 0 && k != ZP_CLIENT_END)
 *         if (k == ZP_CLIENT_BATCH) { ...use b.data, b.labels...; zp_client_release(c, &b); }
 *     zp_client_destroy(&c);
 *
 * The program is then rank r's trainer: the library receives the prefetch's
 * batches from the run's shared-memory ring (no copy), gives slots back,
 * proves each epoch's coverage in the same `epoch_end` record as the
 * built-in trainer, and sends its stats (the time waiting in
 * zp_client_next is the trainer's wait-in), timer samples and metrics to the
 * run's logger, so `zeus-pipe stat`, `report` and metrics.jsonl see it.
 *
 * ZP_CLIENT_API_VERSION is the version of this header's contract; it grows
 * only when a function or a field is added (the shared library's SOVERSION
 * changes only when one is removed or changed). A program may check at run
 * time that zp_client_api_version() >= the version it was compiled with.
 *
 * Errors are negative numbers: a ZP_CLIENT_E* code below, or a negative
 * errno where the operating system refused (-ENOENT, ...);
 * zp_client_strerror() names either. Not thread-safe: one client is used by
 * one thread at a time. */
#ifndef ZEUS_PIPE_H
#define ZEUS_PIPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZP_CLIENT_API_VERSION 7

typedef struct zp_client zp_client_t;

/* The errors this API returns, beside a negative errno. Their numbers are
 * those every version of the library has returned; zp_client_strerror()
 * names each by its short name ("ZP_ESTOP: ..." for ZP_CLIENT_ESTOP). The
 * library logs the details of each on stderr (a trainer.command's goes to
 * RUN/logs/trainer-R.log). */
enum {
    /* An argument NULL or out of range, a batch not of this client, a region
     * name the report does not know or a region already open (not open), a
     * seek position the prefetch refused: fix the call (zp_client_seek's err
     * and zp_client_error say which). */
    ZP_CLIENT_EINVAL = -10001,
    /* The run's config.yaml was refused (zp_client_attach's err quotes it). */
    ZP_CLIENT_ECONFIG = -10002,
    /* A malformed message on the run's sockets, a ring too small for a batch
     * or a page-locked one that a new ring would replace (zp_client_ring), a
     * rank's epoch sum that does not add up: restart the run. */
    ZP_CLIENT_EPROTO = -10003,
    /* The run's dataset description is corrupt or truncated. */
    ZP_CLIENT_EDATA = -10004,
    /* The shared-memory ring is a previous run's, not replaced by this run's
     * prefetch (it failed to start). */
    ZP_CLIENT_ESTALE = -10005,
    /* No free slot or credit (not returned by this API so far). */
    ZP_CLIENT_EFULL = -10006,
    /* Out of memory. */
    ZP_CLIENT_ENOMEM = -10007,
    /* A ZeroMQ call failed: a socket of the run could not be opened, or
     * another rank has gone away. */
    ZP_CLIENT_EZMQ = -10008,
    /* The run stopped before it ended (`zeus-pipe down`, a signal, a failed
     * stage): zp_client_error says by what. Detach. */
    ZP_CLIENT_ESTOP = -10009,
    /* Another rank did not reach the same epoch's end within
     * trainer.comm_timeout_s (a rank with a batch more, or a dead one). */
    ZP_CLIENT_ETIMEOUT = -10010,
    /* A CUDA, cuBLAS or NCCL call failed (not returned by this API so far). */
    ZP_CLIENT_EGPU = -10011
};

/* What zp_client_next returned. */
enum { ZP_CLIENT_BATCH = 1, ZP_CLIENT_EPOCH_END = 2, ZP_CLIENT_END = 3 };
/* Splits and sample types of a batch. */
enum { ZP_CLIENT_TRAIN = 0, ZP_CLIENT_TEST = 1 };
enum { ZP_CLIENT_F32 = 1, ZP_CLIENT_U8 = 2 };
/* A field's element type (since API version 4; 1 and 2 as above). */
enum {
    ZP_CLIENT_I8 = 3, ZP_CLIENT_I16 = 4, ZP_CLIENT_I32 = 5, ZP_CLIENT_I64 = 6, ZP_CLIENT_F16 = 7,
    ZP_CLIENT_BF16 = 8, ZP_CLIENT_F64 = 9
};
/* How a Python Dataset's items held the fields (a tuple or a dict). */
enum { ZP_CLIENT_ITEM_TUPLE = 0, ZP_CLIENT_ITEM_DICT = 1 };
/* The offset of a field that lies in the batch's labels (the built-in
 * sources' label), not in the samples. */
#define ZP_CLIENT_IN_LABELS SIZE_MAX

/* One field of every sample (since API version 4). A sample is a record of
 * sample_bytes; field f of sample i lies at
 *     (const char *)b.data + i * b.sample_bytes + f.offset
 * (an array of f.bytes: f.shape, little-endian, aligned to its element
 * size), or is b.labels[i] when f.offset is ZP_CLIENT_IN_LABELS. Owned by
 * the client, valid until zp_client_destroy. The built-in sources' samples
 * are ("image": float32 or uint8 C x H x W, "label": int32 in the labels);
 * a `dataset.source: python` run's are what its Dataset's items hold. */
typedef struct {
    const char *name;
    int dtype;          /* ZP_CLIENT_F32, ZP_CLIENT_U8, ZP_CLIENT_I8, ... */
    int ndim;           /* 0: a scalar */
    int normalize;      /* 1: the uint8 field dataset.python.normalize names, which the Python
                           package hands out normalised by zp_client_normalization */
    int64_t shape[6];
    size_t offset;      /* in the sample's record, or ZP_CLIENT_IN_LABELS */
    size_t bytes;       /* of one sample's field */
    uint64_t reserved[4];
} zp_client_field_t;
/* The phases a program reads (zp_client_seek's plan): the splits of each
 * epoch, train before test unless ZP_CLIENT_PLAN_TEST_FIRST. (Since API
 * version 3.) */
enum { ZP_CLIENT_PLAN_TRAIN = 1, ZP_CLIENT_PLAN_TEST = 2, ZP_CLIENT_PLAN_TEST_FIRST = 4 };

/* A batch (kind BATCH) or an epoch's end (kind EPOCH_END: split, epoch and
 * samples only). The pointers are into a ring slot: owned by the ring,
 * valid until zp_client_release of this batch; copy what must live longer. */
typedef struct {
    int kind;               /* ZP_CLIENT_BATCH or ZP_CLIENT_EPOCH_END */
    int split;              /* ZP_CLIENT_TRAIN or ZP_CLIENT_TEST */
    uint64_t epoch;         /* from 0 */
    uint64_t index;         /* the batch within its epoch, from 0 */
    uint64_t batches;       /* batches of this rank in the epoch */
    int64_t n;              /* samples in the batch */
    const uint32_t *indices; /* n sample indices in the split */
    const int32_t *labels;  /* n labels */
    const void *data;       /* n samples, each sample_bytes: float32 or uint8, C*H*W */
    int dtype;              /* ZP_CLIENT_F32 or ZP_CLIENT_U8 */
    int64_t c, h, w;        /* a sample's shape */
    size_t sample_bytes;
    int64_t samples;        /* EPOCH_END: samples this rank received in the epoch */
    int64_t expected;       /* EPOCH_END: samples the sampler sent it (skipped ones aside) */
    uint64_t slot, gen;     /* the slot, for zp_client_release: do not change */
    const zp_client_field_t *fields; /* what a sample holds: zp_client_fields (since version 4) */
    int64_t nfields;
    uint64_t reserved[6];
} zp_client_batch_t;

/* ZP_CLIENT_API_VERSION of the library loaded. */
int zp_client_api_version(void);

/* The name and a sentence for a negative return of this API. */
const char *zp_client_strerror(int rc);

/* Attaches to rank `rank` of the run in `run_dir` (the folder holding its
 * config.yaml, dataset/ and sock/, as `zeus-pipe up` made it): reads the
 * config and dataset description, connects to the rank's ring socket and
 * waits up to timeout_ms (< 0: for ever) for the prefetch's ring to exist.
 * Returns the client, or NULL with a sentence in err (no such run, rank out
 * of range, no ring within the timeout, ...). Destroy with zp_client_destroy. */
zp_client_t *zp_client_attach(const char *run_dir, int rank, int timeout_ms, char *err,
                              size_t errlen);

/* The fields of every sample of the run into *fields (owned by the client,
 * valid until zp_client_destroy) and, when item is not NULL, how a Python
 * Dataset's items held them (ZP_CLIENT_ITEM_*). Returns their number, or a
 * negative error for a NULL client or fields. (Since API version 4.) */
int zp_client_fields(const zp_client_t *c, const zp_client_field_t **fields, int *item);

/* The batches rank c gets in each epoch of `split` (ZP_CLIENT_TRAIN or
 * ZP_CLIENT_TEST), as the prefetch counts them: its shard of the split,
 * prefetch.batch_size, prefetch.drop_last (train), trainer.limit_*_batches.
 * Known from attach on, before any batch. Returns it, or a negative error
 * for a bad split. (Since API version 2.) */
int64_t zp_client_batches(const zp_client_t *c, int split);

/* What fixes the order of the run's batches for this rank: a position
 * (split, epoch, batch) names the same samples in every run where these are
 * the same, whatever the loaders and the cache. (Since API version 3.) */
typedef struct {
    uint64_t seed;         /* the run's seed */
    int64_t world, rank;   /* trainer ranks, and this one */
    int64_t batch_size;    /* prefetch.batch_size */
    int64_t epochs;        /* trainer.epochs: the most epochs the run gives; 0: no cap */
    int64_t samples[2];    /* samples of the train and test splits */
    int64_t batches[2];    /* this rank's batches per epoch: zp_client_batches */
    int shuffle, drop_last; /* prefetch.shuffle, prefetch.drop_last */
    int64_t classes;       /* the train split's classes (built-in sources; 1 for a Python
                              Dataset, whose targets are its own fields). Since version 4 */
    int64_t augment;       /* 1: the config asks for train augmentation (dataset.augment.*,
                              where: trainer), for zp_client_augment to apply. Since version 4 */
    uint64_t reserved[6];
} zp_client_run_t;

/* Fills *out. Returns 0, or a negative error for a NULL argument. (Since
 * API version 3.) */
int zp_client_run_info(const zp_client_t *c, zp_client_run_t *out);

/* Moves the position: the prefetch drops what it prepared and starts at
 * batch `batch` of `split`'s epoch `epoch`; after that phase it sends the
 * phases of `plan` (ZP_CLIENT_PLAN_* bits: the splits the program reads each
 * epoch, and their order) until the run's last epoch. Without a seek the
 * prefetch sends every epoch's train batches, then its test batches.
 * Release the batch you hold first. zp_client_next then releases, unread,
 * everything the prefetch sent before it heard the seek, and returns what
 * comes from the new position on; no epoch_end record is sent for a phase
 * left mid-way, and a phase entered at batch k gets a record of the whole
 * epoch, its batches before k counted as trained (by the run that saved the
 * position): its samples, distinct, checksum and digest are those of an
 * uninterrupted epoch, and its EPOCH_END's samples and expected count the
 * whole epoch on this rank. The batches of a position are the
 * same in every run of the same zp_client_run_t, so a saved position resumes
 * exactly. Returns 0; ZP_CLIENT_EINVAL with a sentence in err when the position or
 * plan is out of range (or the run has ended and the prefetch no longer
 * listens); or a socket's error. A position the prefetch refuses anyway (its
 * sentence logged) makes the next zp_client_next return ZP_CLIENT_EINVAL. (Since
 * API version 3.) */
int zp_client_seek(zp_client_t *c, int split, uint64_t epoch, uint64_t batch, unsigned plan,
                   char *err, size_t errlen);

/* zp_client_seek to batch `batch` of shards that start at entry `from` of
 * the epoch's permutation: the ranks take its entries from `from` on, rank r
 * those r, r + world, ... (zp_client_seek: from 0). A position saved by a run
 * of another number of ranks goes on this way: `from` is
 * zp_client_resume_entry's, batch 0, and the epoch's record counts the
 * entries before `from` as trained (on rank 0). (Since API version 6.) */
int zp_client_seek_from(zp_client_t *c, int split, uint64_t epoch, uint64_t from, uint64_t batch,
                        unsigned plan, char *err, size_t errlen);

/* Where an epoch of `split` goes on with this run's ranks when `world` ranks
 * had each read `batch` batches of shards from entry `from` (a position a
 * run of another number of ranks saved; its batch size is this run's): the
 * entry before which every sample was read, for zp_client_seek_from. Ranks
 * that read the same number of batches (they step together, as DDP's do)
 * leave none read past it. A negative error for a split, world or entry out
 * of range. (Since API version 6.) */
int64_t zp_client_resume_entry(const zp_client_t *c, int split, uint64_t from, int world,
                               uint64_t batch);

/* zp_client_resume_entry for ranks that were not in step, or of another
 * batch size: rank r of the `world` that saved had read batches[r] batches
 * of `batch_size` from entry `from` (a program that saves every rank's own
 * state; a batch size that keeps batch_size x world). Returns the entry
 * before which every sample was read, or a negative error; *repeats gets the
 * samples past it that a rank ahead had read too, which the resumed part
 * reads again. The next zp_client_seek_from of `split` counts them in its
 * epoch's record: `repeats`, and in `samples` (not in `distinct`), so the
 * record says so and still proves every sample. (Since API version 7.) */
int64_t zp_client_resume_ranks(zp_client_t *c, int split, uint64_t from, int world,
                               uint64_t batch_size, const uint64_t *batches, int64_t *repeats);

/* The run's train augmentation (dataset.augment.*: random-resized-crop,
 * padded crop, flip), as the built-in trainer applies it, drawn from (seed,
 * epoch, sample index): `in` holds batch b's n samples as normalised float32
 * (C x H x W each), `out` (not overlapping it) gets them augmented. Returns
 * 1 when it augmented; 0 when there is nothing to do (a test batch, or no
 * augmentation in the config: `out` untouched); a negative error. Timed as
 * the region `augment`. (Since API version 4.) */
int zp_client_augment(zp_client_t *c, const zp_client_batch_t *b, const float *in, float *out);

/* A resumed program's train steps so far (the `step` of its saved state):
 * the library counts on from there, so that the run's epoch_end records go
 * on from the first run's steps. Returns 0, or a negative error for a NULL
 * client or a negative step. (Since API version 4.) */
int zp_client_set_step(zp_client_t *c, int64_t step);

/* Whether any rank passes a non-zero `mine`: summed over the run's ranks
 * through rank 0, as an epoch's counts are, so that every rank gets the same
 * answer. Every rank must call it at the same point of its loop, the same
 * number of times (the package's stop_requested(), once a step: a stop every
 * rank agrees on). Returns 1, 0, or a negative error (ZP_CLIENT_ETIMEOUT:
 * a rank stayed silent for trainer.comm_timeout_s). (Since API version 5.) */
int zp_client_any(zp_client_t *c, int mine);

/* Waits up to timeout_ms (< 0: until something comes) for the next batch,
 * epoch end or end of the run, into *b. At an epoch's end the library has
 * summed the epoch's counts over the run's ranks (each rank waits there for
 * every other rank's end of the same epoch, up to trainer.comm_timeout_s; a
 * signal the program handles ends that wait with ZP_CLIENT_ESTOP) and rank 0 has
 * sent the whole epoch's `epoch_end` record (samples, distinct indices, index
 * checksum, order digest) to the logger. Returns ZP_CLIENT_BATCH,
 * ZP_CLIENT_EPOCH_END, ZP_CLIENT_END (no more: detach), 0 when the timeout
 * passed first, or a negative error. A batch not released by the next call
 * stays the program's: the prefetch has one slot fewer until it is. */
int zp_client_next(zp_client_t *c, zp_client_batch_t *b, int timeout_ms);

/* A sentence about the last error zp_client_next returned, when there is
 * more to say than zp_client_strerror: a run stopped before it ended
 * (`zeus-pipe down`, a signal, a failed stage: ZP_CLIENT_ESTOP, which the run's
 * supervisor says in RUN/stopped and a waiting program sees within 200 ms)
 * says by what. "" otherwise. Owned by the client. (Since API version 4.) */
const char *zp_client_error(const zp_client_t *c);

/* Gives batch b's slot back to the prefetch (FREE). Returns 0, or a
 * negative error (not a batch of this client). */
int zp_client_release(zp_client_t *c, const zp_client_batch_t *b);

/* Sends a metric record {event, step, epoch, keys[i]: values[i]...} to the
 * run's metrics.jsonl (event: "train_step", "test_epoch", ... ; n <= 32).
 * Returns 0, or ZP_CLIENT_EINVAL for bad arguments. */
int zp_client_log(zp_client_t *c, const char *event, int64_t step, int64_t epoch, int n,
                  const char *const *keys, const double *values);

/* Times a region of the program ("forward", "backward", "h2d", "comm",
 * "transform", "augment", "other", ...: the names of the report): its samples
 * appear in `zeus-pipe report` beside the pipeline's. Returns 0, or a
 * negative error for a name the report does not know or a region already
 * open (begin) or not open (end). */
int zp_client_region_begin(zp_client_t *c, const char *region);
int zp_client_region_end(zp_client_t *c, const char *region);

/* Detaches: the last stats and timer samples go to the logger, the ring is
 * unmapped and the socket closed. Batches not released are lost to the
 * prefetch. Safe on NULL and twice; sets *c to NULL. */
void zp_client_destroy(zp_client_t **c);

/* The mapping of rank c's shared-memory ring, into *base and *bytes: every
 * batch's indices, labels and data lie inside it. For a program that
 * page-locks it once to copy batches to a GPU without staging
 * (cudaHostRegister(*base, *bytes, 0); cudaHostUnregister before
 * zp_client_destroy, which unmaps it). Call it after the first
 * ZP_CLIENT_BATCH: until then the mapping may still be replaced by this
 * run's ring. From this call on it never changes (a BATCH of another ring is
 * then an error). Returns 0, or a negative error: no batch has come yet, or
 * an argument is NULL. (Since API version 3.) */
int zp_client_ring(zp_client_t *c, void **base, size_t *bytes);

/* The normalisation the built-in trainer applies to uint8 pixels p of
 * channel k: (p / 255 - mean[k]) / std[k], from the run's dataset.mean and
 * dataset.std (one value in the config: every channel). Writes the batch
 * shape's C channels (a Python Dataset's: the first dimension of the field
 * dataset.python.normalize names, 1 when it has none) into mean[0..C) and
 * std[0..C) (`channels`: the room in each, >= C). Returns C, or a negative error: an argument is NULL or
 * channels < C. (Since API version 3.) */
int zp_client_normalization(const zp_client_t *c, float *mean, float *std, int channels);

/* The same normalisation as a table, exactly as the built-in trainer
 * applies it: lut[k * 256 + p] is pixel value p of channel k normalised, for
 * the C channels zp_client_normalization gives (`channels`: the room, >= C;
 * lut holds channels x 256 floats). Returns C, or a negative error. (Since
 * API version 4.) */
int zp_client_normalization_table(const zp_client_t *c, float *lut, int channels);

#ifdef __cplusplus
}
#endif

#endif

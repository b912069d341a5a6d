/* config.h — the typed, validated configuration of a run.
 *
 * The keys are declared once, in schemas/config_keys.h. zp_config_load()
 * applies defaults, then the YAML file, then the dotted overrides, and
 * validates each value as it lands: on error nothing is started and the
 * caller prints `errbuf` and exits 2.
 */
#ifndef ZP_CONFIG_H
#define ZP_CONFIG_H

#include "schemas/config_keys.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define ZP_LIST_MAX 8

typedef struct {
    int n;
    int64_t v[ZP_LIST_MAX];
} zp_ints_t;

typedef struct {
    int n;
    double v[ZP_LIST_MAX];
} zp_floats_t;

/* A list of strings (trainer.command): n of them, each NUL-terminated. */
#define ZP_STRS_MAX 32
#define ZP_STR_LEN 256
typedef struct {
    int n;
    char v[ZP_STRS_MAX][ZP_STR_LEN];
} zp_strs_t;

#define ZP_SOURCE_ENUM(NAME, name) ZP_SOURCE_##NAME,
enum { ZP_SOURCES(ZP_SOURCE_ENUM) ZP_SOURCE_COUNT }; /* schemas/config_keys.h's table */
enum { ZP_BACKEND_CPU, ZP_BACKEND_NULL, ZP_BACKEND_CUDA, ZP_BACKEND_AUTO };
enum { ZP_MISMATCH_ERROR, ZP_MISMATCH_REBUILD };
enum { ZP_KEEP_LAST, ZP_KEEP_BEST, ZP_KEEP_ALL };
enum { ZP_ON_ERROR_STOP, ZP_ON_ERROR_SKIP };
enum { ZP_PY_RANDOM_REFUSE, ZP_PY_RANDOM_CACHE_FIRST_DRAW };
enum { ZP_TRANSPORT_IPC, ZP_TRANSPORT_TCP };
enum { ZP_SCHED_NONE, ZP_SCHED_STEP, ZP_SCHED_COSINE };
enum { ZP_OPTIM_SGD, ZP_OPTIM_ADAMW };
enum { ZP_AUG_IN_TRAINER, ZP_AUG_IN_LOADER };
enum { ZP_DT_FLOAT32, ZP_DT_UINT8 };
enum { ZP_ENC_RAW, ZP_ENC_JPEG };

/* The number of keys (rows of ZP_CONFIG_KEYS). */
#define ZP_CONFIG_KEY_ONE(...) +1
enum { ZP_CONFIG_NKEYS = 0 ZP_CONFIG_KEYS(ZP_CONFIG_KEY_ONE) };

/* Where a key's value came from, so that a rule checked after loading (a
 * dataset source's, pipeline/source/) points at the key as a load error
 * does (zp_config_fail): line 0, a default; line > 0, the line and column in
 * cfg->file; line -1, the override at offset col of cfg->overrides (col -1:
 * one that did not fit there). */
typedef struct {
    int32_t line, col;
} zp_config_where_t;

/* The epochs a run gives: trainer.epochs, or (0: a program's loop decides,
 * uncapped) as many as any run lasts. */
#define ZP_EPOCHS_UNCAPPED ((int64_t)1 << 40)
#define zp_config_epochs(cfg) ((cfg)->epochs ? (cfg)->epochs : ZP_EPOCHS_UNCAPPED)

typedef struct {
    char run_name[64];
    char run_dir[256];
    int64_t seed;
    int dataset_source;
    char dataset_path[256];
    char train_images[128], train_labels[128], test_images[128], test_labels[128];
    zp_floats_t mean, std;
    int dtype;
    int64_t synth_train, synth_test, synth_classes, synth_cost_us, synth_corrupt;
    char image_train[256], image_test[256];
    char py_class[256], py_normalize[32], py_version[64], py_interp[256];
    char py_augment_train[256], py_augment_test[256]; /* module:callable, "" none */
    int py_random; /* ZP_PY_RANDOM_* */
    char py_args[2048], py_splits[2048]; /* JSON objects */
    zp_strs_t py_path, py_fields;
    zp_strs_t arr_train, arr_test; /* hdf5, npy: globs of files (folders) per split */
    char arr_fields[2048];         /* JSON object: field name -> dataset path or file name */
    int64_t hdf5_chunk_cache;
    int64_t image_resize, image_crop, image_cache_side, image_max_pixels;
    zp_ints_t synth_shape;
    int aug_where;
    int64_t aug_padding;
    bool aug_resized_crop, aug_hflip;
    char aug_field[32];
    int64_t aug_size;
    zp_floats_t aug_scale, aug_ratio;
    bool cache_enabled;
    char cache_path[256];
    char cache_default[64]; /* cache.path was not set: what chose the default folder; "" set */
    int64_t cache_max_bytes, commit_every;
    int64_t heartbeat_ms, liveness, max_restarts;
    int on_error;
    int transport;
    char bind[128], allowed_keys[256];
    int on_mismatch;
    int cache_encoding;   /* ZP_ENC_* */
    int64_t jpeg_quality;
    int64_t loader_workers, task_size, credit;
    bool autoscale;                               /* loader.autoscale */
    int64_t min_workers, max_workers, autoscale_interval_s; /* max 0: the free cores */
    double autoscale_wait;
    int64_t batch_size, depth, window, readers, fetch_timeout_s;
    bool shuffle, drop_last;
    int backend;
    zp_ints_t hidden;
    int optimizer;
    double lr, momentum, weight_decay, eps;
    zp_floats_t betas;
    int schedule;
    int64_t warmup_steps, step_epochs;
    double gamma, min_lr;
    bool fast_dev_run;
    int64_t nan_at_step;
    int64_t epochs, limit_train_batches, limit_test_batches, log_every_steps, threads;
    int64_t gpus, comm_timeout_s;
    zp_strs_t trainer_command; /* empty: the built-in trainer */
    int64_t ckpt_every_epochs, ckpt_every_steps;
    int ckpt_keep;
    bool log_batches;
    int64_t stat_interval_ms;
    bool tensorboard; /* logger.tensorboard */
    int64_t trace_max_events;
    bool slurm_requeue; /* slurm.requeue */

    char file[512]; /* the file it was loaded from */
    zp_config_where_t where[ZP_CONFIG_NKEYS]; /* where each key was set, in table order */
    char overrides[1024];                     /* the overrides applied, each NUL-terminated */
} zp_config_t;

/* Loads `path` (NULL: defaults only, then overrides) and `n` overrides of the
 * form "dotted.key=value": every key's type and range and the rules between
 * keys (config_check.c). A user's config is then finished by its dataset
 * source (zp_source_config in pipeline/source/source.h: the source's own
 * rules, the default cache.path). Returns 0, or ZP_ECONFIG with a message of the form
 * "FILE:LINE:COL: KEY: what is wrong" (followed by the offending line) in errbuf.
 * A relative path key (run.dir, dataset.path, cache.path, dataset.python.path
 * and .interpreter) written in the file is put in the file's folder as `path`
 * names it ("conf/a.yaml"'s `path: data` is conf/data); a default or an
 * override stays relative to the working directory. */
int zp_config_load(zp_config_t *cfg, const char *path, char *const *overrides, int n, char *errbuf,
                   size_t errlen);

/* Whether the config file or an override set `key` (not its default). */
bool zp_config_written(const zp_config_t *cfg, const char *key);

/* Writes an error about `key` into err as zp_config_load() does, pointed at
 * where the key was set ("FILE:LINE:COL: KEY: what" and the line, or
 * "override 'KEY=VALUE': KEY: what"). Returns ZP_ECONFIG. */
__attribute__((format(printf, 5, 6))) int zp_config_fail(const zp_config_t *cfg, const char *key,
                                                         char *err, size_t errlen,
                                                         const char *fmt, ...);

/* Sets cache.path, which the config did not set, to the default folder of the
 * dataset called `name` (its last part after '/' or ':' names the folder)
 * whose identity is the text `identity` (hashed into the folder's name), and
 * cache_default to what chose that folder. 0, or ZP_ECONFIG with err filled
 * when the folder's path would not fit. pipeline/source/ calls it (the
 * dataset's source knows what names its dataset). */
int zp_config_default_cache(zp_config_t *cfg, const char *name, const char *identity, char *err,
                            size_t errlen);

/* Loads a run's own config.yaml, as zp_config_print() wrote it: its paths are
 * the ones the supervisor used, relative to the run's working directory, not
 * to the run's folder. For the stages, the client library and the commands
 * that read RUN/config.yaml. */
int zp_config_load_run(zp_config_t *cfg, const char *path, char *errbuf, size_t errlen);
/* The same with KEY=VALUE overrides (a resume with another trainer.gpus). */
int zp_config_load_run_with(zp_config_t *cfg, const char *path, char *const *overrides, int n,
                            char *errbuf, size_t errlen);

/* The folder of the config file cfg was loaded from (absolute), where its
 * relative trainer.command and dataset.python.path point; the working
 * directory for a config of no file. */
void zp_config_folder(const zp_config_t *cfg, char *out, size_t len);

/* A mapping key's JSON text (type JSON, a mapping of names to strings, as
 * dataset.fields) read into n pairs: name[i] -> value[i]. Returns n (0..max), or
 * -1 with a sentence in err: a value that is not a string or a number, more
 * than `max` names, a name or a value longer than the arrays hold. */
#define ZP_CONFIG_PAIR_NAME 32
#define ZP_CONFIG_PAIR_VALUE 256
int zp_config_pairs(const char *json, char (*name)[ZP_CONFIG_PAIR_NAME],
                    char (*value)[ZP_CONFIG_PAIR_VALUE], int max, char *err, size_t errlen);

/* Writes the resolved configuration as YAML that zp_config_load() reads back. */
void zp_config_print(const zp_config_t *cfg, FILE *out);

/* Writes the key table: key, type, default, range, help. `markdown` for
 * docs/configuration.md (tests/integration/test_docs.py holds the two equal). */
void zp_config_print_keys(FILE *out, bool markdown);

#endif

/* zeus_pipe_loader.h — the loader side of libzeuspipe.so: a loader process
 * whose samples come from code in another language, the Python package's
 * `python3 -m zeus_pipe._loader_process` for `dataset.source: python`.
 *
 * The whole loader protocol stays in the library: zp_loader_serve() is the
 * loader stage (credit, tasks, heartbeats, SAMPLES, RETIRE on SIGRTMIN+1,
 * REFUSED, reconnects, stats and timers to the run's logger), exactly as
 * `zeus-pipe stage loader` runs it, with one difference: each sample is made
 * by calling `get`. The caller only builds the sample's record.
 *
 *     static int get(void *ctx, int split, uint32_t index, uint64_t epoch,
 *                    void *record, size_t bytes, char *err, size_t errlen)
 *     { ...write sample `index` of `split` (0 train, 1 test) into record... return 0; }
 *     int main(int argc, char **argv) { return zp_loader_serve(argc - 1, argv + 1, get, NULL); }
 *
 * `get` runs on the thread that called zp_loader_serve, between heartbeats:
 * a `get` that never returns stops them, and the run's cache stage declares
 * the loader dead after loader.heartbeat_ms x loader.liveness and gives its
 * task to another. (Since loader API version 1.) */
#ifndef ZEUS_PIPE_LOADER_H
#define ZEUS_PIPE_LOADER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZP_LOADER_API_VERSION 2

/* Writes sample `index` of `split` — the task's `epoch`, for code that draws
 * random numbers — into record[0..bytes): its fields as the run's dataset
 * description lays them out (RUN/dataset/meta: each field at its offset,
 * little-endian). Returns 0; 1 when this sample cannot be loaded (a sentence
 * in err: loader.on_error skips it or stops the run, naming it); a negative
 * number to stop this loader (err says why). */
typedef int (*zp_loader_get_fn)(void *ctx, int split, uint32_t index, uint64_t epoch,
                                void *record, size_t bytes, char *err, size_t errlen);

/* The same, for a run whose Dataset has an augment step after the cache
 * (dataset.python.augment.*; RUN/dataset/meta's `augment` and `cached`
 * lines). On a split with a step `keep` is not NULL and the record to build
 * the sample from is one of the cache's (the `cached` fields):
 *   - `cached` not NULL: the record the cache holds for this sample, owned by
 *     the library and valid until `get` returns (read-only: it may lie in the
 *     cache's map); no __getitem__ is needed;
 *   - `cached` NULL: the caller makes it (its __getitem__) into keep[0..the
 *     cached record's bytes), which the library sends to the cache.
 * Then it applies the step, seeded from (seed, split, epoch, index), and
 * writes the sample into record[0..bytes) (the `fields` of the meta). On a
 * split without a step `cached` and `keep` are NULL: as zp_loader_get_fn.
 * (Since loader API version 2.) */
typedef int (*zp_loader_get2_fn)(void *ctx, int split, uint32_t index, uint64_t epoch,
                                 const void *cached, void *keep, void *record, size_t bytes,
                                 char *err, size_t errlen);

/* ZP_LOADER_API_VERSION of the library loaded. */
int zp_loader_api_version(void);

/* Runs a loader of the run named by the arguments (those of `zeus-pipe stage
 * loader`, after the stage's name: --run DIR --instance I [--mode M]
 * [--connect HOST:PORT --server-key F --key F]) until it is retired, stopped
 * (SIGINT, SIGTERM) or refused. It installs the handlers of SIGINT, SIGTERM,
 * SIGRTMIN+1 (retire) and SIGUSR1 (ignored by a loader: Slurm's warning
 * signal reaches every process of a job step). Returns the exit status for the process: 0, 1 failed, 2 a
 * config error that a restart cannot mend (refused, the run is not a
 * `dataset.source: python` one), 128 + N stopped by signal N. */
int zp_loader_serve(int argc, char **argv, zp_loader_get_fn get, void *ctx);

/* zp_loader_serve with a zp_loader_get2_fn: the loader of a run with an
 * augment step (zp_loader_serve refuses such a run). Since loader API
 * version 2. */
int zp_loader_serve2(int argc, char **argv, zp_loader_get2_fn get, void *ctx);

#ifdef __cplusplus
}
#endif

#endif

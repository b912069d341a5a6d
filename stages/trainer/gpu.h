/* gpu.h — the cuda backend: the cpu backend's MLP, optimizers and loss on one
 * GPU, fed straight from the prefetch ring.
 *
 * The ring's shared mapping is page-locked once (cudaHostRegister), so a
 * batch crosses PCIe by DMA from where the prefetch wrote it. Two streams:
 * the copy stream moves batch k into device buffer k % 2 while the compute
 * stream still trains on batch k - 1; events order them (a buffer is not
 * overwritten before the compute that reads it is done, a compute does not
 * start before its copy is). The host only enqueues work: it waits for a
 * batch's copy (zp_gpu_wait_copy) before it gives the ring slot back, and for
 * the compute stream only where it reads results (metrics, checkpoints).
 *
 * Matrix products go through cuBLAS; bias, ReLU, softmax cross-entropy and
 * the optimizer updates are small kernels of ours. Loss sums and correct
 * counts accumulate on the device and are read when they are logged.
 *
 * GPU timers (the Deep500 model): every batch records CUDA events around its
 * copy, forward and backward, from a bounded pool; completed events are
 * harvested without waiting (zp_gpu_harvest) into the h2d, forward and
 * backward regions; when the pool is full a batch goes untimed and counted.
 *
 * The CUDA code lives in a module, zeus-pipe-cuda.so beside the executable
 * (or $ZP_CUDA_MODULE), that gpu_load.c opens on first use: no other stage
 * or command maps the CUDA libraries (hundreds of MB, a second of start-up).
 * Without the module (a build without the CUDA toolkit) there is no device,
 * and zp_gpu_count says why. */
#ifndef ZP_GPU_H
#define ZP_GPU_H

#include "pipeline/image/augment.h"
#include "pipeline/base/timer.h"
#include "stages/trainer/mlp.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zp_gpu zp_gpu_t;

/* Number of usable GPUs; 0 (with the reason in `why`) without a driver, a
 * device or CUDA in this build. */
int zp_gpu_count(char *why, size_t len);

/* Device `device`, with the host model's weights and optimizer state;
 * page-locks [ring, ring + ring_bytes). Samples are float32, or with `lut`
 * uint8 pixels of `channels` channels that the GPU normalises with that table
 * (zp_dataset_normalize_lut's, channels x 256). Returns 0, or ZP_EGPU (no module,
 * no such device, a CUDA or cuBLAS failure: the reason in `err`) or
 * ZP_ENOMEM, with *out NULL. */
int zp_gpu_create(zp_gpu_t **out, int device, const zp_mlp_t *host, void *ring, size_t ring_bytes,
                const float *lut, int channels, char *err, size_t len);
/* Waits for all work, unregisters the ring, frees everything. Safe on NULL
 * and twice; NULLs *g. */
void zp_gpu_destroy(zp_gpu_t **g);

/* Random augmentation on the GPU: the sample shape, the padding, the value
 * of black per channel, and each sample's draw (zp_augment_draw). */
typedef struct {
    int c, h, w, padding;
    const float *fill;
    const zp_aug_draw_t *draws;
} zp_gpu_aug_t;

/* Enqueues batch: n samples `x` (n x dims[0] floats or bytes) and `labels` inside the
 * registered ring, of split `split` (0 = train: forward, backward and an
 * optimizer step with `o`; else forward only), augmented on the GPU first
 * when `aug` is not NULL (zp_augment's map, computed per output pixel).
 * Returns once enqueued; `aug` may be reused then. */
int zp_gpu_batch(zp_gpu_t *g, const void *x, const int32_t *labels, int n, int split,
                 const zp_opt_t *o, const zp_gpu_aug_t *aug);
/* Blocks until the last enqueued batch has left the ring (its slot may be
 * written again). */
int zp_gpu_wait_copy(zp_gpu_t *g);

/* Loss sum and correct count of `split` since the last call, and whether a
 * loss or gradient has not been finite so far; waits for the compute stream. */
int zp_gpu_take(zp_gpu_t *g, int split, double *loss_sum, int64_t *correct, int *non_finite);

/* Copies weights and optimizer state to the host model (for checkpoints). */
int zp_gpu_download(zp_gpu_t *g, zp_mlp_t *host);

/* Adds the completed batches' GPU times to the h2d, forward and backward
 * regions; waits for the GPU only with `wait` (at the end of a run). Returns
 * the batches left untimed so far (pool full). */
int64_t zp_gpu_harvest(zp_gpu_t *g, zp_timers_t *tm, int wait);

/* "NVIDIA H100 80GB HBM3, 132 SMs, 79.1 GiB" */
const char *zp_gpu_name(const zp_gpu_t *g);

/* Data-parallel ranks (trainer.gpus > 1). Rank 0 makes an NCCL unique id
 * (zp_gpu_nccl_id) and hands it to the others; every rank joins the
 * communicator with it (zp_gpu_join, after zp_gpu_create). From then on every
 * train batch's gradients, weighted by its samples, are summed over the ranks
 * with ncclAllReduce on the compute stream (timed into `comm`) and the update
 * divides by the ranks' total: the mean over all their samples. A rank with no
 * batch for a step (a shard a batch shorter, or a batch skipped whole) calls
 * zp_gpu_batch with n = 0: it adds zeros and takes the step with the others.
 * ZP_EGPU, with the reason, where the module has no NCCL. */
#define ZP_NCCL_ID_BYTES 128
int zp_gpu_nccl_id(uint8_t *id, char *err, size_t len);
/* The communicator is non-blocking: joining, and every later wait on a
 * stream that holds a sum, is polled; past `timeout_s` (trainer.comm_timeout_s),
 * on an NCCL error or when the stage is asked to stop, it is aborted
 * (ncclCommAbort) and the call fails naming what did not complete, so a rank
 * that died or never joined cannot hold the others. */
int zp_gpu_join(zp_gpu_t *g, const uint8_t *id, int rank, int world, int timeout_s, char *err,
                size_t len);

/* What the module exports: one function that returns its table. */
typedef struct {
    int (*count)(char *why, size_t len);
    int (*open)(zp_gpu_t **out, int device, const zp_mlp_t *host, void *ring, size_t ring_bytes,
                const float *lut, int channels, char *err, size_t len);
    void (*destroy)(zp_gpu_t **g);
    int (*batch)(zp_gpu_t *g, const void *x, const int32_t *labels, int n, int split,
                 const zp_opt_t *o, const zp_gpu_aug_t *aug);
    int (*wait_copy)(zp_gpu_t *g);
    int (*take)(zp_gpu_t *g, int split, double *loss_sum, int64_t *correct, int *non_finite);
    int (*download)(zp_gpu_t *g, zp_mlp_t *host);
    int64_t (*harvest)(zp_gpu_t *g, zp_timers_t *tm, int wait);
    const char *(*name)(const zp_gpu_t *g);
    int (*nccl_id)(uint8_t *id, char *err, size_t len);
    int (*join)(zp_gpu_t *g, const uint8_t *id, int rank, int world, int timeout_s, char *err,
                size_t len);
} zp_gpu_api_t;
#define ZP_GPU_MODULE_SYMBOL "zp_gpu_module_api"
typedef const zp_gpu_api_t *zp_gpu_module_fn(void);

#ifdef __cplusplus
}
#endif

#endif

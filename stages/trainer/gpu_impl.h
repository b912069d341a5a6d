/* gpu_impl.h — inside the CUDA module only (gpu.cu, gpu_ranks.cu): the
 * device state behind zp_gpu_t and what the two files share. C code sees
 * gpu.h alone. */
#ifndef ZP_GPU_IMPL_H
#define ZP_GPU_IMPL_H

extern "C" {
#include "pipeline/image/augment.h"
#include "pipeline/base/log.h"
#include "pipeline/base/timer.h"
#include "stages/trainer/mlp.h"
}
#include "stages/trainer/gpu.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#ifdef ZP_HAVE_NCCL
#include <nccl.h>
#endif
#include <signal.h>
#include <stdio.h>

extern "C" volatile sig_atomic_t zp_stop; /* the stage's stop flag (pipeline/stage/stage.h) */

#define BUFS 2        /* device batch buffers: copy of k + 1 while k computes */
#define TIMED 64      /* batches whose events may be in flight */
#define THREADS 256

/* copy stream; compute stream (EV_COMM1: the gradient sum's end, ranks > 1) */
enum { EV_COPY0, EV_COPY1, EV_FWD0, EV_FWD1, EV_BWD1, EV_COMM1, EV_COUNT };

typedef struct {
    cudaEvent_t ev[EV_COUNT];
    int pending; /* recorded, not harvested */
    int train;   /* has a backward */
} timed_t;

/* Device counters, one set per split. */
typedef struct {
    double loss[2];
    unsigned long long correct[2];
    int non_finite;
} counters_t;

struct zp_gpu {
    int device;
    char name[160];
    cudaStream_t copy, compute;
    cublasHandle_t blas;
    void *ring;
    int registered;
    int nlayers, dims[ZP_MLP_MAX_LAYERS + 1], max_batch;
    float *w[ZP_MLP_MAX_LAYERS], *b[ZP_MLP_MAX_LAYERS], *gw[ZP_MLP_MAX_LAYERS],
        *gb[ZP_MLP_MAX_LAYERS], *vw[ZP_MLP_MAX_LAYERS], *vb[ZP_MLP_MAX_LAYERS],
        *sw[ZP_MLP_MAX_LAYERS], *sb[ZP_MLP_MAX_LAYERS];
    float *act[ZP_MLP_MAX_LAYERS + 1], *grad[ZP_MLP_MAX_LAYERS + 1];
    float *x[BUFS];
    uint8_t *raw[BUFS]; /* uint8 samples: the copy lands here, a kernel normalises into x */
    float *lut;         /* their normalisation, channels x 256; NULL for float32 samples */
    int channels;
    int32_t *labels[BUFS];
    float *ones; /* max_batch ones: bias gradients as a matrix-vector product */
    float *augmented;        /* the augmented batch the forward reads; NULL until needed */
    zp_aug_draw_t *draws[BUFS];
    float *fill;             /* per channel, uploaded with the first augmented batch */
    counters_t *counters;
    cudaEvent_t copied[BUFS];  /* batch in buffer i has arrived */
    cudaEvent_t consumed[BUFS]; /* the compute reading buffer i is done */
    int next;                   /* buffer of the next batch */
    int64_t batches;
    timed_t timed[TIMED];
    int64_t untimed;
    int world;        /* ranks summing gradients; 1 without zp_gpu_join */
    float *count;     /* world > 1: the step's samples over all ranks (device) */
#ifdef ZP_HAVE_NCCL
    ncclComm_t nccl; /* non-blocking: every wait on it is polled, and aborted past the timeout */
#endif
    int64_t comm_timeout_ns; /* trainer.comm_timeout_s */
};

static inline int cuda_fail(cudaError_t e, const char *what, char *err, size_t len)
{
    snprintf(err, len, "%s: %s", what, cudaGetErrorString(e));
    return ZP_EGPU;
}

/* Logs a failure of an enqueue path, where there is no caller buffer. */
#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            zp_error("%s: %s", #call, cudaGetErrorString(e_));                                    \
            return ZP_EGPU;                                                                         \
        }                                                                                          \
    } while (0)
#define CHECK_BLAS(call)                                                                           \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            zp_error("%s: cuBLAS status %d", #call, (int)s_);                                     \
            return ZP_EGPU;                                                                         \
        }                                                                                          \
    } while (0)

static inline unsigned blocks(size_t n) { return (unsigned)((n + THREADS - 1) / THREADS); }

/* gpu_ranks.cu: waits that an NCCL sum cannot hold forever, the gradient sum
 * of ranks > 1, and the module's nccl_id and join. */
int gpu_wait_for(zp_gpu_t *g, cudaStream_t s, cudaEvent_t ev);
int gpu_wait_stream(zp_gpu_t *g, cudaStream_t s);
int gpu_sum_grads(zp_gpu_t *g, int n);
int gpu_nccl_id(uint8_t *id, char *err, size_t len);
int gpu_join(zp_gpu_t *g, const uint8_t *id, int rank, int world, int timeout_s, char *err,
             size_t len);

/* gpu.cu: x[0..n) = v on stream s. */
void gpu_fill(float *x, size_t n, float v, cudaStream_t s);

#endif

/* gpu_ranks.cu — the cuda backend's data-parallel ranks (gpu.h): the NCCL
 * communicator, the gradient sum on the compute stream, and the waits that
 * poll it so that a dead or hung rank cannot hold the others. */
#include "stages/trainer/gpu_impl.h"

#include <string.h>
#include <unistd.h>

#ifdef ZP_HAVE_NCCL
/* Aborts the communicator: every kernel of it still waiting on a peer ends,
 * so the streams can drain. The rank cannot sum again; it stops. */
static int nccl_abort(zp_gpu_t *g, const char *what)
{
    zp_error("NCCL: %s; aborting the communicator", what);
    if (g->nccl)
        ncclCommAbort(g->nccl);
    g->nccl = NULL;
    return ZP_EGPU;
}

/* Until the communicator is done with what was issued (ncclInProgress no
 * more): 0, or its error, the stop flag or the timeout, each aborting it. */
static int nccl_settle(zp_gpu_t *g, const char *what)
{
    int64_t deadline = zp_now_ns() + g->comm_timeout_ns;
    char why[300];
    for (;;) {
        ncclResult_t st = ncclInProgress;
        ncclResult_t r = ncclCommGetAsyncError(g->nccl, &st);
        if (r == ncclSuccess && st == ncclSuccess)
            return 0;
        if (r != ncclSuccess || st != ncclInProgress) {
            snprintf(why, sizeof why, "%s: %s", what, ncclGetErrorString(r != ncclSuccess ? r : st));
            return nccl_abort(g, why);
        }
        if (zp_stop)
            return nccl_abort(g, "stopped while the ranks were still communicating");
        if (zp_now_ns() > deadline) {
            snprintf(why, sizeof why, "%s did not complete within trainer.comm_timeout_s (%lld s): a "
                     "rank died or never joined", what, (long long)(g->comm_timeout_ns / 1000000000));
            return nccl_abort(g, why);
        }
        usleep(1000);
    }
}
#endif

/* Waits for `s` to drain. With ranks, polled rather than blocked on: an
 * all-reduce whose peer is dead never ends by itself, and no signal
 * interrupts cudaStreamSynchronize, so past trainer.comm_timeout_s, on an
 * NCCL error or on a stop request the communicator is aborted. */
int gpu_wait_for(zp_gpu_t *g, cudaStream_t s, cudaEvent_t ev)
{
#ifdef ZP_HAVE_NCCL
    int64_t deadline = zp_now_ns() + g->comm_timeout_ns;
    while (g->nccl) {
        cudaError_t e = ev ? cudaEventQuery(ev) : cudaStreamQuery(s);
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady) {
            zp_error("%s: %s", ev ? "cudaEventQuery" : "cudaStreamQuery", cudaGetErrorString(e));
            return ZP_EGPU;
        }
        ncclResult_t st = ncclSuccess;
        if (ncclCommGetAsyncError(g->nccl, &st) != ncclSuccess || (st != ncclSuccess && st != ncclInProgress))
            return nccl_abort(g, ncclGetErrorString(st));
        if (zp_stop)
            return nccl_abort(g, "stopped during a gradient sum");
        if (zp_now_ns() > deadline)
            return nccl_abort(g, "a gradient sum did not complete within trainer.comm_timeout_s: a "
                                 "rank died or hangs");
        usleep(200);
    }
#endif
    if (ev)
        CHECK(cudaEventSynchronize(ev));
    else
        CHECK(cudaStreamSynchronize(s));
    return 0;
}

int gpu_wait_stream(zp_gpu_t *g, cudaStream_t s) { return gpu_wait_for(g, s, NULL); }

/* Ranks > 1: this rank's gradients (means over its n samples) times n, and
 * n, summed over the ranks; step() divides by the total. n = 0: zeros. */
int gpu_sum_grads(zp_gpu_t *g, int n)
{
#ifdef ZP_HAVE_NCCL
    const float fn = (float)n;
    if (!g->nccl)
        return ZP_EGPU; /* aborted before */
    for (int l = 0; l < g->nlayers; l++) {
        size_t nw = (size_t)g->dims[l] * g->dims[l + 1], nb = (size_t)g->dims[l + 1];
        if (n) {
            CHECK_BLAS(cublasSscal(g->blas, (int)nw, &fn, g->gw[l], 1));
            CHECK_BLAS(cublasSscal(g->blas, (int)nb, &fn, g->gb[l], 1));
        } else {
            CHECK(cudaMemsetAsync(g->gw[l], 0, nw * sizeof(float), g->compute));
            CHECK(cudaMemsetAsync(g->gb[l], 0, nb * sizeof(float), g->compute));
        }
    }
    gpu_fill(g->count, 1, fn, g->compute);
    CHECK(cudaGetLastError());
    /* a non-blocking communicator: a call may answer ncclInProgress; the group
     * is closed whatever happened inside it */
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess)
        return nccl_abort(g, ncclGetErrorString(r));
    for (int l = 0; l < g->nlayers && (r == ncclSuccess || r == ncclInProgress); l++) {
        size_t nw = (size_t)g->dims[l] * g->dims[l + 1], nb = (size_t)g->dims[l + 1];
        r = ncclAllReduce(g->gw[l], g->gw[l], nw, ncclFloat, ncclSum, g->nccl, g->compute);
        if (r == ncclSuccess || r == ncclInProgress)
            r = ncclAllReduce(g->gb[l], g->gb[l], nb, ncclFloat, ncclSum, g->nccl, g->compute);
    }
    if (r == ncclSuccess || r == ncclInProgress)
        r = ncclAllReduce(g->count, g->count, 1, ncclFloat, ncclSum, g->nccl, g->compute);
    ncclResult_t end = ncclGroupEnd();
    if (r != ncclSuccess && r != ncclInProgress)
        return nccl_abort(g, ncclGetErrorString(r));
    if (end != ncclSuccess && end != ncclInProgress)
        return nccl_abort(g, ncclGetErrorString(end));
    return end == ncclInProgress ? nccl_settle(g, "enqueueing the gradient sum") : 0;
#else
    (void)g, (void)n;
    return ZP_EGPU;
#endif
}

int gpu_nccl_id(uint8_t *id, char *err, size_t len)
{
#ifdef ZP_HAVE_NCCL
    static_assert(sizeof(ncclUniqueId) == ZP_NCCL_ID_BYTES, "ncclUniqueId is not 128 bytes");
    ncclUniqueId u;
    ncclResult_t r = ncclGetUniqueId(&u);
    if (r != ncclSuccess) {
        snprintf(err, len, "ncclGetUniqueId: %s", ncclGetErrorString(r));
        return ZP_EGPU;
    }
    memcpy(id, &u, sizeof u);
    return 0;
#else
    (void)id;
    snprintf(err, len, "this build's CUDA module has no NCCL (nccl.h and libnccl were not found "
                       "when it was built)");
    return ZP_EGPU;
#endif
}

int gpu_join(zp_gpu_t *g, const uint8_t *id, int rank, int world, int timeout_s, char *err,
             size_t len)
{
#ifdef ZP_HAVE_NCCL
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    cudaError_t e = cudaSetDevice(g->device);
    if (e == cudaSuccess && !g->count)
        e = cudaMalloc((void **)&g->count, sizeof(float));
    if (e != cudaSuccess)
        return cuda_fail(e, "joining the ranks", err, len);
    g->comm_timeout_ns = (int64_t)timeout_s * 1000000000;
    /* non-blocking: a rank that never joins must not hold the others in here */
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&g->nccl, world, u, rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        if (g->nccl)
            ncclCommAbort(g->nccl);
        g->nccl = NULL;
        snprintf(err, len, "ncclCommInitRankConfig (rank %d of %d): %s", rank, world,
                 ncclGetErrorString(r));
        return ZP_EGPU;
    }
    char what[96];
    snprintf(what, sizeof what, "joining the communicator (rank %d of %d)", rank, world);
    if (nccl_settle(g, what)) {
        snprintf(err, len, "%s failed: not every rank joined (see the error above)", what);
        return ZP_EGPU;
    }
    g->world = world;
    return 0;
#else
    (void)g, (void)rank, (void)world, (void)timeout_s;
    return gpu_nccl_id((uint8_t *)id, err, len);
#endif
}


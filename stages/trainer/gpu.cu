/* gpu.cu — the cuda backend (see gpu.h). Layouts are the cpu backend's:
 * row-major activations [n x features], weights [in x out]. cuBLAS is
 * column-major, so every product is written for the transposes: a row-major
 * [r x c] matrix is a column-major [c x r] one with leading dimension c. */
#include "stages/trainer/gpu_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>



/* ---- kernels ------------------------------------------------------------------------------- */

/* z[i, j] += b[j], then ReLU unless this is the last layer. */
__global__ void bias_relu(float *z, const float *b, int n, int o, int relu)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)n * o)
        return;
    float v = z[i] + b[i % o];
    z[i] = !relu || v > 0 ? v : 0; /* as mlp.c: a NaN becomes 0 after a ReLU */
}

/* One row per thread: softmax of the logits in place; the loss and the hit
 * add to the split's counters; with `grad`, dL/dlogits = (p - onehot) / n. */
__global__ void softmax_xent(float *p, const int32_t *labels, int n, int c, float *grad,
                             counters_t *k, int split)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float *row = p + (size_t)i * c;
    int arg = zp_softmax_row(row, c);
    int y = labels[i] >= 0 && labels[i] < c ? labels[i] : 0;
    double loss = -log((double)(row[y] > 1e-30f ? row[y] : 1e-30f));
    if (!isfinite(loss))
        k->non_finite = 1;
    atomicAdd(&k->loss[split], loss);
    if (arg == y)
        atomicAdd(&k->correct[split], 1ull);
    if (grad)
        for (int j = 0; j < c; j++)
            grad[(size_t)i * c + j] = (row[j] - (j == y ? 1.0f : 0.0f)) / (float)n;
}

/* ga[i] = 0 where the layer's ReLU output was 0. */
__global__ void relu_back(float *ga, const float *a, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n && a[i] <= 0)
        ga[i] = 0;
}

/* The cpu backend's sgd() and adamw(), element-wise; a gradient that is not
 * finite raises the flag. With `count` (ranks > 1) the gradient is a sum
 * weighted by samples: divided by the ranks' total here (none: no step). */
__device__ bool grad_of(const float *g, size_t i, const float *count, float *out)
{
    if (!count) {
        *out = g[i];
        return true;
    }
    *out = g[i] / *count;
    return *count > 0;
}

__global__ void sgd(float *w, const float *gr, float *v, size_t n, float lr, float mu, float wd,
                    int *non_finite, const float *count)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    float g;
    if (i >= n || !grad_of(gr, i, count, &g))
        return;
    if (!isfinite(g))
        *non_finite = 1;
    float d = g + wd * w[i];
    v[i] = mu * v[i] + d;
    w[i] -= lr * v[i];
}

__global__ void adamw(float *w, const float *gr, float *v, float *s, size_t n, float lr, float b1,
                      float b2, float eps, float c1, float c2, float wd, int *non_finite,
                      const float *count)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    float g;
    if (i >= n || !grad_of(gr, i, count, &g))
        return;
    if (!isfinite(g))
        *non_finite = 1;
    v[i] = b1 * v[i] + (1 - b1) * g;
    s[i] = b2 * s[i] + (1 - b2) * g * g;
    w[i] -= lr * ((v[i] / c1) / (sqrtf(s[i] / c2) + eps) + wd * w[i]);
}

/* zp_augment for a batch, one output pixel a thread: flip, padded crop
 * (black outside), bilinear sample of the random-resized-crop box. */
__global__ void augment(const float *in, float *out, const zp_aug_draw_t *draws,
                        const float *fill, int n, int c, int h, int w, int pad)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t plane = (size_t)h * w;
    if (i >= (size_t)n * c * plane)
        return;
    int x = (int)(i % w), y = (int)(i / w % h), ch = (int)(i / plane % c);
    size_t sample = i / plane / c;
    const zp_aug_draw_t *d = &draws[sample];
    int32_t y0, y1, x0, x1;
    float fy, fx;
    zp_augment_axis(h, y + d->dy - pad, d->box_y, d->box_h, &y0, &y1, &fy);
    zp_augment_axis(w, (d->flip ? w - 1 - x : x) + d->dx - pad, d->box_x, d->box_w, &x0, &x1, &fx);
    if (y0 < 0 || x0 < 0) {
        out[i] = fill[ch];
        return;
    }
    const float *src = in + (sample * c + ch) * plane;
    const float *r0 = src + (size_t)y0 * w, *r1 = src + (size_t)y1 * w;
    float top = r0[x0] + (r0[x1] - r0[x0]) * fx, bot = r1[x0] + (r1[x1] - r1[x0]) * fx;
    out[i] = top + (bot - top) * fy;
}

/* uint8 pixels -> normalised float32 by the per-channel table (zp_dataset_normalize). */
__global__ void normalize(const uint8_t *in, float *out, const float *lut, size_t n, size_t plane,
                          int c)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = lut[(i / plane % c) * 256 + in[i]];
}

__global__ void fill(float *x, size_t n, float v)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = v;
}

void gpu_fill(float *x, size_t n, float v, cudaStream_t s)
{
    fill<<<blocks(n), n < THREADS ? (unsigned)n : THREADS, 0, s>>>(x, n, v);
}

/* ---- set-up -------------------------------------------------------------------------------- */

static int gpu_count(char *why, size_t len)
{
    int n = 0, driver = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorInsufficientDriver && cudaDriverGetVersion(&driver) == cudaSuccess) {
        if (!driver)
            snprintf(why, len, "no NVIDIA driver is loaded (libcuda.so.1 not found)");
        else
            snprintf(why, len, "the NVIDIA driver supports CUDA %d.%d, this build needs %d.%d",
                     driver / 1000, driver % 1000 / 10, CUDART_VERSION / 1000,
                     CUDART_VERSION % 1000 / 10);
        return 0;
    }
    if (e != cudaSuccess) {
        snprintf(why, len, "%s", cudaGetErrorString(e));
        return 0;
    }
    if (!n)
        snprintf(why, len, "no CUDA device");
    return n;
}

static void gpu_destroy(zp_gpu_t **g);

/* The parameter tensors in zp_mlp_t's order, with their sizes in floats. */
static int params(zp_gpu_t *g, const zp_mlp_t *h, float ***dev, float ***host, size_t *sizes)
{
    int n = 0;
    for (int l = 0; l < g->nlayers; l++) {
        size_t w = (size_t)g->dims[l] * g->dims[l + 1], b = (size_t)g->dims[l + 1];
        float **d[6] = {&g->w[l], &g->b[l], &g->vw[l], &g->vb[l], &g->sw[l], &g->sb[l]};
        float *const *s[6] = {&h->w[l], &h->b[l], &h->vw[l], &h->vb[l], &h->sw[l], &h->sb[l]};
        for (int i = 0; i < 6; i++) {
            dev[n] = d[i];
            host[n] = (float **)s[i];
            sizes[n++] = i % 2 ? b : w;
        }
    }
    return n;
}

static int gpu_open(zp_gpu_t **out, int device, const zp_mlp_t *host, void *ring,
                    size_t ring_bytes, const float *lut, int channels, char *err, size_t len)
{
    *out = NULL;
    zp_gpu_t *g = (zp_gpu_t *)calloc(1, sizeof *g);
    if (!g)
        return ZP_ENOMEM;
    g->device = device;
    g->world = 1;
    g->nlayers = host->nlayers;
    g->max_batch = host->max_batch;
    memcpy(g->dims, host->dims, sizeof g->dims);
    cudaError_t e;
    cudaDeviceProp prop;
    int rc = 0;
#define TRY(call, what)                                                                            \
    if (!rc && (e = (call)) != cudaSuccess)                                                        \
    rc = cuda_fail(e, what, err, len)
    TRY(cudaSetDevice(device), "cudaSetDevice");
    TRY(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    if (!rc)
        snprintf(g->name, sizeof g->name, "%.100s, %d SMs, %.1f GiB", prop.name,
                 prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0);
    TRY(cudaStreamCreateWithFlags(&g->copy, cudaStreamNonBlocking), "cudaStreamCreate");
    TRY(cudaStreamCreateWithFlags(&g->compute, cudaStreamNonBlocking), "cudaStreamCreate");
    /* once, for the life of the run: the prefetch writes every batch here */
    TRY(cudaHostRegister(ring, ring_bytes, cudaHostRegisterDefault), "cudaHostRegister of the ring");
    if (!rc) {
        g->ring = ring;
        g->registered = 1;
    }
    float **dev[6 * ZP_MLP_MAX_LAYERS], **src[6 * ZP_MLP_MAX_LAYERS];
    size_t sizes[6 * ZP_MLP_MAX_LAYERS];
    int np = params(g, host, dev, src, sizes);
    for (int i = 0; i < np && !rc; i++) {
        TRY(cudaMalloc((void **)dev[i], sizes[i] * sizeof(float)), "cudaMalloc");
        TRY(cudaMemcpy(*dev[i], *src[i], sizes[i] * sizeof(float), cudaMemcpyHostToDevice),
            "cudaMemcpy of the model");
    }
    size_t nb = (size_t)g->max_batch;
    for (int l = 0; l < g->nlayers && !rc; l++) {
        size_t w = (size_t)g->dims[l] * g->dims[l + 1], o = (size_t)g->dims[l + 1];
        TRY(cudaMalloc((void **)&g->gw[l], w * sizeof(float)), "cudaMalloc");
        TRY(cudaMalloc((void **)&g->gb[l], o * sizeof(float)), "cudaMalloc");
        TRY(cudaMalloc((void **)&g->act[l + 1], nb * o * sizeof(float)), "cudaMalloc");
        TRY(cudaMalloc((void **)&g->grad[l + 1], nb * o * sizeof(float)), "cudaMalloc");
    }
    TRY(cudaMalloc((void **)&g->grad[0], nb * g->dims[0] * sizeof(float)), "cudaMalloc");
    for (int i = 0; i < BUFS && !rc; i++) {
        TRY(cudaMalloc((void **)&g->x[i], nb * g->dims[0] * sizeof(float)), "cudaMalloc");
        TRY(cudaMalloc((void **)&g->labels[i], nb * sizeof(int32_t)), "cudaMalloc");
        TRY(cudaEventCreateWithFlags(&g->copied[i], cudaEventDisableTiming), "cudaEventCreate");
        TRY(cudaEventCreateWithFlags(&g->consumed[i], cudaEventDisableTiming), "cudaEventCreate");
        TRY(cudaMalloc((void **)&g->draws[i], nb * sizeof(zp_aug_draw_t)), "cudaMalloc");
        if (lut)
            TRY(cudaMalloc((void **)&g->raw[i], nb * g->dims[0]), "cudaMalloc");
    }
    if (lut && (channels < 1 || g->dims[0] % channels)) {
        snprintf(err, len, "%d values per sample do not split into %d channels", g->dims[0], channels);
        rc = ZP_EINVAL;
    }
    g->channels = channels;
    TRY(lut ? cudaMalloc((void **)&g->lut, (size_t)channels * 256 * sizeof(float)) : cudaSuccess,
        "cudaMalloc");
    TRY(lut ? cudaMemcpy(g->lut, lut, (size_t)channels * 256 * sizeof(float), cudaMemcpyHostToDevice)
            : cudaSuccess,
        "cudaMemcpy of the normalisation");
    for (int i = 0; i < TIMED && !rc; i++)
        for (int j = 0; j < EV_COUNT; j++)
            TRY(cudaEventCreate(&g->timed[i].ev[j]), "cudaEventCreate");
    TRY(cudaMalloc((void **)&g->ones, nb * sizeof(float)), "cudaMalloc");
    TRY(cudaMalloc((void **)&g->counters, sizeof(counters_t)), "cudaMalloc");
    TRY(cudaMemset(g->counters, 0, sizeof(counters_t)), "cudaMemset");
    if (!rc) {
        fill<<<blocks(nb), THREADS>>>(g->ones, nb, 1.0f);
        TRY(cudaGetLastError(), "fill kernel");
        TRY(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    }
    if (!rc) {
        cublasStatus_t s = cublasCreate(&g->blas);
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasSetStream(g->blas, g->compute);
        if (s != CUBLAS_STATUS_SUCCESS) {
            snprintf(err, len, "cublasCreate: status %d", (int)s);
            rc = ZP_EGPU;
        }
    }
#undef TRY
    if (rc) {
        gpu_destroy(&g);
        return rc;
    }
    *out = g;
    return 0;
}

/* Waits for the streams, unregisters the ring, frees; NULLs *gp. */
static void gpu_destroy(zp_gpu_t **gp)
{
    zp_gpu_t *g = *gp;
    if (!g)
        return;
    *gp = NULL;
    /* a sum still waiting on a dead peer would block the synchronise below */
    if (gpu_wait_stream(g, g->compute) == 0 && gpu_wait_stream(g, g->copy) == 0) {
#ifdef ZP_HAVE_NCCL
        if (g->nccl)
            ncclCommDestroy(g->nccl);
        g->nccl = NULL;
#endif
    }
    cudaDeviceSynchronize();
    if (g->blas)
        cublasDestroy(g->blas);
    if (g->registered)
        cudaHostUnregister(g->ring);
    for (int l = 0; l < ZP_MLP_MAX_LAYERS; l++) {
        float *p[8] = {g->w[l], g->b[l], g->gw[l], g->gb[l], g->vw[l], g->vb[l], g->sw[l], g->sb[l]};
        for (int i = 0; i < 8; i++)
            cudaFree(p[i]);
    }
    for (int l = 0; l <= ZP_MLP_MAX_LAYERS; l++)
        cudaFree(g->act[l]), cudaFree(g->grad[l]);
    for (int i = 0; i < BUFS; i++) {
        cudaFree(g->x[i]), cudaFree(g->raw[i]), cudaFree(g->labels[i]), cudaFree(g->draws[i]);
        if (g->copied[i])
            cudaEventDestroy(g->copied[i]);
        if (g->consumed[i])
            cudaEventDestroy(g->consumed[i]);
    }
    for (int i = 0; i < TIMED; i++)
        for (int j = 0; j < EV_COUNT; j++)
            if (g->timed[i].ev[j])
                cudaEventDestroy(g->timed[i].ev[j]);
    cudaFree(g->ones);
    cudaFree(g->augmented);
    cudaFree(g->fill);
    cudaFree(g->lut);
    cudaFree(g->count);
    cudaFree(g->counters);
    if (g->copy)
        cudaStreamDestroy(g->copy);
    if (g->compute)
        cudaStreamDestroy(g->compute);
    free(g);
}

static const char *gpu_name(const zp_gpu_t *g) { return g->name; }

/* ---- one batch ----------------------------------------------------------------------------- */

static int forward(zp_gpu_t *g, const float *x, const int32_t *labels, int n, int split, int train)
{
    const float one = 1, zero = 0;
    const float *in = x;
    for (int l = 0; l < g->nlayers; l++) {
        int k = g->dims[l], o = g->dims[l + 1];
        /* Z^T[o x n] = W^T[o x k] X^T[k x n] */
        CHECK_BLAS(cublasSgemm(g->blas, CUBLAS_OP_N, CUBLAS_OP_N, o, n, k, &one, g->w[l], o, in, k,
                               &zero, g->act[l + 1], o));
        bias_relu<<<blocks((size_t)n * o), THREADS, 0, g->compute>>>(g->act[l + 1], g->b[l], n, o,
                                                                       l + 1 < g->nlayers);
        in = g->act[l + 1];
    }
    int c = g->dims[g->nlayers];
    softmax_xent<<<blocks((size_t)n), THREADS, 0, g->compute>>>(
        g->act[g->nlayers], labels, n, c, train ? g->grad[g->nlayers] : NULL, g->counters, split);
    CHECK(cudaGetLastError());
    return 0;
}

static int backward(zp_gpu_t *g, const float *x, int n)
{
    const float one = 1, zero = 0;
    for (int l = g->nlayers - 1; l >= 0; l--) {
        int k = g->dims[l], o = g->dims[l + 1];
        const float *in = l ? g->act[l] : x;
        const float *gz = g->grad[l + 1];
        /* dW^T[o x k] = dZ^T[o x n] X[n x k] */
        CHECK_BLAS(cublasSgemm(g->blas, CUBLAS_OP_N, CUBLAS_OP_T, o, k, n, &one, gz, o, in, k, &zero,
                               g->gw[l], o));
        /* db[o] = dZ^T[o x n] 1[n] */
        CHECK_BLAS(cublasSgemv(g->blas, CUBLAS_OP_N, o, n, &one, gz, o, g->ones, 1, &zero, g->gb[l], 1));
        if (l > 0) {
            /* dA^T[k x n] = W[k x o] dZ^T[o x n] */
            CHECK_BLAS(cublasSgemm(g->blas, CUBLAS_OP_T, CUBLAS_OP_N, k, n, o, &one, g->w[l], o, gz, o,
                                   &zero, g->grad[l], k));
            size_t m = (size_t)n * k;
            relu_back<<<blocks(m), THREADS, 0, g->compute>>>(g->grad[l], g->act[l], m);
        }
    }
    CHECK(cudaGetLastError());
    return 0;
}

static int step(zp_gpu_t *g, const zp_opt_t *o)
{
    int *flag = &g->counters->non_finite;
    float c1 = 1.0f - powf(o->beta1, (float)o->t), c2 = 1.0f - powf(o->beta2, (float)o->t);
    for (int l = 0; l < g->nlayers; l++) {
        size_t nw = (size_t)g->dims[l] * g->dims[l + 1], nb = (size_t)g->dims[l + 1];
        if (o->kind == ZP_OPT_ADAMW) {
            adamw<<<blocks(nw), THREADS, 0, g->compute>>>(g->w[l], g->gw[l], g->vw[l], g->sw[l], nw,
                                                          o->lr, o->beta1, o->beta2, o->eps, c1, c2,
                                                          o->weight_decay, flag, g->count);
            adamw<<<blocks(nb), THREADS, 0, g->compute>>>(g->b[l], g->gb[l], g->vb[l], g->sb[l], nb,
                                                          o->lr, o->beta1, o->beta2, o->eps, c1, c2,
                                                          0.0f, flag, g->count);
        } else {
            sgd<<<blocks(nw), THREADS, 0, g->compute>>>(g->w[l], g->gw[l], g->vw[l], nw, o->lr,
                                                        o->momentum, o->weight_decay, flag, g->count);
            sgd<<<blocks(nb), THREADS, 0, g->compute>>>(g->b[l], g->gb[l], g->vb[l], nb, o->lr,
                                                        o->momentum, 0.0f, flag, g->count);
        }
    }
    CHECK(cudaGetLastError());
    return 0;
}

/* The first augmented batch allocates the output buffer and uploads the fill. */
static int augment_setup(zp_gpu_t *g, const zp_gpu_aug_t *a)
{
    if (g->augmented)
        return 0;
    CHECK(cudaMalloc((void **)&g->augmented, (size_t)g->max_batch * g->dims[0] * sizeof(float)));
    CHECK(cudaMalloc((void **)&g->fill, (size_t)a->c * sizeof(float)));
    CHECK(cudaMemcpy(g->fill, a->fill, (size_t)a->c * sizeof(float), cudaMemcpyHostToDevice));
    return 0;
}

static int gpu_batch(zp_gpu_t *g, const void *x, const int32_t *labels, int n, int split,
                     const zp_opt_t *o, const zp_gpu_aug_t *aug)
{
    if (n < 0 || n > g->max_batch || (n == 0 && (g->world < 2 || split != 0)) ||
        (aug && (size_t)aug->c * aug->h * aug->w != (size_t)g->dims[0]))
        return ZP_EINVAL;
    if (n == 0) { /* no batch of ours in this step: the other ranks' */
        int rc = gpu_sum_grads(g, 0);
        return rc ? rc : step(g, o);
    }
    if (aug && augment_setup(g, aug))
        return ZP_EGPU;
    int i = g->next, train = split == 0;
    g->next = (g->next + 1) % BUFS;
    timed_t *t = &g->timed[g->batches % TIMED];
    int timed = !t->pending;
    g->untimed += !timed;
    g->batches++;
    /* copy stream: wait until the compute that last read buffer i is done */
    CHECK(cudaStreamWaitEvent(g->copy, g->consumed[i], 0));
    if (timed)
        CHECK(cudaEventRecord(t->ev[EV_COPY0], g->copy));
    size_t total = (size_t)n * g->dims[0];
    CHECK(cudaMemcpyAsync(g->lut ? (void *)g->raw[i] : (void *)g->x[i], x,
                          total * (g->lut ? 1 : sizeof(float)), cudaMemcpyHostToDevice, g->copy));
    CHECK(cudaMemcpyAsync(g->labels[i], labels, (size_t)n * sizeof(int32_t),
                          cudaMemcpyHostToDevice, g->copy));
    if (aug) /* pageable: staged before the call returns, so the caller may reuse it */
        CHECK(cudaMemcpyAsync(g->draws[i], aug->draws, (size_t)n * sizeof(zp_aug_draw_t),
                              cudaMemcpyHostToDevice, g->copy));
    if (timed) /* before copied[i]: complete whenever the compute that waits for it is */
        CHECK(cudaEventRecord(t->ev[EV_COPY1], g->copy));
    CHECK(cudaEventRecord(g->copied[i], g->copy));
    /* compute stream: wait for the copy, then forward (backward, step) */
    CHECK(cudaStreamWaitEvent(g->compute, g->copied[i], 0));
    if (timed)
        CHECK(cudaEventRecord(t->ev[EV_FWD0], g->compute));
    const float *in = g->x[i];
    if (g->lut) /* counted in forward: it runs between the copy and the first layer */
        normalize<<<blocks(total), THREADS, 0, g->compute>>>(g->raw[i], g->x[i], g->lut, total,
                                                              (size_t)g->dims[0] / g->channels,
                                                              g->channels);
    if (aug) {
        augment<<<blocks(total), THREADS, 0, g->compute>>>(in, g->augmented, g->draws[i], g->fill, n,
                                                            aug->c, aug->h, aug->w, aug->padding);
        in = g->augmented;
    }
    int rc = forward(g, in, g->labels[i], n, split, train);
    if (!rc && timed)
        CHECK(cudaEventRecord(t->ev[EV_FWD1], g->compute));
    if (!rc && train) {
        rc = backward(g, in, n);
        if (!rc && timed)
            CHECK(cudaEventRecord(t->ev[EV_BWD1], g->compute));
        if (!rc && g->world > 1)
            rc = gpu_sum_grads(g, n);
        if (!rc && timed && g->world > 1)
            CHECK(cudaEventRecord(t->ev[EV_COMM1], g->compute));
        if (!rc)
            rc = step(g, o);
    }
    if (rc)
        return rc;
    CHECK(cudaEventRecord(g->consumed[i], g->compute));
    if (timed) {
        t->pending = 1;
        t->train = train;
    }
    return 0;
}

static int gpu_wait_copy(zp_gpu_t *g)
{
    int last = (g->next + BUFS - 1) % BUFS; /* its copy may wait on a sum's compute */
    return gpu_wait_for(g, g->copy, g->copied[last]);
}

static int gpu_take(zp_gpu_t *g, int split, double *loss_sum, int64_t *correct,
                           int *non_finite)
{
    counters_t k;
    CHECK(cudaMemcpyAsync(&k, g->counters, sizeof k, cudaMemcpyDeviceToHost, g->compute));
    if (gpu_wait_stream(g, g->compute))
        return ZP_EGPU;
    *loss_sum = k.loss[split];
    *correct = (int64_t)k.correct[split];
    *non_finite = k.non_finite;
    k.loss[split] = 0;
    k.correct[split] = 0;
    CHECK(cudaMemcpyAsync(g->counters, &k, sizeof k, cudaMemcpyHostToDevice, g->compute));
    return gpu_wait_stream(g, g->compute);
}

static int gpu_download(zp_gpu_t *g, zp_mlp_t *host)
{
    if (gpu_wait_stream(g, g->compute))
        return ZP_EGPU;
    float **dev[6 * ZP_MLP_MAX_LAYERS], **dst[6 * ZP_MLP_MAX_LAYERS];
    size_t sizes[6 * ZP_MLP_MAX_LAYERS];
    int np = params(g, host, dev, dst, sizes);
    for (int i = 0; i < np; i++)
        CHECK(cudaMemcpy(*dst[i], *dev[i], sizes[i] * sizeof(float), cudaMemcpyDeviceToHost));
    return 0;
}

static int64_t gpu_harvest(zp_gpu_t *g, zp_timers_t *tm, int wait)
{
    if (wait && (gpu_wait_stream(g, g->compute) || gpu_wait_stream(g, g->copy)))
        wait = 0; /* aborted, or failed: what completed is still harvested */
    /* oldest first; stop at the first batch still running */
    for (int64_t b = g->batches - TIMED < 0 ? 0 : g->batches - TIMED; b < g->batches; b++) {
        timed_t *t = &g->timed[b % TIMED];
        if (!t->pending)
            continue;
        int summed = t->train && g->world > 1;
        cudaEvent_t last = t->ev[summed ? EV_COMM1 : t->train ? EV_BWD1 : EV_FWD1];
        if (cudaEventQuery(last) != cudaSuccess)
            break;
        float h2d = 0, fwd = 0, bwd = 0, comm = 0;
        if (cudaEventElapsedTime(&h2d, t->ev[EV_COPY0], t->ev[EV_COPY1]) != cudaSuccess ||
            cudaEventElapsedTime(&fwd, t->ev[EV_FWD0], t->ev[EV_FWD1]) != cudaSuccess ||
            (t->train && cudaEventElapsedTime(&bwd, t->ev[EV_FWD1], t->ev[EV_BWD1]) != cudaSuccess) ||
            (summed && cudaEventElapsedTime(&comm, t->ev[EV_BWD1], t->ev[EV_COMM1]) != cudaSuccess))
            break; /* not complete after all: next time */
        zp_timer_add(tm, ZP_R_H2D, (int64_t)(h2d * 1e6));
        zp_timer_add(tm, ZP_R_FORWARD, (int64_t)(fwd * 1e6));
        if (t->train)
            zp_timer_add(tm, ZP_R_BACKWARD, (int64_t)(bwd * 1e6));
        if (summed)
            zp_timer_add(tm, ZP_R_COMM, (int64_t)(comm * 1e6));
        t->pending = 0;
    }
    return g->untimed;
}

/* The one symbol the trainer looks up (gpu_load.c). */
extern "C" __attribute__((visibility("default"))) const zp_gpu_api_t *zp_gpu_module_api(void)
{
    static const zp_gpu_api_t api = {gpu_count,    gpu_open,    gpu_destroy, gpu_batch,
                                     gpu_wait_copy, gpu_take,   gpu_download, gpu_harvest,
                                     gpu_name,      gpu_nccl_id, gpu_join};
    return &api;
}

/* h2d_bench.cu — host-to-device bandwidth from the prefetch ring as the cuda
 * backend uses it (a /dev/shm mapping made by zp_ring_create, page-locked with
 * cudaHostRegister) against cudaMemcpy from cudaHostAlloc memory of the same
 * size: the best a pinned copy does. Same stream, same sizes, side by side.
 *
 *   zp-bench-h2d [BATCH_BYTES...]    (default: 401 KiB, 4 MiB, 38.5 MiB)
 *
 * Prints GB/s of each and the ratio ring / cudaHostAlloc (goal >= 0.90).
 * Needs 2 x the largest size in /dev/shm (a container's default 64 MiB is
 * too small for the 38.5 MiB batches: give sizes, or a larger /dev/shm). */
extern "C" {
#include "pipeline/ring/ring.h"
}

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REPS 50

static void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "zp-bench-h2d: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

/* GB/s of REPS copies of `bytes` from each of the `slots` sources in turn (best of 3). */
static double bandwidth(void *const *src, int slots, void *dst, size_t bytes, cudaStream_t s)
{
    cudaEvent_t a, b;
    check(cudaEventCreate(&a), "cudaEventCreate");
    check(cudaEventCreate(&b), "cudaEventCreate");
    double best = 0;
    for (int round = 0; round < 3; round++) {
        check(cudaEventRecord(a, s), "cudaEventRecord");
        for (int i = 0; i < REPS; i++)
            check(cudaMemcpyAsync(dst, src[i % slots], bytes, cudaMemcpyHostToDevice, s), "copy");
        check(cudaEventRecord(b, s), "cudaEventRecord");
        check(cudaEventSynchronize(b), "cudaEventSynchronize");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
        double gbs = (double)bytes * REPS / (ms * 1e6);
        best = gbs > best ? gbs : best;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return best;
}

int main(int argc, char **argv)
{
    size_t sizes[8] = {128 * 785 * 4 + 128 * 4, 4u << 20, 64u * 3 * 224 * 224 * 4};
    int n = 3;
    if (argc > 1) {
        n = 0;
        for (int i = 1; i < argc && n < 8; i++)
            sizes[n++] = strtoull(argv[i], NULL, 10);
    }
    cudaDeviceProp prop;
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    printf("device: %s\n%12s %16s %16s %8s\n", prop.name, "batch bytes", "ring GB/s",
           "HostAlloc GB/s", "ratio");
    cudaStream_t s;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    for (int k = 0; k < n; k++) {
        size_t bytes = sizes[k];
        char name[64];
        snprintf(name, sizeof name, "/zp-bench-h2d-%d", (int)getpid());
        zp_ring_t *ring;
        if (zp_ring_create(&ring, name, 2, bytes)) {
            fprintf(stderr, "zp-bench-h2d: cannot create a ring of 2 x %zu bytes\n", bytes);
            return 1;
        }
        void *slots[2] = {zp_ring_slot(ring, 0), zp_ring_slot(ring, 1)};
        for (int i = 0; i < 2; i++) /* fault every page in, as a running prefetch has */
            memset(slots[i], 1, bytes);
        check(cudaHostRegister(ring->base, ring->map_bytes, cudaHostRegisterDefault),
              "cudaHostRegister");
        void *pinned[2], *dst;
        for (int i = 0; i < 2; i++) {
            check(cudaHostAlloc(&pinned[i], bytes, cudaHostAllocDefault), "cudaHostAlloc");
            memset(pinned[i], 1, bytes);
        }
        check(cudaMalloc(&dst, bytes), "cudaMalloc");
        bandwidth(pinned, 2, dst, bytes, s); /* warm-up, both sources */
        bandwidth(slots, 2, dst, bytes, s);
        double r = bandwidth(slots, 2, dst, bytes, s), p = bandwidth(pinned, 2, dst, bytes, s);
        printf("%12zu %16.2f %16.2f %8.3f\n", bytes, r, p, r / p);
        cudaFree(dst);
        for (int i = 0; i < 2; i++)
            cudaFreeHost(pinned[i]);
        cudaHostUnregister(ring->base);
        zp_ring_destroy(&ring);
    }
    return 0;
}

/* gpu_load.c — the cuda backend's functions (gpu.h), forwarded to the module
 * zeus-pipe-cuda.so, which is opened on the first call: $ZP_CUDA_MODULE, or
 * the file of that name beside the executable. Without it there is no
 * device, and zp_gpu_count says why. */
#define _GNU_SOURCE
#include "pipeline/base/log.h"
#include "stages/trainer/gpu.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODULE "zeus-pipe-cuda.so"

static const zp_gpu_api_t *api;
static char why_not[PATH_MAX + 256];

static const zp_gpu_api_t *load(void)
{
    if (api || why_not[0])
        return api;
    char path[PATH_MAX];
    const char *env = getenv("ZP_CUDA_MODULE");
    if (env && env[0]) {
        snprintf(path, sizeof path, "%s", env);
    } else {
        ssize_t n = readlink("/proc/self/exe", path, sizeof path - sizeof MODULE - 1);
        if (n < 0)
            n = 0;
        path[n] = 0;
        char *slash = strrchr(path, '/');
        snprintf(slash ? slash + 1 : path, sizeof path - (size_t)(slash ? slash + 1 - path : 0),
                 "%s", MODULE);
    }
    if (access(path, F_OK)) {
        snprintf(why_not, sizeof why_not, "%s not found: %s", path,
                 env && env[0] ? "check ZP_CUDA_MODULE"
                               : "this zeus-pipe was built without CUDA (CMake found no nvcc, "
                                 "or -DZP_CUDA=OFF)");
        return NULL;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    zp_gpu_module_fn *fn = h ? (zp_gpu_module_fn *)dlsym(h, ZP_GPU_MODULE_SYMBOL) : NULL;
    if (!fn) {
        snprintf(why_not, sizeof why_not, "%s: %s", path, dlerror());
        return NULL;
    }
    return api = fn();
}

int zp_gpu_count(char *why, size_t len)
{
    if (!load()) {
        snprintf(why, len, "%s", why_not);
        return 0;
    }
    return api->count(why, len);
}

int zp_gpu_create(zp_gpu_t **out, int device, const zp_mlp_t *host, void *ring, size_t ring_bytes,
                const float *lut, int channels, char *err, size_t len)
{
    *out = NULL;
    if (!load()) {
        snprintf(err, len, "%s", why_not);
        return ZP_EGPU;
    }
    return api->open(out, device, host, ring, ring_bytes, lut, channels, err, len);
}

/* The rest is reached only with a device open, so with the module loaded. */
void zp_gpu_destroy(zp_gpu_t **g)
{
    if (g && *g)
        api->destroy(g);
}
int zp_gpu_batch(zp_gpu_t *g, const void *x, const int32_t *labels, int n, int split,
                 const zp_opt_t *o, const zp_gpu_aug_t *aug)
{
    return api->batch(g, x, labels, n, split, o, aug);
}
int zp_gpu_wait_copy(zp_gpu_t *g) { return api->wait_copy(g); }
int zp_gpu_take(zp_gpu_t *g, int split, double *loss_sum, int64_t *correct, int *non_finite)
{
    return api->take(g, split, loss_sum, correct, non_finite);
}
int zp_gpu_download(zp_gpu_t *g, zp_mlp_t *host) { return api->download(g, host); }
int64_t zp_gpu_harvest(zp_gpu_t *g, zp_timers_t *tm, int wait) { return api->harvest(g, tm, wait); }
const char *zp_gpu_name(const zp_gpu_t *g) { return api->name(g); }
int zp_gpu_nccl_id(uint8_t *id, char *err, size_t len)
{
    if (!load()) {
        snprintf(err, len, "%s", why_not);
        return ZP_EGPU;
    }
    return api->nccl_id(id, err, len);
}
int zp_gpu_join(zp_gpu_t *g, const uint8_t *id, int rank, int world, int timeout_s, char *err,
                size_t len)
{
    return api->join(g, id, rank, world, timeout_s, err, len);
}

/* libFuzzer target: the config loader (libyaml parsing, the key table's
 * validation, cross-key checks), on arbitrary file contents. The seed corpus
 * is tests/configs/good and tests/configs/bad.
 * Build and run: scripts/fuzz.sh [SECONDS]. */
#define _GNU_SOURCE
#include "pipeline/config/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("zp-fuzz-config", 0);
        if (fd < 0)
            abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size)
        abort();
    zp_config_t cfg;
    char err[1024];
    err[0] = 0;
    int rc = zp_config_load(&cfg, path, NULL, 0, err, sizeof err);
    if (rc && !err[0])
        abort(); /* a refusal always says why */
    return 0;
}

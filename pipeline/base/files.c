/* files.c — small filesystem helpers the floors share. */
#include "pipeline/base/files.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int zp_files_mkdirs(const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return -ENAMETOOLONG;
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0755) && errno != EEXIST)
                return -errno;
            *p = '/';
        }
    if (mkdir(buf, mode) && errno != EEXIST)
        return -errno;
    struct stat sb;
    if (stat(buf, &sb))
        return -errno;
    return S_ISDIR(sb.st_mode) ? 0 : -ENOTDIR;
}

int zp_files_write_aside(const char *path, zp_files_fill_fn *fill, void *ctx, char *err, size_t errlen)
{
    char tmp[PATH_MAX + 8];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        snprintf(err, errlen, "%s: %s", path, strerror(ENAMETOOLONG));
        return -ENAMETOOLONG;
    }
    FILE *out = fopen(tmp, "w");
    if (!out) {
        int rc = -errno;
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        return rc;
    }
    int rc = fill(out, ctx, err, errlen);
    if (fclose(out) && !rc) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
    }
    if (!rc && rename(tmp, path)) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
    }
    if (rc)
        unlink(tmp);
    return rc;
}

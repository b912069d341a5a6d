/* files.c — small filesystem helpers the floors share. */
#include "pipeline/files.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

int zp_mkdirs(const char *path, mode_t mode)
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

/* files.h — small filesystem helpers the floors share. */
#ifndef ZP_FILES_H
#define ZP_FILES_H

#include <sys/types.h>

/* Creates `path` with `mode` and any missing parent folders (0755), like
 * `mkdir -p`. 0 when it is a folder afterwards; -ENOTDIR when a file is in
 * the way, -ENAMETOOLONG for a path of PATH_MAX or more, or the -errno of the
 * mkdir that failed. */
int zp_mkdirs(const char *path, mode_t mode);

#endif

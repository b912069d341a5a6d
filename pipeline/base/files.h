/* files.h — small filesystem helpers the floors share. */
#ifndef ZP_FILES_H
#define ZP_FILES_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* Creates `path` with `mode` and any missing parent folders (0755), like
 * `mkdir -p`. 0 when it is a folder afterwards; -ENOTDIR when a file is in
 * the way, -ENAMETOOLONG for a path of PATH_MAX or more, or the -errno of the
 * mkdir that failed. */
int zp_files_mkdirs(const char *path, mode_t mode);

/* Writes what goes into a file: 0, or an error (its words in err). */
typedef int zp_files_fill_fn(FILE *out, void *ctx, char *err, size_t errlen);

/* Writes `path` whole or not at all: `fill` writes <path>.tmp beside it,
 * which is then renamed over path, so a reader never sees half a file and a
 * failure (fill's error, a full disk) leaves the previous one. Returns 0,
 * fill's error, or a negative errno, with the file and the reason in err. */
int zp_files_write_aside(const char *path, zp_files_fill_fn *fill, void *ctx, char *err, size_t errlen);

#endif

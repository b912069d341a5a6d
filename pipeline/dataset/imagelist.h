/* imagelist.h — the samples of an image dataset: a path and a label each.
 *
 * image_folder: ROOT/CLASS/FILE with FILE ending in .jpg, .jpeg or .png (any
 * case); classes are the sub-folders sorted by name and numbered from 0, files
 * sorted by name inside each class — torchvision's ImageFolder numbering.
 * image_list: a text file of "PATH LABEL" lines (PATH relative to the list's
 * folder unless absolute; blank lines and lines starting with # skipped). */
#ifndef ZP_IMAGELIST_H
#define ZP_IMAGELIST_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int64_t n;
    char **path;     /* owned, n strings */
    int32_t *label;  /* owned */
    int classes;     /* folder: sub-folders; list: largest label + 1 */
    char **class_name; /* folder: the sub-folders' names, `classes` of them; owned; list: NULL */
    int64_t bytes;   /* total file size */
    int64_t mtime;   /* newest modification time (s) */
} zp_imagelist_t;

/* Reads a folder (list = 0) or a list file (list = 1). Errors name the path. */
int zp_imagelist_read(const char *where, int list, zp_imagelist_t *out, char *err, size_t errlen);
void zp_imagelist_free(zp_imagelist_t *l);

#endif

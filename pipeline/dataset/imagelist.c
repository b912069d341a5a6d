/* imagelist.c — the samples of an image dataset, a path and a label each: a
 * CLASS/NAME.jpg folder walked in sorted order, or a list file read line by line. */
#define _GNU_SOURCE
#include "pipeline/dataset/imagelist.h"
#include "pipeline/base/log.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static int push(zp_imagelist_t *l, size_t *cap, const char *path, int32_t label, const struct stat *st)
{
    if ((size_t)l->n == *cap) {
        size_t c = *cap ? 2 * *cap : 256;
        char **p = realloc(l->path, c * sizeof *p);
        if (!p)
            return ZP_ENOMEM;
        l->path = p;
        int32_t *lb = realloc(l->label, c * sizeof *lb);
        if (!lb)
            return ZP_ENOMEM;
        l->label = lb;
        *cap = c;
    }
    if (!(l->path[l->n] = strdup(path)))
        return ZP_ENOMEM;
    l->label[l->n++] = label;
    l->bytes += st->st_size;
    l->mtime = st->st_mtime > l->mtime ? st->st_mtime : l->mtime;
    return 0;
}

static int is_image(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") || !strcasecmp(dot, ".png"));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the entries of dir that are folders (want_dir) or image files. */
static int sorted_names(const char *dir, int want_dir, char ***out, int *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", dir, strerror(e));
        return -e;
    }
    char **v = NULL;
    int cap = 0, rc = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[PATH_MAX + 256];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) || (want_dir ? !S_ISDIR(st.st_mode) : !(S_ISREG(st.st_mode) && is_image(e->d_name))))
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            char **p = realloc(v, (size_t)cap * sizeof *p);
            if (!p) {
                rc = ZP_ENOMEM;
                break;
            }
            v = p;
        }
        if (!(v[(*n)++] = strdup(e->d_name))) {
            rc = ZP_ENOMEM;
            break;
        }
    }
    closedir(d);
    if (v)
        qsort(v, (size_t)*n, sizeof *v, cmp_str);
    *out = v;
    return rc;
}

static void free_names(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int read_folder(const char *root, zp_imagelist_t *l, char *err, size_t errlen)
{
    char **classes;
    int nc, rc = sorted_names(root, 1, &classes, &nc, err, errlen);
    size_t cap = 0;
    for (int c = 0; !rc && c < nc; c++) {
        char dir[PATH_MAX], **files;
        int nf;
        snprintf(dir, sizeof dir, "%s/%s", root, classes[c]);
        if ((rc = sorted_names(dir, 0, &files, &nf, err, errlen)))
            break;
        for (int f = 0; !rc && f < nf; f++) {
            char path[PATH_MAX + 256];
            struct stat st;
            snprintf(path, sizeof path, "%s/%s", dir, files[f]);
            if (stat(path, &st) == 0)
                rc = push(l, &cap, path, c, &st);
        }
        free_names(files, nf);
    }
    if (rc)
        free_names(classes, nc);
    else
        l->class_name = classes; /* the class names, in label order */
    l->classes = nc;
    if (!rc && !l->n) {
        snprintf(err, errlen, "%s: no images (expected %s/CLASS/*.jpg|jpeg|png)", root, root);
        rc = ZP_EDATA;
    }
    return rc;
}

static int read_list(const char *file, zp_imagelist_t *l, char *err, size_t errlen)
{
    FILE *f = fopen(file, "r");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", file, strerror(e));
        return -e;
    }
    char dir[PATH_MAX], line[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    size_t cap = 0;
    int rc = 0;
    for (int64_t no = 1; !rc && fgets(line, sizeof line, f); no++) {
        char name[PATH_MAX], path[2 * PATH_MAX + 2];
        long label;
        if (line[0] == '#' || strspn(line, " \t\r\n") == strlen(line))
            continue;
        if (sscanf(line, "%4095s %ld", name, &label) != 2 || label < 0 || label > 1000000) {
            snprintf(err, errlen, "%s:%lld: expected \"PATH LABEL\" with a label 0..1000000", file,
                     (long long)no);
            rc = ZP_EDATA;
            break;
        }
        snprintf(path, sizeof path, "%s%s%s", name[0] == '/' ? "" : dir, name[0] == '/' ? "" : "/", name);
        struct stat st;
        if (stat(path, &st)) {
            snprintf(err, errlen, "%s:%lld: %s: %s", file, (long long)no, path, strerror(errno));
            rc = -errno;
            break;
        }
        rc = push(l, &cap, path, (int32_t)label, &st);
        if ((int)label + 1 > l->classes)
            l->classes = (int)label + 1;
    }
    fclose(f);
    if (!rc && !l->n) {
        snprintf(err, errlen, "%s: no images listed", file);
        rc = ZP_EDATA;
    }
    return rc;
}

int zp_imagelist_read(const char *where, int list, zp_imagelist_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    int rc = list ? read_list(where, out, err, errlen) : read_folder(where, out, err, errlen);
    if (rc)
        zp_imagelist_free(out);
    if (rc == ZP_ENOMEM)
        snprintf(err, errlen, "%s: out of memory", where);
    return rc;
}

void zp_imagelist_free(zp_imagelist_t *l)
{
    for (int64_t i = 0; l->path && i < l->n; i++)
        free(l->path[i]);
    free(l->path);
    free(l->label);
    for (int c = 0; l->class_name && c < l->classes; c++)
        free(l->class_name[c]);
    free(l->class_name);
    memset(l, 0, sizeof *l);
}

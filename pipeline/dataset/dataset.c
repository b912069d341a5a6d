/* dataset.c — what a dataset holds, as its source's probe found it
 * (pipeline/source/), written to RUN/dataset/ and read back by every stage. */
#define _GNU_SOURCE
#include "pipeline/dataset/dataset.h"
#include "pipeline/dataset/imagelist.h"
#include "pipeline/base/log.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *zp_dataset_split_name(int split) { return split == ZP_SPLIT_TEST ? "test" : "train"; }

float *zp_dataset_normalize_lut(const zp_config_t *cfg, int64_t channels)
{
    float *lut = malloc((size_t)channels * 256 * sizeof *lut);
    for (int64_t c = 0; lut && c < channels; c++) {
        double mean = cfg->mean.v[cfg->mean.n > c ? c : 0], std = cfg->std.v[cfg->std.n > c ? c : 0];
        for (int p = 0; p < 256; p++)
            lut[c * 256 + p] = (float)((p / 255.0 - mean) / std);
    }
    return lut;
}

void zp_dataset_normalize(const float *lut, const zp_dataset_meta_t *m, const uint8_t *px, float *out)
{
    int64_t plane = m->shape[1] * m->shape[2];
    for (int64_t c = 0; c < m->shape[0]; c++, lut += 256)
        for (int64_t i = 0; i < plane; i++)
            out[c * plane + i] = lut[px[c * plane + i]];
}

int zp_dataset_builtin_fields(const zp_dataset_meta_t *m, char *err, size_t errlen)
{
    const zp_fields_t *fs = &m->fields;
    if (fs->n == 2 && !strcmp(fs->f[0].name, "image") && fs->f[1].offset == ZP_FIELD_IN_LABELS)
        return 0;
    snprintf(err, errlen, "the built-in trainer takes the (image, label) samples of the built-in "
             "sources, and these samples are %d field(s) of a Python Dataset: set trainer.command "
             "to your training program (python/examples/custom_dataset.py), or trainer.backend: "
             "null to only read the batches", fs->n);
    return ZP_ECONFIG;
}

int zp_dataset_label_check(const zp_dataset_meta_t *m, const char *where, int64_t index, int64_t label,
                   char *err, size_t errlen)
{
    if (label >= 0 && label < m->classes)
        return 0;
    snprintf(err, errlen, "%s: label %lld of sample %lld is outside the train split's classes 0..%lld",
             where, (long long)label, (long long)index, (long long)m->classes - 1);
    return ZP_EDATA;
}

void zp_dataset_file(const zp_config_t *cfg, const char *name, char *buf, size_t len)
{
    if (name[0] == '/')
        snprintf(buf, len, "%s", name);
    else
        snprintf(buf, len, "%s/%s", cfg->dataset_path, name);
}

void zp_dataset_destroy(zp_dataset_t **ds)
{
    if (!ds || !*ds)
        return;
    for (int s = 0; s < ZP_SPLITS; s++)
        zp_imagelist_free(&(*ds)->split[s]);
    free((*ds)->python);
    free((*ds)->arrays);
    free(*ds);
    *ds = NULL;
}

/* ---- The description in RUN/dataset/ ---------------------------------------------------------- */

static void desc_path(char *buf, size_t len, const char *run_dir, const char *name)
{
    snprintf(buf, len, "%s/dataset/%s", run_dir, name);
}

/* Writes `bytes` to RUN/dataset/NAME whole; 0 or a negative errno, err naming the file. */
static int write_whole(const char *run_dir, const char *name, const void *data, size_t bytes,
                       char *err, size_t len)
{
    char path[PATH_MAX + 64];
    desc_path(path, sizeof path, run_dir, name);
    FILE *f = fopen(path, "wb");
    int rc = !f ? -errno : bytes && fwrite(data, 1, bytes, f) != bytes ? -EIO : 0;
    if (f && fclose(f) && !rc)
        rc = -errno;
    if (rc)
        snprintf(err, len, "%s: cannot write: %s", path, strerror(-rc));
    return rc;
}

/* RUN/dataset/classes: an image folder's class names (its sub-folders), in
 * label order, each NUL-terminated; none for other sources. */
static int write_classes(const zp_imagelist_t *l, const char *run_dir, char *err, size_t len)
{
    size_t bytes = 0;
    for (int c = 0; l->class_name && c < l->classes; c++)
        bytes += strlen(l->class_name[c]) + 1;
    if (!bytes)
        return 0;
    char *all = malloc(bytes), *p = all;
    if (!all) {
        snprintf(err, len, "%s/dataset: out of memory", run_dir);
        return ZP_ENOMEM;
    }
    for (int c = 0; c < l->classes; c++)
        p = stpcpy(p, l->class_name[c]) + 1;
    int rc = write_whole(run_dir, "classes", all, bytes, err, len);
    free(all);
    return rc;
}

/* SPLIT.labels and, for image sources, SPLIT.paths. */
static int write_split(const zp_dataset_t *ds, int s, const char *run_dir, char *err, size_t len)
{
    const zp_imagelist_t *l = &ds->split[s];
    char name[32];
    snprintf(name, sizeof name, "%s.labels", zp_dataset_split_name(s));
    int rc = write_whole(run_dir, name, l->label, l->label ? sizeof *l->label * (size_t)l->n : 0, err, len);
    if (rc || !l->path)
        return rc;
    size_t bytes = 0;
    for (int64_t i = 0; i < l->n; i++)
        bytes += strlen(l->path[i]) + 1;
    char *all = malloc(bytes ? bytes : 1), *p = all;
    if (!all) {
        snprintf(err, len, "%s/dataset: out of memory", run_dir);
        return ZP_ENOMEM;
    }
    for (int64_t i = 0; i < l->n; i++)
        p = stpcpy(p, l->path[i]) + 1;
    snprintf(name, sizeof name, "%s.paths", zp_dataset_split_name(s));
    rc = write_whole(run_dir, name, all, bytes, err, len);
    free(all);
    return rc;
}

int zp_dataset_write(const zp_dataset_t *ds, const char *run_dir, char *err, size_t len)
{
    char path[PATH_MAX + 64], text[8192];
    desc_path(path, sizeof path, run_dir, "");
    if (mkdir(path, 0755) && errno != EEXIST) {
        snprintf(err, len, "%s: cannot create: %s", path, strerror(errno));
        return -errno;
    }
    const zp_dataset_meta_t *m = &ds->meta;
    int n = snprintf(text, sizeof text,
                     "zeus-pipe dataset 1\nn %lld %lld\nshape %lld %lld %lld\nclasses %lld\n"
                     "dtype %d\nfiles_bytes %lld %lld\nfiles_mtime %lld %lld\npaths %d %d\n",
                     (long long)m->n[0], (long long)m->n[1], (long long)m->shape[0],
                     (long long)m->shape[1], (long long)m->shape[2], (long long)m->classes, m->dtype,
                     (long long)m->files_bytes[0], (long long)m->files_bytes[1],
                     (long long)m->files_mtime[0], (long long)m->files_mtime[1],
                     ds->split[0].path != NULL, ds->split[1].path != NULL);
    /* a meta made without fields (by hand) reads back as the built-in ones */
    int f = m->fields.n ? zp_fields_format(&m->fields, text + n, sizeof text - (size_t)n) : 0;
    n += f < 0 ? 0 : f;
    if (f >= 0 && m->source_hash[0])
        n += snprintf(text + n, sizeof text - (size_t)n, "source_hash %s\n", m->source_hash);
    if (f >= 0 && m->cached.n && (size_t)n < sizeof text) { /* a Python augment step */
        n += snprintf(text + n, sizeof text - (size_t)n, "augment %d %d\ncached\n", m->augment[0],
                      m->augment[1]);
        f = (size_t)n < sizeof text ? zp_fields_format(&m->cached, text + n, sizeof text - (size_t)n) : -1;
        n += f < 0 ? 0 : f;
        if (f >= 0 && m->item_types[0] && (size_t)n < sizeof text)
            n += snprintf(text + n, sizeof text - (size_t)n, "item_types %s\n", m->item_types);
    }
    if (f < 0 || (size_t)n >= sizeof text) {
        snprintf(err, len, "%s/dataset/meta: the description is too long", run_dir);
        return ZP_EDATA;
    }
    int rc = ds->python ? write_whole(run_dir, "python.json", ds->python, strlen(ds->python), err, len) : 0;
    if (!rc && ds->arrays)
        rc = write_whole(run_dir, "arrays", ds->arrays, strlen(ds->arrays), err, len);
    if (!rc)
        rc = write_classes(&ds->split[ZP_SPLIT_TRAIN], run_dir, err, len);
    for (int s = 0; !rc && s < ZP_SPLITS; s++)
        rc = write_split(ds, s, run_dir, err, len);
    /* meta last: a description with meta is whole */
    return rc ? rc : write_whole(run_dir, "meta", text, (size_t)n, err, len);
}

/* RUN/dataset/NAME read whole into a malloc'd buffer (NUL-terminated). */
static int read_whole(const char *run_dir, const char *name, char **out, size_t *bytes, char *err,
                      size_t len)
{
    char path[PATH_MAX + 64];
    desc_path(path, sizeof path, run_dir, name);
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        snprintf(err, len, "%s: %s", path, strerror(e));
        return e == ENOENT ? -ENOENT : ZP_EDATA;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        char *more = n == cap ? realloc(buf, (cap *= 2) + 1) : buf;
        if (!more)
            free(buf);
        buf = more;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        snprintf(err, len, "%s: %s", path, buf ? "read error" : "out of memory");
        return buf ? ZP_EDATA : ZP_ENOMEM;
    }
    buf[n] = 0;
    *out = buf, *bytes = n;
    return 0;
}

/* The sample's fields (a description without them: the built-in ones) and
 * the Python source's hash; 0 or ZP_EDATA. */
static int parse_fields(const char *text, zp_dataset_meta_t *m)
{
    char err[160];
    int rc = zp_fields_parse(&m->fields, text, ZP_MAX_ELEMS, err, sizeof err);
    if (rc == -ENOENT)
        zp_fields_builtin(&m->fields, m->dtype, m->shape);
    else if (rc || m->fields.record_bytes != m->sample_bytes)
        return ZP_EDATA;
    const char *h = strstr(text, "\nsource_hash ");
    if (h && sscanf(h, "\nsource_hash %71s", m->source_hash) != 1)
        return ZP_EDATA;
    const char *a = strstr(text, "\naugment "), *c = strstr(text, "\ncached\n");
    if (!a && !c)
        return 0;
    if (!a || !c || sscanf(a, "\naugment %d %d", &m->augment[0], &m->augment[1]) != 2 ||
        m->augment[0] < 0 || m->augment[0] > ZP_AUG_STEP_FIELD || m->augment[1] < 0 ||
        m->augment[1] > ZP_AUG_STEP_FIELD)
        return ZP_EDATA;
    const char *t = strstr(text, "\nitem_types ");
    if (t)
        snprintf(m->item_types, sizeof m->item_types, "%.*s", (int)strcspn(t + 12, "\n"), t + 12);
    return zp_fields_parse(&m->cached, c + 7, ZP_MAX_ELEMS, err, sizeof err) ? ZP_EDATA : 0;
}

zp_dataset_meta_t zp_dataset_cached_meta(const zp_dataset_meta_t *m, int split)
{
    zp_dataset_meta_t c = *m;
    if (!m->cached.n || !m->augment[split])
        return c;
    c.fields = m->cached;
    c.sample_bytes = m->cached.record_bytes;
    c.elems = c.shape[2] = (int64_t)c.sample_bytes;
    c.shape[0] = c.shape[1] = 1;
    return c;
}

/* The meta file's fields; 0 or ZP_EDATA. */
static int parse_meta(const char *text, zp_dataset_meta_t *m, int has_paths[ZP_SPLITS])
{
    long long v[13];
    int dtype;
    int got = sscanf(text, "zeus-pipe dataset 1\nn %lld %lld\nshape %lld %lld %lld\nclasses %lld\n"
                           "dtype %d\nfiles_bytes %lld %lld\nfiles_mtime %lld %lld\npaths %lld %lld",
                     &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &dtype, &v[6], &v[7], &v[8], &v[9],
                     &v[10], &v[11]);
    /* every number is input: the shape's product checked factor by factor (2^32 * 2^32
     * wrapped to 0), a split's samples indexed by uint32 */
    if (got != 13 || v[0] < 0 || v[1] < 0 || v[0] > UINT32_MAX || v[1] > UINT32_MAX ||
        v[2] < 1 || v[3] < 1 || v[4] < 1 || v[2] > ZP_MAX_ELEMS || v[3] > ZP_MAX_ELEMS / v[2] ||
        v[4] > ZP_MAX_ELEMS / (v[2] * v[3]) || (dtype != ZP_DTYPE_U8 && dtype != ZP_DTYPE_F32))
        return ZP_EDATA;
    m->n[0] = v[0], m->n[1] = v[1];
    m->shape[0] = v[2], m->shape[1] = v[3], m->shape[2] = v[4];
    m->classes = v[5];
    m->dtype = dtype;
    m->files_bytes[0] = v[6], m->files_bytes[1] = v[7];
    m->files_mtime[0] = v[8], m->files_mtime[1] = v[9];
    has_paths[0] = v[10] != 0, has_paths[1] = v[11] != 0;
    m->elems = m->shape[0] * m->shape[1] * m->shape[2];
    m->sample_bytes = (size_t)m->elems * zp_dtype_size((uint64_t)m->dtype);
    return parse_fields(text, m);
}

/* SPLIT.labels (absent for a synthetic source: n labels of nothing) and SPLIT.paths. */
static int read_split(zp_dataset_t *ds, int s, int has_paths, const char *run_dir, char *err,
                      size_t len)
{
    zp_imagelist_t *l = &ds->split[s];
    char name[32], *buf = NULL;
    size_t bytes = 0;
    snprintf(name, sizeof name, "%s.labels", zp_dataset_split_name(s));
    int rc = read_whole(run_dir, name, &buf, &bytes, err, len);
    if (rc)
        return rc == -ENOENT ? ZP_EDATA : rc;
    if (bytes && (bytes % sizeof *l->label || bytes / sizeof *l->label != (size_t)ds->meta.n[s])) {
        snprintf(err, len, "%s/dataset/%s: %zu bytes for %lld labels", run_dir, name, bytes,
                 (long long)ds->meta.n[s]);
        free(buf);
        return ZP_EDATA;
    }
    l->label = bytes ? (int32_t *)(void *)buf : NULL; /* malloc'd: aligned for int32 */
    l->n = bytes ? ds->meta.n[s] : 0;
    if (!bytes)
        free(buf);
    if (!has_paths)
        return 0;
    snprintf(name, sizeof name, "%s.paths", zp_dataset_split_name(s));
    if ((rc = read_whole(run_dir, name, &buf, &bytes, err, len)))
        return rc == -ENOENT ? ZP_EDATA : rc;
    if ((uint64_t)l->n > bytes / 2) /* a path is a byte and its NUL at least */
        rc = ZP_EDATA;
    else if (!(l->path = calloc((size_t)l->n + 1, sizeof *l->path)))
        rc = ZP_ENOMEM;
    size_t at = 0;
    for (int64_t i = 0; !rc && i < l->n; i++) {
        size_t k = at < bytes ? strnlen(buf + at, bytes - at) : 0;
        if (at >= bytes || at + k >= bytes || !(l->path[i] = strdup(buf + at)))
            rc = ZP_EDATA;
        at += k + 1;
    }
    if (!rc && at != bytes)
        rc = ZP_EDATA;
    if (rc)
        snprintf(err, len, "%s/dataset/%s: not %lld NUL-terminated paths", run_dir, name,
                 (long long)l->n);
    free(buf);
    return rc;
}

int zp_dataset_read(zp_dataset_t **out, const char *run_dir, char *err, size_t len)
{
    *out = NULL;
    char *text = NULL;
    size_t bytes;
    int rc = read_whole(run_dir, "meta", &text, &bytes, err, len), has_paths[ZP_SPLITS] = {0, 0};
    if (rc)
        return rc;
    zp_dataset_t *ds = calloc(1, sizeof *ds);
    if (!ds)
        rc = ZP_ENOMEM;
    else if ((rc = parse_meta(text, &ds->meta, has_paths)))
        snprintf(err, len, "%s/dataset/meta: malformed (written by another version?)", run_dir);
    free(text);
    for (int s = 0; !rc && s < ZP_SPLITS; s++)
        rc = read_split(ds, s, has_paths[s], run_dir, err, len);
    size_t arrays_bytes;
    if (!rc && (rc = read_whole(run_dir, "arrays", &ds->arrays, &arrays_bytes, err, len)) == -ENOENT)
        rc = 0; /* a source of no array files */
    if (rc) {
        zp_dataset_destroy(&ds);
        return rc;
    }
    ds->meta.probed = ds;
    *out = ds;
    return 0;
}

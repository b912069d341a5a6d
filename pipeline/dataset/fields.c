/* fields.c — a sample's named fields and their record layout (fields.h). */
#define _GNU_SOURCE
#include "pipeline/dataset/fields.h"
#include "schemas/errors.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
} FTYPES[ZP_FT_COUNT] = {
    [ZP_FT_F32] = {"float32", 4}, [ZP_FT_U8] = {"uint8", 1},    [ZP_FT_I8] = {"int8", 1},
    [ZP_FT_I16] = {"int16", 2},   [ZP_FT_I32] = {"int32", 4},   [ZP_FT_I64] = {"int64", 8},
    [ZP_FT_F16] = {"float16", 2}, [ZP_FT_BF16] = {"bfloat16", 2}, [ZP_FT_F64] = {"float64", 8},
};

const char *zp_fields_type_name(int dtype)
{
    return dtype > 0 && dtype < ZP_FT_COUNT ? FTYPES[dtype].name : "?";
}

int zp_fields_type_of(const char *name)
{
    for (int t = 1; t < ZP_FT_COUNT; t++)
        if (!strcmp(name, FTYPES[t].name))
            return t;
    return 0;
}

size_t zp_fields_type_size(int dtype) { return dtype > 0 && dtype < ZP_FT_COUNT ? FTYPES[dtype].size : 0; }

static int good_name(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n < ZP_FIELD_NAME &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

const zp_field_t *zp_fields_find(const zp_fields_t *fs, const char *name)
{
    for (int i = 0; i < fs->n; i++)
        if (!strcmp(fs->f[i].name, name))
            return &fs->f[i];
    return NULL;
}

int zp_fields_add(zp_fields_t *fs, const char *name, int dtype, int ndim, const int64_t *shape,
                  int in_labels, size_t max_bytes, char *err, size_t len)
{
    size_t size = zp_fields_type_size(dtype), bytes = size;
    if (!good_name(name)) {
        snprintf(err, len, "field '%.40s': a name is 1 to %d letters, digits, '_', '.' or '-'",
                 name, ZP_FIELD_NAME - 1);
        return ZP_EDATA;
    }
    if (zp_fields_find(fs, name) || fs->n == ZP_FIELDS_MAX || !size || ndim < 0 ||
        ndim > ZP_FIELD_DIMS) {
        snprintf(err, len, "field '%s': %s", name,
                 fs->n == ZP_FIELDS_MAX ? "more fields than a sample holds (16)"
                 : !size                ? "unknown element type"
                 : ndim < 0 || ndim > ZP_FIELD_DIMS ? "more than 6 dimensions"
                                                    : "a second field of that name");
        return ZP_EDATA;
    }
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 1 || __builtin_mul_overflow(bytes, (size_t)shape[d], &bytes) ||
            bytes > max_bytes) {
            snprintf(err, len, "field '%s': dimension %d is %lld%s", name, d, (long long)shape[d],
                     shape[d] < 1 ? " (every dimension needs at least 1)" : ", too large");
            return ZP_EDATA;
        }
    zp_field_t *f = &fs->f[fs->n];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->dtype = dtype, f->ndim = ndim, f->bytes = bytes;
    if (ndim) /* a scalar's shape may be NULL */
        memcpy(f->shape, shape, sizeof *shape * (size_t)ndim);
    if (in_labels) {
        f->offset = ZP_FIELD_IN_LABELS;
    } else {
        /* the record is padded to a multiple of its largest element size: each
         * field keeps its alignment in every record of a batch */
        size_t most = size;
        for (int i = 0; i < fs->n; i++)
            if (fs->f[i].offset != ZP_FIELD_IN_LABELS && zp_fields_type_size(fs->f[i].dtype) > most)
                most = zp_fields_type_size(fs->f[i].dtype);
        size_t at = (fs->record_bytes + size - 1) / size * size, end = at + bytes;
        end = (end + most - 1) / most * most;
        if (end > max_bytes || end < at) {
            snprintf(err, len, "field '%s': the sample's fields take more than %zu bytes", name,
                     max_bytes);
            return ZP_EDATA;
        }
        f->offset = at;
        fs->record_bytes = end;
    }
    fs->n++;
    return 0;
}

void zp_fields_builtin(zp_fields_t *fs, int dtype, const int64_t shape[3])
{
    char err[128];
    memset(fs, 0, sizeof *fs);
    fs->item = ZP_ITEM_TUPLE;
    zp_fields_add(fs, "image", dtype, 3, shape, 0, SIZE_MAX, err, sizeof err);
    zp_fields_add(fs, "label", ZP_FT_I32, 0, NULL, 1, SIZE_MAX, err, sizeof err);
}

/* Appends to buf[*at..len); 0, or -1 when it does not fit. */
__attribute__((format(printf, 4, 5))) static int put(char *buf, size_t len, size_t *at,
                                                     const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = *at < len ? vsnprintf(buf + *at, len - *at, fmt, ap) : -1;
    va_end(ap);
    if (n < 0 || (size_t)n >= len - *at)
        return -1;
    *at += (size_t)n;
    return 0;
}

int zp_fields_format(const zp_fields_t *fs, char *buf, size_t len)
{
    size_t at = 0;
    if (put(buf, len, &at, "fields %d %s\n", fs->n, fs->item == ZP_ITEM_DICT ? "dict" : "tuple"))
        return -1;
    for (int i = 0; i < fs->n; i++) {
        const zp_field_t *f = &fs->f[i];
        if (put(buf, len, &at, "field %s %s %d%s", f->name, zp_fields_type_name(f->dtype), f->ndim,
                f->offset == ZP_FIELD_IN_LABELS ? " labels" : ""))
            return -1;
        for (int d = 0; d < f->ndim; d++)
            if (put(buf, len, &at, " %lld", (long long)f->shape[d]))
                return -1;
        if (put(buf, len, &at, "\n"))
            return -1;
    }
    return (int)at;
}

/* One "field NAME DTYPE NDIM [labels] D..." line into fs. */
static int parse_field(zp_fields_t *fs, const char *line, size_t max_bytes, char *err, size_t len)
{
    char name[64], type[16], word[16];
    int ndim, used = 0, in_labels = 0;
    int64_t shape[ZP_FIELD_DIMS];
    if (sscanf(line, "field %63s %15s %d%n", name, type, &ndim, &used) != 3 || ndim < 0 ||
        ndim > ZP_FIELD_DIMS) {
        snprintf(err, len, "malformed field line '%.80s'", line);
        return ZP_EDATA;
    }
    const char *p = line + used;
    int k = 0;
    if (sscanf(p, " %15s%n", word, &k) == 1 && !strcmp(word, "labels"))
        in_labels = 1, p += k;
    for (int d = 0; d < ndim; d++) {
        long long v;
        if (sscanf(p, " %lld%n", &v, &k) != 1) {
            snprintf(err, len, "field '%s': %d dimensions given, %d read", name, ndim, d);
            return ZP_EDATA;
        }
        shape[d] = v, p += k;
    }
    return zp_fields_add(fs, name, zp_fields_type_of(type), ndim, shape, in_labels, max_bytes, err, len);
}

int zp_fields_parse(zp_fields_t *fs, const char *text, size_t max_bytes, char *err, size_t len)
{
    memset(fs, 0, sizeof *fs);
    const char *at = strstr(text, "\nfields ");
    if (!at && strncmp(text, "fields ", 7))
        return -ENOENT;
    at = at ? at + 1 : text;
    int n;
    char item[16];
    if (sscanf(at, "fields %d %15s", &n, item) != 2 || n < 1 || n > ZP_FIELDS_MAX ||
        (strcmp(item, "tuple") && strcmp(item, "dict"))) {
        snprintf(err, len, "malformed 'fields' line");
        return ZP_EDATA;
    }
    fs->item = strcmp(item, "dict") ? ZP_ITEM_TUPLE : ZP_ITEM_DICT;
    for (int i = 0; i < n; i++) {
        at = strchr(at, '\n');
        if (!at || strncmp(++at, "field ", 6)) {
            snprintf(err, len, "%d field lines announced, %d found", n, i);
            return ZP_EDATA;
        }
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)strcspn(at, "\n"), at);
        int rc = parse_field(fs, line, max_bytes, err, len);
        if (rc)
            return rc;
    }
    return 0;
}

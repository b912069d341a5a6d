/* source_npy.c — dataset.source: npy, NumPy's .npy files: each entry of
 * dataset.files.SPLIT is a folder holding one .npy per field (the file
 * dataset.fields names), axis 0 the sample, as a preprocessing job writes
 * them with numpy.save. A loader reads a sample's row of each file with one
 * pread (the page cache serves what was read before; a file cut short
 * under a running run is an error naming the sample, never a SIGBUS of a
 * mapping); nothing is decoded. At most NPY_OPEN_MAX files stay open.
 *
 * The format (numpy.lib.format): "\x93NUMPY", a major and minor version, the
 * header's length (2 bytes in version 1, 4 in 2 and 3), then the header, a
 * Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (N,
 * ...)}, and the C-ordered data right after it. Refused, saying so: Fortran
 * order, a big-endian, structured or object dtype, unsigned integers wider
 * than a byte (no field type holds them), a header we cannot read. */
#define _GNU_SOURCE
#include "pipeline/source/source_arrays.h"
#include "schemas/errors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NPY_HEADER_MAX 65536
#define NPY_OPEN_MAX 256

typedef struct {
    zp_array_field_t field;
    size_t data;      /* offset of the first row */
    size_t row_bytes; /* one sample's */
    size_t file_bytes;
} npy_header_t;

/* The value after 'key': in the header's dict, or NULL. */
static const char *dict_value(const char *h, const char *key)
{
    char quoted[32];
    snprintf(quoted, sizeof quoted, "'%s'", key);
    const char *p = strstr(h, quoted);
    if (!p)
        return NULL;
    p += strlen(quoted);
    p += strspn(p, " ");
    if (*p != ':')
        return NULL;
    return p + 1 + strspn(p + 1, " ");
}

/* descr '<f4' ... into a field type; 0 with why set where not one. */
static int type_of(const char *d, const char **why)
{
    static const struct {
        const char *descr;
        int dtype;
    } TYPES[] = {{"f2", ZP_FT_F16}, {"f4", ZP_FT_F32}, {"f8", ZP_FT_F64}, {"i1", ZP_FT_I8},
                 {"i2", ZP_FT_I16}, {"i4", ZP_FT_I32}, {"i8", ZP_FT_I64}, {"u1", ZP_FT_U8},
                 {"b1", ZP_FT_U8}};
    if (d[0] == '>') {
        *why = "is big-endian: save it little-endian (array.astype(array.dtype.newbyteorder('<')))";
        return 0;
    }
    if (d[0] == '<' || d[0] == '|' || d[0] == '=')
        d++;
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (!strcmp(d, TYPES[i].descr))
            return TYPES[i].dtype;
    *why = d[0] == 'O' ? "holds Python objects (dtype object): save numbers, not objects"
           : d[0] == 'u' ? "is an unsigned integer wider than a byte, which no field type holds: "
                           "save it as a signed one (int32, int64)"
                         : "has a dtype zeus-pipe does not read (float16/32/64, int8/16/32/64, "
                           "uint8 and bool do)";
    return 0;
}

/* Reads and checks the header of the open file fd (named path). */
static int read_header(int fd, const char *path, npy_header_t *h, char *err, size_t len)
{
    unsigned char pre[12];
    struct stat st;
    const char *why = NULL;
    memset(h, 0, sizeof *h);
    if (fstat(fd, &st) || pread(fd, pre, sizeof pre, 0) != (ssize_t)sizeof pre ||
        memcmp(pre, "\x93NUMPY", 6) || pre[6] < 1 || pre[6] > 3) {
        snprintf(err, len, "%s: not a .npy file (no \\x93NUMPY magic and version 1 to 3): write it "
                 "with numpy.save", path);
        return ZP_EDATA;
    }
    size_t at = pre[6] == 1 ? 10 : 12;
    size_t hlen = pre[6] == 1 ? (size_t)pre[8] | (size_t)pre[9] << 8
                              : (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 |
                                    (size_t)pre[11] << 24;
    char text[NPY_HEADER_MAX + 1];
    if (hlen > NPY_HEADER_MAX || pread(fd, text, hlen, (off_t)at) != (ssize_t)hlen) {
        snprintf(err, len, "%s: its header (%zu bytes) is longer than %d or cut short", path, hlen,
                 NPY_HEADER_MAX);
        return ZP_EDATA;
    }
    text[hlen] = 0;
    const char *descr = dict_value(text, "descr"), *order = dict_value(text, "fortran_order");
    const char *shape = dict_value(text, "shape");
    char d[16] = "";
    if (!descr || !order || !shape || *shape != '(' || (descr[0] != '\'' && descr[0] != '"') ||
        sscanf(descr + 1, "%15[^'\"]", d) != 1) {
        snprintf(err, len, "%s: a header we cannot read (%.120s): write the file with numpy.save "
                 "of a plain array", path, text);
        return ZP_EDATA;
    }
    if (!strncmp(order, "True", 4)) {
        snprintf(err, len, "%s: is in Fortran order: save numpy.ascontiguousarray(array)", path);
        return ZP_EDATA;
    }
    if (!(h->field.dtype = type_of(d, &why))) {
        snprintf(err, len, "%s: '%s' %s", path, d, why);
        return ZP_EDATA;
    }
    int dims = 0;
    int64_t shape_v[ZP_FIELD_DIMS + 1];
    for (const char *p = shape + 1; *p != ')';) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || dims == ZP_FIELD_DIMS + 1) {
            snprintf(err, len, "%s: shape %.60s: %s", path, shape,
                     dims == ZP_FIELD_DIMS + 1 ? "more than 7 dimensions" : "cannot be read");
            return ZP_EDATA;
        }
        shape_v[dims++] = v;
        p = end + strspn(end, " ,");
    }
    if (dims == 0) {
        snprintf(err, len, "%s: a single value (shape ()): a field needs axis 0, the sample", path);
        return ZP_EDATA;
    }
    h->field.rows = shape_v[0];
    h->field.ndim = dims - 1;
    h->row_bytes = zp_fields_type_size(h->field.dtype);
    for (int i = 1; i < dims; i++) {
        h->field.shape[i - 1] = shape_v[i];
        if (shape_v[i] < 1 || h->row_bytes > (size_t)ZP_MAX_ELEMS * 8 / (size_t)shape_v[i]) {
            snprintf(err, len, "%s: shape %.60s: a sample of it is empty or larger than a message "
                     "carries", path, shape);
            return ZP_EDATA;
        }
        h->row_bytes *= (size_t)shape_v[i];
    }
    h->data = at + hlen;
    h->file_bytes = (size_t)st.st_size;
    if (h->field.rows > (int64_t)((h->file_bytes - (h->data < h->file_bytes ? h->data : h->file_bytes)) /
                                  h->row_bytes)) {
        snprintf(err, len, "%s: truncated: %zu bytes, where its header's %lld samples of %zu bytes "
                 "need %zu", path, h->file_bytes, (long long)h->field.rows, h->row_bytes,
                 h->data + (size_t)h->field.rows * h->row_bytes);
        return ZP_EDATA;
    }
    return 0;
}

static int npy_describe(const zp_config_t *cfg, const char *path, const char *where,
                        zp_array_field_t *out, char *err, size_t len)
{
    (void)cfg;
    (void)where;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, len, "%s: %s (dataset.fields names %s in every folder of dataset.files)", path,
                 strerror(errno), where);
        return ZP_EDATA;
    }
    npy_header_t h;
    int rc = read_header(fd, path, &h, err, len);
    close(fd);
    *out = h.field;
    return rc;
}

static const zp_arrays_kind_t NPY = {.name = "npy", .folders = 1, .describe = npy_describe};

typedef struct {
    int fd; /* -1 while closed */
    int64_t used; /* when last read (a count of reads) */
    npy_header_t h;
} npy_file_t;

typedef struct {
    zp_source_t base;
    zp_arrays_t a;
    zp_fields_t fields;
    npy_file_t *files; /* folder i's field k: files[i * nfields + k] */
    int open;
    int64_t reads;
} npy_source_t;

static void path_of(const npy_source_t *s, int i, int k, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", s->a.file[i].path, s->a.where[k]);
}

/* Opens field k of folder i for a read (the least recently read file
 * closed first, at NPY_OPEN_MAX), checking that its header is the run's
 * description. */
static int file_of(npy_source_t *s, int i, int k, npy_file_t **out, char *err, size_t len)
{
    npy_file_t *m = &s->files[i * s->a.nfields + k];
    *out = m;
    m->used = ++s->reads;
    if (m->fd >= 0)
        return 0;
    if (s->open >= NPY_OPEN_MAX) {
        npy_file_t *lru = NULL;
        for (int j = 0; j < s->a.nfiles * s->a.nfields; j++)
            if (s->files[j].fd >= 0 && (!lru || s->files[j].used < lru->used))
                lru = &s->files[j];
        close(lru->fd);
        lru->fd = -1;
        s->open--;
    }
    char path[PATH_MAX + ZP_CONFIG_PAIR_VALUE];
    path_of(s, i, k, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, len, "%s: %s", path, strerror(errno));
        return ZP_EDATA;
    }
    int rc = read_header(fd, path, &m->h, err, len);
    const zp_field_t *f = &s->fields.f[k];
    if (!rc && (m->h.field.dtype != f->dtype || m->h.row_bytes != f->bytes ||
                m->h.field.rows != s->a.file[i].samples)) {
        snprintf(err, len, "%s: changed since the run started (%s, %lld samples of %zu bytes; the "
                 "run's: %s, %lld of %zu): start a new run", path,
                 zp_fields_type_name(m->h.field.dtype), (long long)m->h.field.rows, m->h.row_bytes,
                 zp_fields_type_name(f->dtype), (long long)s->a.file[i].samples, f->bytes);
        rc = ZP_EDATA;
    }
    if (rc) {
        close(fd);
        return rc;
    }
    m->fd = fd;
    s->open++;
    return 0;
}

static int npy_get(zp_source_t *src, int split, uint32_t index, uint8_t *record, int32_t *label,
                   char *err, size_t len)
{
    npy_source_t *s = (npy_source_t *)src;
    int64_t row;
    const zp_array_file_t *f = zp_source_arrays_locate(&s->a, split, index, &row);
    *label = 0;
    if (!f) {
        snprintf(err, len, "%s sample %u: in no file of the run's list", zp_dataset_split_name(split),
                 index);
        return ZP_EDATA;
    }
    for (int k = 0; k < s->a.nfields; k++) {
        npy_file_t *m;
        int i = (int)(f - s->a.file), rc = file_of(s, i, k, &m, err, len);
        if (rc)
            return rc;
        ssize_t got = pread(m->fd, record + s->fields.f[k].offset, m->h.row_bytes,
                            (off_t)(m->h.data + (size_t)row * m->h.row_bytes));
        if (got != (ssize_t)m->h.row_bytes) {
            char path[PATH_MAX + ZP_CONFIG_PAIR_VALUE];
            path_of(s, i, k, path, sizeof path);
            snprintf(err, len, "%s: %s sample %u (row %lld): %s", path, zp_dataset_split_name(split),
                     index, (long long)row, got < 0 ? strerror(errno)
                                                    : "cut short since the run started");
            return ZP_EDATA;
        }
    }
    return 0;
}

static void npy_destroy(zp_source_t *src)
{
    npy_source_t *s = (npy_source_t *)src;
    for (int i = 0; s->files && i < s->a.nfiles * s->a.nfields; i++)
        if (s->files[i].fd >= 0)
            close(s->files[i].fd);
    free(s->files);
    zp_source_arrays_free(&s->a);
    free(s);
}

static int npy_open(zp_source_t **out, const zp_config_t *cfg, const zp_dataset_meta_t *meta,
                    char *err, size_t len)
{
    npy_source_t *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, len, "the npy source: out of memory");
        return ZP_ENOMEM;
    }
    s->base.get = npy_get;
    s->base.destroy = npy_destroy;
    s->fields = meta->fields;
    int rc = zp_source_arrays_read(&s->a, cfg, meta, err, len);
    size_t n = (size_t)s->a.nfiles * (size_t)s->a.nfields;
    if (!rc && !(s->files = calloc(n + 1, sizeof *s->files))) {
        snprintf(err, len, "the npy source: out of memory");
        rc = ZP_ENOMEM;
    }
    for (size_t i = 0; s->files && i < n; i++)
        s->files[i].fd = -1;
    if (rc) {
        npy_destroy(&s->base);
        return rc;
    }
    *out = &s->base;
    return 0;
}

static int npy_probe(const zp_config_t *cfg, zp_dataset_t *ds, char *err, size_t len)
{
    return zp_source_arrays_probe(&NPY, cfg, ds, err, len);
}

const zp_source_ops_t zp_source_npy = {
    .name = "npy",
    .records = 1,
    .check = zp_source_arrays_check,
    .dataset_name = zp_source_arrays_name,
    .identify = zp_source_arrays_identify,
    .probe = npy_probe,
    .fingerprint = zp_source_arrays_fingerprint,
    .open = npy_open,
};

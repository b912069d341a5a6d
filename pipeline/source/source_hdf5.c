/* source_hdf5.c — dataset.source: hdf5, HDF5 files of one dataset per
 * field (dataset.fields: the field's path in every file), axis 0 the
 * sample, read with libhdf5 (the serial library: loaders are processes, so
 * the library's lack of thread safety needs no lock).
 *
 * A loader's task is read ahead file by file: its rows sorted, one selection
 * of every contiguous run of them (a union of hyperslabs) and one H5Dread a
 * field, so that a chunked, compressed dataset's chunks are each read and
 * decompressed once a task; the chunk cache holds a task's chunks
 * (dataset.hdf5.chunk_cache at most). A sample the read-ahead did not get
 * (an error there) is read alone, so that the error names it.
 *
 * Types: HDF5's little-endian integers and floats of the field types
 * (float16/32/64, int8/16/32/64, uint8), read as stored. Refused with a
 * sentence: big-endian, compound, enum (h5py's bool), string and unsigned
 * types wider than a byte. Optional at build time (ZP_HDF5, auto-detected):
 * without libhdf5 a config that asks for it is refused, saying so. */
#define _GNU_SOURCE
#include "pipeline/source/source_arrays.h"
#include "schemas/errors.h"

#include <stdlib.h>
#include <string.h>

#ifndef ZP_HAVE_HDF5

static int no_hdf5(const zp_config_t *cfg, char *err, size_t len)
{
    return zp_config_fail(cfg, "dataset.source", err, len, "hdf5: this zeus-pipe was built without "
                          "libhdf5 (cmake found no hdf5, or -DZP_HDF5=OFF): install libhdf5-dev "
                          "and build again, or write the arrays as .npy files (dataset.source: "
                          "npy)");
}

const zp_source_ops_t zp_source_hdf5 = {
    .name = "hdf5",
    .records = 1,
    .check = no_hdf5,
    .dataset_name = zp_source_arrays_name,
};

#else

#include <hdf5.h>

/* The innermost message of HDF5's error stack: what went wrong, in its words. */
static herr_t deepest(unsigned n, const H5E_error2_t *e, void *data)
{
    (void)n;
    if (((char *)data)[0])
        return 0; /* the deepest one came first */
    char min[128] = "";
    H5Eget_msg(e->min_num, NULL, min, sizeof min);
    snprintf(data, 256, "%s%s%s", e->desc ? e->desc : "", e->desc && min[0] ? ": " : "", min);
    return 0;
}

/* "PATH: dataset WHERE: WHAT: HDF5 says ..." from the current error stack. */
static int h5_fail(const char *path, const char *where, const char *what, char *err, size_t len)
{
    char says[256] = "";
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, deepest, says);
    if (!says[0])
        snprintf(says, sizeof says, "no detail");
    H5Eclear2(H5E_DEFAULT);
    snprintf(err, len, "%s:%s%s %s (HDF5: %s)", path, where ? " dataset " : "", where ? where : "",
             what, says);
    return ZP_EDATA;
}

static void quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

/* The field type of an HDF5 type, or 0 with why set. */
static int type_of(hid_t t, const char **why)
{
    H5T_class_t c = H5Tget_class(t);
    size_t size = H5Tget_size(t);
    if ((c == H5T_INTEGER || c == H5T_FLOAT) && H5Tget_order(t) == H5T_ORDER_BE) {
        *why = "is big-endian: write it little-endian (h5py: dtype '<f4', '<i8', ...)";
        return 0;
    }
    if (c == H5T_INTEGER && H5Tget_sign(t) == H5T_SGN_NONE && size > 1) {
        *why = "is an unsigned integer wider than a byte, which no field type holds: write it as "
               "a signed one (int32, int64)";
        return 0;
    }
    /* the standard layouts only: a field is copied as the file stores it */
    static const struct {
        int dtype;
        hid_t *std;
    } STD[] = {{ZP_FT_F32, &H5T_IEEE_F32LE_g}, {ZP_FT_F64, &H5T_IEEE_F64LE_g},
               {ZP_FT_I8, &H5T_STD_I8LE_g},    {ZP_FT_I16, &H5T_STD_I16LE_g},
               {ZP_FT_I32, &H5T_STD_I32LE_g},  {ZP_FT_I64, &H5T_STD_I64LE_g},
               {ZP_FT_U8, &H5T_STD_U8LE_g}};
    (void)H5open(); /* the predefined types exist once the library is open */
    for (size_t i = 0; (c == H5T_FLOAT || c == H5T_INTEGER) && i < sizeof STD / sizeof STD[0]; i++)
        if (H5Tequal(t, *STD[i].std) > 0)
            return STD[i].dtype;
    size_t spos, epos, esize, mpos, msize; /* IEEE half: sign 15, exponent 10..14, mantissa 0..9 */
    if (c == H5T_FLOAT && size == 2 && H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) >= 0 &&
        spos == 15 && epos == 10 && esize == 5 && mpos == 0 && msize == 10 && H5Tget_ebias(t) == 15)
        return ZP_FT_F16;
    if (c == H5T_FLOAT || c == H5T_INTEGER) {
        *why = "is a number of a layout zeus-pipe does not read (a 2-byte float that is not IEEE "
               "half, bfloat16 say, or a packed integer): write float16/32/64 or int8/16/32/64";
        return 0;
    }
    *why = c == H5T_COMPOUND ? "is a compound type: write each member as a dataset of its own"
           : c == H5T_ENUM   ? "is an enum (h5py writes bool so): write it as uint8"
           : c == H5T_STRING ? "holds strings: write numbers"
                             : "is of a type zeus-pipe does not read (little-endian float16/32/"
                               "64, int8/16/32/64, uint8 do)";
    return 0;
}

static int hdf5_describe(const zp_config_t *cfg, const char *path, const char *where,
                         zp_array_field_t *out, char *err, size_t len)
{
    (void)cfg;
    quiet();
    memset(out, 0, sizeof *out);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return h5_fail(path, NULL, "cannot be opened as an HDF5 file", err, len);
    hid_t d = H5Dopen2(f, where, H5P_DEFAULT), t = -1, s = -1;
    int rc = d < 0 ? h5_fail(path, where, "is not there (dataset.fields names it)", err, len) : 0;
    if (!rc && ((t = H5Dget_type(d)) < 0 || (s = H5Dget_space(d)) < 0))
        rc = h5_fail(path, where, "cannot be described", err, len);
    const char *why = NULL;
    if (!rc && !(out->dtype = type_of(t, &why))) {
        snprintf(err, len, "%s: dataset %s %s", path, where, why ? why : "is of an odd size");
        rc = ZP_EDATA;
    }
    int dims = rc ? 0 : H5Sget_simple_extent_ndims(s);
    hsize_t shape[H5S_MAX_RANK];
    if (!rc && (dims < 1 || dims > ZP_FIELD_DIMS + 1 ||
                H5Sget_simple_extent_dims(s, shape, NULL) < 0)) {
        snprintf(err, len, "%s: dataset %s has %d dimensions: a field needs 1 (axis 0, the sample) "
                 "to %d", path, where, dims, ZP_FIELD_DIMS + 1);
        rc = ZP_EDATA;
    }
    if (!rc) {
        out->rows = (int64_t)shape[0];
        out->ndim = dims - 1;
        for (int i = 1; i < dims; i++)
            out->shape[i - 1] = (int64_t)shape[i];
    }
    if (s >= 0)
        H5Sclose(s);
    if (t >= 0)
        H5Tclose(t);
    if (d >= 0)
        H5Dclose(d);
    H5Fclose(f);
    return rc;
}

static const zp_arrays_kind_t HDF5 = {.name = "hdf5", .describe = hdf5_describe};

typedef struct {
    hid_t dset, type, space; /* -1 until the first read */
} h5_field_t;

/* Files a loader keeps open (each a descriptor, each field its chunk cache);
 * beyond, the least recently read is closed. */
#define H5_OPEN_MAX 64

typedef struct {
    zp_source_t base;
    zp_arrays_t a;
    zp_fields_t fields;
    hid_t *file;       /* open files, -1 while closed */
    int64_t *used;     /* when each was last read (a count of reads) */
    int64_t reads;
    int open;          /* files open */
    h5_field_t *field; /* file i's field k: field[i * nfields + k] */
    int64_t cache_bytes, task_size; /* cache_bytes: of one open field */
    size_t most; /* bytes of the largest field of a sample: s->rows holds that a row */
    /* the last task read ahead: its samples' records, in its order */
    int ahead_split;
    size_t ahead_n, ahead_at;
    uint32_t *ahead_idx;
    uint8_t *ahead, *rows; /* records; one field's rows as read */
    int *ahead_ok;
} h5_source_t;

static void close_file(h5_source_t *s, int i)
{
    for (int k = 0; k < s->a.nfields; k++) {
        h5_field_t *h = &s->field[i * s->a.nfields + k];
        if (h->space >= 0)
            H5Sclose(h->space);
        if (h->type >= 0)
            H5Tclose(h->type);
        if (h->dset >= 0)
            H5Dclose(h->dset);
        *h = (h5_field_t){-1, -1, -1};
    }
    if (s->file[i] >= 0) {
        H5Fclose(s->file[i]);
        s->file[i] = -1;
        s->open--;
    }
}

/* File i, opened (the least recently read closed first, at H5_OPEN_MAX). */
static int file_of(h5_source_t *s, int i, char *err, size_t len)
{
    s->used[i] = ++s->reads;
    if (s->file[i] >= 0)
        return 0;
    if (s->open >= H5_OPEN_MAX) {
        int lru = -1;
        for (int j = 0; j < s->a.nfiles; j++)
            if (s->file[j] >= 0 && (lru < 0 || s->used[j] < s->used[lru]))
                lru = j;
        close_file(s, lru);
    }
    if ((s->file[i] = H5Fopen(s->a.file[i].path, H5F_ACC_RDONLY, H5P_DEFAULT)) < 0)
        return h5_fail(s->a.file[i].path, NULL, "cannot be opened as an HDF5 file", err, len);
    s->open++;
    return 0;
}

/* Opens field k of file i on its first read, with a chunk cache of a task's
 * chunks (and of its share of dataset.hdf5.chunk_cache at most). */
static int field_of(h5_source_t *s, int i, int k, h5_field_t **out, char *err, size_t len)
{
    h5_field_t *h = &s->field[i * s->a.nfields + k];
    *out = h;
    int rc = file_of(s, i, err, len);
    if (rc || h->dset >= 0)
        return rc;
    const char *path = s->a.file[i].path, *where = s->a.where[k];
    hid_t d = H5Dopen2(s->file[i], where, H5P_DEFAULT);
    if (d < 0)
        return h5_fail(path, where, "is not there (dataset.fields names it)", err, len);
    hid_t dcpl = H5Dget_create_plist(d), dapl = H5Pcreate(H5P_DATASET_ACCESS);
    hsize_t chunk[H5S_MAX_RANK];
    int chunked = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED;
    int rank = chunked ? H5Pget_chunk(dcpl, H5S_MAX_RANK, chunk) : 0;
    if (rank > 0) { /* every chunk a task's rows may touch, decompressed once */
        double bytes = (double)zp_fields_type_size(s->fields.f[k].dtype);
        for (int j = 0; j < rank; j++)
            bytes *= (double)chunk[j];
        double want = bytes * (double)(s->task_size > 0 ? s->task_size : 1);
        size_t cache = (size_t)(want < (double)s->cache_bytes ? want : (double)s->cache_bytes);
        H5Pset_chunk_cache(dapl, 12421, cache, 1.0);
        H5Dclose(d);
        d = H5Dopen2(s->file[i], where, dapl);
    }
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (dapl >= 0)
        H5Pclose(dapl);
    if (d < 0)
        return h5_fail(path, where, "cannot be opened", err, len);
    const char *why;
    const zp_field_t *fd = &s->fields.f[k];
    hid_t t = H5Dget_type(d), sp = H5Dget_space(d);
    hsize_t dims[H5S_MAX_RANK];
    int ok = t >= 0 && sp >= 0 && type_of(t, &why) == fd->dtype &&
             H5Tget_size(t) == zp_fields_type_size(fd->dtype) &&
             H5Sget_simple_extent_ndims(sp) == fd->ndim + 1 &&
             H5Sget_simple_extent_dims(sp, dims, NULL) == fd->ndim + 1 &&
             (int64_t)dims[0] == s->a.file[i].samples;
    for (int j = 0; ok && j < fd->ndim; j++)
        ok = (int64_t)dims[j + 1] == fd->shape[j];
    if (!ok) { /* never read: every sample of it says so */
        if (sp >= 0)
            H5Sclose(sp);
        if (t >= 0)
            H5Tclose(t);
        H5Dclose(d);
        snprintf(err, len, "%s: dataset %s changed since the run started (its type, its sample's "
                 "shape or its %lld samples): start a new run", path, where,
                 (long long)s->a.file[i].samples);
        return ZP_EDATA;
    }
    h->dset = d, h->type = t, h->space = sp;
    return 0;
}

/* Reads `count` runs (start, length) of rows of field k of file i into
 * s->rows, in row order: one selection, one H5Dread. */
static int read_rows(h5_source_t *s, int i, int k, const int64_t (*runs)[2], size_t count,
                     size_t rows, char *err, size_t len)
{
    h5_field_t *h;
    int rc = field_of(s, i, k, &h, err, len);
    if (rc)
        return rc;
    const zp_field_t *f = &s->fields.f[k];
    hsize_t start[H5S_MAX_RANK] = {0}, n[H5S_MAX_RANK];
    for (int j = 0; j < f->ndim; j++)
        n[j + 1] = (hsize_t)f->shape[j];
    for (size_t r = 0; r < count; r++) {
        start[0] = (hsize_t)runs[r][0], n[0] = (hsize_t)runs[r][1];
        H5S_seloper_t op = r ? H5S_SELECT_OR : H5S_SELECT_SET;
        if (H5Sselect_hyperslab(h->space, op, start, NULL, n, NULL) < 0)
            return h5_fail(s->a.file[i].path, s->a.where[k], "cannot select its rows", err, len);
    }
    hsize_t elems = (hsize_t)rows * (f->bytes / zp_fields_type_size(f->dtype));
    hid_t mem = H5Screate_simple(1, &elems, NULL);
    herr_t got = mem < 0 ? -1 : H5Dread(h->dset, h->type, mem, h->space, H5P_DEFAULT, s->rows);
    if (mem >= 0)
        H5Sclose(mem);
    return got < 0 ? h5_fail(s->a.file[i].path, s->a.where[k], "cannot be read", err, len) : 0;
}

static int h5_get(zp_source_t *src, int split, uint32_t index, uint8_t *record, int32_t *label,
                  char *err, size_t len)
{
    h5_source_t *s = (h5_source_t *)src;
    *label = 0;
    if (s->ahead_split == split && s->ahead_at < s->ahead_n && s->ahead_idx[s->ahead_at] == index) {
        if (s->ahead_ok[s->ahead_at++]) {
            memcpy(record, s->ahead + (s->ahead_at - 1) * s->fields.record_bytes,
                   s->fields.record_bytes);
            return 0;
        } /* its file's read-ahead failed: read alone, to name it */
    } else {
        s->ahead_n = 0; /* out of the task's order: read alone from here */
    }
    int64_t row;
    const zp_array_file_t *f = zp_source_arrays_locate(&s->a, split, index, &row);
    if (!f) {
        snprintf(err, len, "%s sample %u: in no file of the run's list", zp_dataset_split_name(split),
                 index);
        return ZP_EDATA;
    }
    int64_t run[1][2] = {{row, 1}};
    for (int k = 0; k < s->a.nfields; k++) {
        int rc = read_rows(s, (int)(f - s->a.file), k, run, 1, 1, err, len);
        if (rc) {
            size_t at = strlen(err);
            snprintf(err + at, len - at, ", %s sample %u (row %lld)", zp_dataset_split_name(split),
                     index, (long long)row);
            return rc;
        }
        memcpy(record + s->fields.f[k].offset, s->rows, s->fields.f[k].bytes);
    }
    return 0;
}

typedef struct {
    int file;
    int64_t row;
    size_t at; /* in the task */
} wanted_t;

static int by_place(const void *x, const void *y)
{
    const wanted_t *a = x, *b = y;
    return a->file != b->file ? (a->file > b->file) - (a->file < b->file)
                              : (a->row > b->row) - (a->row < b->row);
}

/* The task's samples read file by file (see the top of the file). */
static void h5_task(zp_source_t *src, int split, const uint8_t *idx, size_t n)
{
    h5_source_t *s = (h5_source_t *)src;
    s->ahead_n = s->ahead_at = 0;
    size_t rb = s->fields.record_bytes, most = s->most;
    wanted_t *w = malloc(n * sizeof *w);
    int64_t(*runs)[2] = malloc(n * sizeof *runs);
    uint32_t *ix = realloc(s->ahead_idx, n * sizeof *ix);
    int *ok = ix ? realloc(s->ahead_ok, n * sizeof *ok) : NULL;
    s->ahead_idx = ix ? ix : s->ahead_idx;
    s->ahead_ok = ok ? ok : s->ahead_ok;
    uint8_t *rec = ok ? realloc(s->ahead, n * rb + 1) : NULL;
    s->ahead = rec ? rec : s->ahead;
    uint8_t *rows = rec ? realloc(s->rows, n * most + 1) : NULL;
    s->rows = rows ? rows : s->rows;
    if (!w || !runs || !rows) {
        free(w);
        free(runs);
        return;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(&ix[i], idx + 4 * i, 4);
        ok[i] = 0;
        int64_t row;
        const zp_array_file_t *f = zp_source_arrays_locate(&s->a, split, ix[i], &row);
        if (f)
            w[m++] = (wanted_t){(int)(f - s->a.file), row, i};
    }
    qsort(w, m, sizeof *w, by_place);
    char err[PATH_MAX + 1024]; /* unused: a sample that fails here is read alone and named */
    for (size_t a = 0, b; a < m; a = b) { /* w[a..b): one file's rows */
        size_t count = 0, distinct = 0;
        for (b = a; b < m && w[b].file == w[a].file; b++) {
            if (b > a && w[b].row == w[b - 1].row)
                continue; /* the same sample twice in a task: read once */
            distinct++;
            if (count && runs[count - 1][0] + runs[count - 1][1] == w[b].row)
                runs[count - 1][1]++;
            else
                runs[count][0] = w[b].row, runs[count++][1] = 1;
        }
        int bad = 0;
        for (int k = 0; k < s->fields.n && !bad; k++) {
            const zp_field_t *f = &s->fields.f[k];
            bad = read_rows(s, w[a].file, k, (const int64_t(*)[2])runs, count, distinct, err,
                            sizeof err) != 0;
            for (size_t j = a, r = 0; j < b && !bad; j++) {
                r -= j > a && w[j].row == w[j - 1].row; /* a repeat: the row just copied */
                memcpy(rec + w[j].at * rb + f->offset, rows + r++ * f->bytes, f->bytes);
            }
        }
        for (size_t j = a; j < b && !bad; j++)
            ok[w[j].at] = 1;
    }
    free(w);
    free(runs);
    s->ahead_split = split, s->ahead_n = n;
}

static void h5_destroy(zp_source_t *src)
{
    h5_source_t *s = (h5_source_t *)src;
    for (int i = 0; s->field && s->file && i < s->a.nfiles; i++)
        close_file(s, i);
    free(s->field);
    free(s->file);
    free(s->used);
    free(s->ahead_idx);
    free(s->ahead_ok);
    free(s->ahead);
    free(s->rows);
    zp_source_arrays_free(&s->a);
    free(s);
}

static int h5_open(zp_source_t **out, const zp_config_t *cfg, const zp_dataset_meta_t *meta,
                   char *err, size_t len)
{
    quiet();
    h5_source_t *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, len, "the hdf5 source: out of memory");
        return ZP_ENOMEM;
    }
    s->base.get = h5_get;
    s->base.destroy = h5_destroy;
    s->base.task = h5_task;
    s->fields = meta->fields;
    s->task_size = cfg->task_size;
    s->ahead_split = -1;
    int rc = zp_source_arrays_read(&s->a, cfg, meta, err, len);
    size_t nfiles = (size_t)s->a.nfiles + 1, fields = nfiles * (size_t)s->a.nfields;
    int open = s->a.nfiles < H5_OPEN_MAX ? s->a.nfiles : H5_OPEN_MAX;
    s->cache_bytes = cfg->hdf5_chunk_cache / ((open > 0 ? open : 1) * (s->a.nfields > 0 ? s->a.nfields : 1));
    for (int k = 0; k < s->fields.n; k++)
        s->most = s->fields.f[k].bytes > s->most ? s->fields.f[k].bytes : s->most;
    if (!rc && (!(s->file = malloc(nfiles * sizeof *s->file)) ||
                !(s->used = calloc(nfiles, sizeof *s->used)) ||
                !(s->field = malloc(fields * sizeof *s->field)) || !(s->rows = malloc(s->most + 1)))) {
        snprintf(err, len, "the hdf5 source: out of memory");
        rc = ZP_ENOMEM;
    }
    for (size_t i = 0; s->file && i < nfiles; i++)
        s->file[i] = -1;
    for (size_t i = 0; s->field && i < fields; i++)
        s->field[i] = (h5_field_t){-1, -1, -1};
    if (rc) {
        h5_destroy(&s->base);
        return rc;
    }
    *out = &s->base;
    return 0;
}

static int h5_probe(const zp_config_t *cfg, zp_dataset_t *ds, char *err, size_t len)
{
    return zp_source_arrays_probe(&HDF5, cfg, ds, err, len);
}

const zp_source_ops_t zp_source_hdf5 = {
    .name = "hdf5",
    .records = 1,
    .check = zp_source_arrays_check,
    .dataset_name = zp_source_arrays_name,
    .identify = zp_source_arrays_identify,
    .probe = h5_probe,
    .fingerprint = zp_source_arrays_fingerprint,
    .open = h5_open,
};

#endif

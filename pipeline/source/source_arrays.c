/* source_arrays.c — the part of dataset.source hdf5 and npy that is not the
 * file format's: the files of each split, the fields, the probe's checks and
 * its description of the files, locating a sample, the fingerprint. */
#define _GNU_SOURCE
#include "pipeline/source/source_arrays.h"
#include "schemas/errors.h"

#include <errno.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

static const char *const FILES_KEY[ZP_SPLITS] = {"dataset.files.train", "dataset.files.test"};

static const zp_strs_t *globs_of(const zp_config_t *cfg, int split)
{
    return split == ZP_SPLIT_TRAIN ? &cfg->arr_train : &cfg->arr_test;
}

/* dataset.fields into a: 0, or ZP_ECONFIG pointed at the key. */
static int read_fields(const zp_config_t *cfg, zp_arrays_t *a, char *err, size_t len)
{
    char why[200];
    a->nfields = zp_config_pairs(cfg->arr_fields, a->name, a->where, ZP_FIELDS_MAX, why,
                                 sizeof why);
    if (a->nfields < 0)
        return zp_config_fail(cfg, "dataset.fields", err, len, "%s", why);
    if (a->nfields == 0)
        return zp_config_fail(cfg, "dataset.fields", err, len, "names no field: write the sample's "
                              "fields as {x: /inputs, y: /targets} (hdf5: each field's dataset in "
                              "the files; npy: its .npy file in each folder, {x: inputs.npy})");
    for (int i = 0; i < a->nfields; i++)
        if (!a->where[i][0] || strspn(a->name[i], "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmn"
                                      "opqrstuvwxyz0123456789_.-") != strlen(a->name[i]))
            return zp_config_fail(cfg, "dataset.fields", err, len, "field '%s': a name of letters, "
                                  "digits, _ . - and a place in the files ('%s')", a->name[i],
                                  a->where[i]);
    return 0;
}

int zp_source_arrays_check(const zp_config_t *cfg, char *err, size_t len)
{
    zp_arrays_t a;
    memset(&a, 0, sizeof a);
    int rc = read_fields(cfg, &a, err, len);
    if (!rc && cfg->arr_train.n == 0)
        rc = zp_config_fail(cfg, FILES_KEY[0], err, len, "names no file: write the splits' files "
                            "as {train: [data/train_*.h5], test: [data/test.h5]} (npy: folders)");
    return rc;
}

void zp_source_arrays_free(zp_arrays_t *a)
{
    free(a->file);
    a->file = NULL;
    a->nfiles = 0;
}

static zp_array_file_t *add_file(zp_arrays_t *a, int *cap)
{
    if (a->nfiles == *cap) {
        int more = *cap ? 2 * *cap : 16;
        zp_array_file_t *f = realloc(a->file, (size_t)more * sizeof *f);
        if (!f)
            return NULL;
        a->file = f, *cap = more;
    }
    zp_array_file_t *f = &a->file[a->nfiles++];
    memset(f, 0, sizeof *f);
    return f;
}

/* Every split's files: each pattern's matches, sorted, in the order the
 * patterns are written. A pattern that matches nothing is an error. */
static int find_files(const zp_arrays_kind_t *kind, const zp_config_t *cfg, zp_arrays_t *a,
                      char *err, size_t len)
{
    int cap = 0;
    for (int s = 0; s < ZP_SPLITS; s++) {
        const zp_strs_t *g = globs_of(cfg, s);
        a->from[s] = a->nfiles;
        for (int i = 0; i < g->n; i++) {
            glob_t found;
            int rc = glob(g->v[i], GLOB_ERR, NULL, &found);
            if (rc) {
                globfree(&found);
                return zp_config_fail(cfg, FILES_KEY[s], err, len, "'%s' %s", g->v[i],
                                      rc == GLOB_NOMATCH ? (kind->folders ? "matches no folder"
                                                                          : "matches no file")
                                                         : "cannot be searched (a folder on its "
                                                           "way cannot be read)");
            }
            for (size_t j = 0; j < found.gl_pathc; j++) {
                const char *p = found.gl_pathv[j];
                struct stat st;
                int ok = !stat(p, &st) &&
                         (kind->folders ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
                ok = ok && !strchr(p, '\n') && strlen(p) < PATH_MAX;
                zp_array_file_t *f = ok ? add_file(a, &cap) : NULL;
                if (!f) {
                    zp_config_fail(cfg, FILES_KEY[s], err, len, "'%s': %s", p,
                                   !ok ? (kind->folders ? "not a folder (npy: a folder of one .npy "
                                                          "file per field)" : "not a file")
                                       : "a path with a newline, too long, or out of memory");
                    globfree(&found);
                    return ZP_ECONFIG;
                }
                f->split = s;
                snprintf(f->path, sizeof f->path, "%s", p);
            }
            globfree(&found);
        }
        a->count[s] = a->nfiles - a->from[s];
    }
    return 0;
}

/* Where field k of file f is: the file itself, or (npy) its file in the folder. */
static void field_path(const zp_arrays_kind_t *kind, const zp_arrays_t *a, const zp_array_file_t *f,
                       int k, char *buf, size_t len)
{
    if (kind->folders)
        snprintf(buf, len, "%s/%s", f->path, a->where[k]);
    else
        snprintf(buf, len, "%s", f->path);
}

static void shape_text(const zp_array_field_t *d, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s [", zp_fields_type_name(d->dtype));
    for (int i = 0; i < d->ndim && n > 0 && (size_t)n < len; i++)
        n += snprintf(buf + n, len - (size_t)n, "%s%lld", i ? " " : "", (long long)d->shape[i]);
    if (n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, "]");
}

static int same_field(const zp_array_field_t *x, const zp_array_field_t *y)
{
    if (x->dtype != y->dtype || x->ndim != y->ndim)
        return 0;
    for (int i = 0; i < x->ndim; i++)
        if (x->shape[i] != y->shape[i])
            return 0;
    return 1;
}

/* Every field of every file described and checked against the first file's. */
static int describe_all(const zp_arrays_kind_t *kind, const zp_config_t *cfg, zp_arrays_t *a,
                        zp_array_field_t *first, char *err, size_t len)
{
    int64_t at[ZP_SPLITS] = {0, 0};
    for (int i = 0; i < a->nfiles; i++) {
        zp_array_file_t *f = &a->file[i];
        for (int k = 0; k < a->nfields; k++) {
            char path[PATH_MAX + ZP_CONFIG_PAIR_VALUE], want[96], got[96];
            zp_array_field_t d;
            field_path(kind, a, f, k, path, sizeof path);
            int rc = kind->describe(cfg, path, a->where[k], &d, err, len);
            if (rc)
                return rc;
            struct stat st; /* hdf5: one file of every field */
            if ((kind->folders || k == 0) && !stat(path, &st)) {
                f->bytes += st.st_size;
                f->mtime = st.st_mtime > f->mtime ? st.st_mtime : f->mtime;
            }
            if (d.rows < 0 || d.rows > (int64_t)UINT32_MAX - at[f->split]) {
                snprintf(err, len, "%s: field '%s' (%s) has %lld samples, and the %s split at most "
                         "%u", path, a->name[k], a->where[k], (long long)d.rows,
                         zp_dataset_split_name(f->split), UINT32_MAX);
                return ZP_EDATA;
            }
            if (k == 0)
                f->samples = d.rows;
            if (d.rows != f->samples) {
                snprintf(err, len, "%s: field '%s' (%s) has %lld samples (axis 0) where '%s' (%s) "
                         "has %lld: every field of a file needs one row per sample", path,
                         a->name[k], a->where[k], (long long)d.rows, a->name[0], a->where[0],
                         (long long)f->samples);
                return ZP_EDATA;
            }
            if (i == 0) {
                first[k] = d;
            } else if (!same_field(&first[k], &d)) {
                shape_text(&first[k], want, sizeof want);
                shape_text(&d, got, sizeof got);
                snprintf(err, len, "%s: field '%s' (%s) is %s, in %s it is %s: every file needs "
                         "the same type and sample shape", path, a->name[k], a->where[k], got,
                         a->file[0].path, want);
                return ZP_EDATA;
            }
        }
        f->first = at[f->split];
        at[f->split] += f->samples; /* at most UINT32_MAX: checked above */
    }
    return 0;
}

/* The description RUN/dataset/arrays holds. */
static char *format_files(const zp_arrays_t *a)
{
    char *text = NULL;
    size_t bytes = 0;
    FILE *f = open_memstream(&text, &bytes);
    if (!f)
        return NULL;
    for (int i = 0; i < a->nfiles; i++)
        fprintf(f, "%s %lld %lld %lld %s\n", zp_dataset_split_name(a->file[i].split),
                (long long)a->file[i].samples, (long long)a->file[i].bytes,
                (long long)a->file[i].mtime, a->file[i].path);
    if (fclose(f)) {
        free(text);
        return NULL;
    }
    return text;
}

int zp_source_arrays_probe(const zp_arrays_kind_t *kind, const zp_config_t *cfg, zp_dataset_t *ds,
                    char *err, size_t len)
{
    zp_arrays_t a;
    memset(&a, 0, sizeof a);
    zp_array_field_t first[ZP_FIELDS_MAX];
    int rc = read_fields(cfg, &a, err, len);
    if (!rc)
        rc = find_files(kind, cfg, &a, err, len);
    if (!rc)
        rc = describe_all(kind, cfg, &a, first, err, len);
    zp_dataset_meta_t *m = &ds->meta;
    for (int k = 0; !rc && k < a.nfields; k++) {
        char why[200];
        if (zp_fields_add(&m->fields, a.name[k], first[k].dtype, first[k].ndim, first[k].shape, 0,
                          ZP_MAX_ELEMS, why, sizeof why)) {
            snprintf(err, len, "%s: dataset.fields: %s", a.file[0].path, why);
            rc = ZP_EDATA;
        }
    }
    if (!rc && !(ds->arrays = format_files(&a))) {
        snprintf(err, len, "the list of array files: out of memory");
        rc = ZP_ENOMEM;
    }
    if (!rc) {
        m->fields.item = ZP_ITEM_DICT; /* the fields have the config's names */
        for (int i = 0; i < a.nfiles; i++) {
            zp_array_file_t *f = &a.file[i];
            m->n[f->split] += f->samples;
            m->files_bytes[f->split] += f->bytes;
            if (f->mtime > m->files_mtime[f->split])
                m->files_mtime[f->split] = f->mtime;
        }
        m->sample_bytes = m->fields.record_bytes;
        m->elems = (int64_t)m->sample_bytes;
        m->shape[0] = m->shape[1] = 1, m->shape[2] = m->elems;
        m->dtype = ZP_DTYPE_U8;
        m->classes = 1;
    }
    zp_source_arrays_free(&a);
    return rc;
}

int zp_source_arrays_read(zp_arrays_t *a, const zp_config_t *cfg, const zp_dataset_meta_t *meta,
                   char *err, size_t len)
{
    memset(a, 0, sizeof *a);
    const char *text = meta->probed ? meta->probed->arrays : NULL;
    if (!text) {
        snprintf(err, len, "the run's description has no list of array files (RUN/dataset/arrays)");
        return ZP_EDATA;
    }
    if (read_fields(cfg, a, err, len))
        return ZP_EDATA;
    int cap = 0, rc = 0;
    int64_t at[ZP_SPLITS] = {0, 0};
    for (const char *p = text; *p && !rc; p = strchr(p, '\n') + 1) {
        /* "SPLIT SAMPLES BYTES MTIME PATH": each number read with strtoll, which
         * stops at the line (sscanf would measure the rest of the text each time) */
        const char *nl = strchr(p, '\n'), *q = p + strcspn(p, " \n");
        int split = q - p == 5 && !strncmp(p, "train", 5) ? ZP_SPLIT_TRAIN
                    : q - p == 4 && !strncmp(p, "test", 4) ? ZP_SPLIT_TEST : -1;
        long long v[3];
        for (int j = 0; j < 3 && split >= 0; j++) {
            char *end;
            v[j] = *q == ' ' && q[1] >= '0' && q[1] <= '9' ? strtoll(q + 1, &end, 10) : -1;
            split = v[j] < 0 || *end != ' ' ? -1 : split;
            q = split >= 0 ? end : q;
        }
        zp_array_file_t *f = nl && split >= 0 ? add_file(a, &cap) : NULL;
        if (!f || nl - (q + 1) <= 0 || nl - (q + 1) >= PATH_MAX || v[0] > (long long)UINT32_MAX) {
            rc = ZP_EDATA;
            break;
        }
        long long samples = v[0], bytes = v[1], mtime = v[2];
        int used = (int)(q + 1 - p);
        f->split = split;
        if (a->nfiles > 1 && f->split < a->file[a->nfiles - 2].split) {
            rc = ZP_EDATA; /* train's first */
            break;
        }
        f->samples = samples, f->bytes = bytes, f->mtime = mtime;
        f->first = at[f->split];
        if ((at[f->split] += samples) > (int64_t)UINT32_MAX) {
            rc = ZP_EDATA;
            break;
        }
        snprintf(f->path, sizeof f->path, "%.*s", (int)(nl - (p + used)), p + used);
    }
    for (int s = 0; !rc && s < ZP_SPLITS; s++)
        if (at[s] != meta->n[s])
            rc = ZP_EDATA;
    for (int k = 0; !rc && k < a->nfields; k++) /* the config's fields are the description's */
        if (a->nfields != meta->fields.n || strcmp(a->name[k], meta->fields.f[k].name))
            rc = ZP_EDATA;
    for (int i = 0; !rc && i < a->nfiles; i++)
        if (!a->count[a->file[i].split]++)
            a->from[a->file[i].split] = i;
    if (rc) {
        snprintf(err, len, "the run's list of array files (RUN/dataset/arrays) is malformed, "
                 "does not add up to the splits' samples, or names other fields than its config");
        zp_source_arrays_free(a);
    }
    return rc;
}

const zp_array_file_t *zp_source_arrays_locate(const zp_arrays_t *a, int split, int64_t index,
                                        int64_t *row)
{
    int lo = a->from[split], hi = a->from[split] + a->count[split] - 1;
    if (hi < lo)
        return NULL;
    while (lo < hi) { /* the last file whose first sample is <= index */
        int mid = (lo + hi + 1) / 2;
        if (a->file[mid].first <= index)
            lo = mid;
        else
            hi = mid - 1;
    }
    const zp_array_file_t *f = &a->file[lo];
    if (index < f->first || index >= f->first + f->samples)
        return NULL;
    *row = index - f->first;
    return f;
}

void zp_source_arrays_name(const zp_config_t *cfg, char *buf, size_t len)
{
    char p[ZP_STR_LEN];
    snprintf(p, sizeof p, "%s", cfg->arr_train.n ? cfg->arr_train.v[0] : "arrays");
    char *slash = strrchr(p, '/');
    if (slash)
        *slash = 0; /* the folder of the first train files */
    slash = strrchr(p, '/');
    snprintf(buf, len, "%.80s", !p[0] || !strcmp(p, ".") ? "arrays" : slash ? slash + 1 : p);
}

void zp_source_arrays_identify(const zp_config_t *cfg, FILE *out)
{
    char cwd[PATH_MAX];
    fprintf(out, "arrays fields %s\ncwd %s\n", cfg->arr_fields, getcwd(cwd, sizeof cwd) ? cwd : "");
    for (int s = 0; s < ZP_SPLITS; s++)
        for (int i = 0; i < globs_of(cfg, s)->n; i++)
            fprintf(out, "%s %s\n", zp_dataset_split_name(s), globs_of(cfg, s)->v[i]);
}

/* The cache keeps the fields as read: what they are (the fields' lines) and
 * where from (every file of the split: path, size, mtime and samples, as one
 * hash, so that any number of files fits). */
int zp_source_arrays_fingerprint(const zp_config_t *cfg, const zp_dataset_meta_t *m, int split,
                                 char *buf, size_t len)
{
    XXH64_hash_t files = 0;
    int nfiles = 0;
    const char *text = m->probed ? m->probed->arrays : NULL;
    const char *name = zp_dataset_split_name(split);
    size_t nl = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p))
        if (!strncmp(p, name, nl) && p[nl] == ' ') {
            files = XXH64(p, strcspn(p, "\n"), files);
            nfiles++;
        }
    size_t n = (size_t)snprintf(buf, len, "source: %s fields=%s\nfiles: %d, xxh64 %016llx of "
                                "their paths, sizes, mtimes and samples\n",
                                zp_source_ops(cfg->dataset_source)->name, cfg->arr_fields, nfiles,
                                (unsigned long long)files);
    if (n < len && zp_fields_format(&m->fields, buf + n, len - n) >= 0)
        n = strlen(buf);
    if (n < len)
        snprintf(buf + n, len - n, "samples: %lld records of %zu bytes\n", (long long)m->n[split],
                 m->sample_bytes);
    return 1;
}

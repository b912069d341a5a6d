/* source_idx.c — dataset.source: idx, the MNIST family: gzip IDX files of
 * images (count x rows x columns, unsigned bytes) and of labels. The probe
 * reads the images' headers and the labels whole; the loader reads the
 * images whole, and takes the labels from the supervisor's probe
 * (meta->probed) when the stage has it, so that they are gunzipped once per
 * run; else from the label files. */
#include "pipeline/source/source.h"
#include "pipeline/base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

/* An IDX file (gzip or plain) read whole. dims[0] is the item count. */
typedef struct {
    int ndims;
    int64_t dims[4];
    uint8_t *data; /* owned; dims product bytes; NULL after a header-only read */
    size_t bytes;
} zp_idx_t;

static void idx_free(zp_idx_t *idx)
{
    free(idx->data);
    idx->data = NULL;
}

static int gz_fail(gzFile gz, const char *path, const char *what, size_t at, size_t of, char *err,
                   size_t len)
{
    int zerr = 0;
    const char *msg = gzerror(gz, &zerr);
    if (zerr != Z_OK && zerr != Z_BUF_ERROR)
        snprintf(err, len, "%s: corrupt gzip stream near byte %zu: %s", path, at, msg);
    else
        snprintf(err, len, "%s: truncated %s at byte %zu of %zu", path, what, at, of);
    return ZP_EDATA;
}

static int idx_read(const char *path, int data_too, zp_idx_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    gzFile gz = gzopen(path, "rb");
    if (!gz) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno ? errno : ENOENT));
        return ZP_EDATA;
    }
    gzbuffer(gz, 1 << 18);
    uint8_t h[4];
    int rc = 0;
    if (gzread(gz, h, 4) != 4) {
        rc = gz_fail(gz, path, "header", 0, 4, err, errlen);
        goto out;
    }
    if (h[0] || h[1] || h[2] != 0x08 || h[3] < 1 || h[3] > 4) {
        snprintf(err, errlen,
                 "%s: bad magic number 0x%02x%02x%02x%02x (expected 0x000008NN: unsigned bytes, "
                 "1-4 dimensions)", path, h[0], h[1], h[2], h[3]);
        rc = ZP_EDATA;
        goto out;
    }
    out->ndims = h[3];
    size_t items = 1;
    for (int i = 0; i < out->ndims; i++) {
        uint8_t d[4];
        if (gzread(gz, d, 4) != 4) {
            rc = gz_fail(gz, path, "header", 4 + 4 * (size_t)i, 4 + 4 * (size_t)out->ndims, err, errlen);
            goto out;
        }
        out->dims[i] = ((int64_t)d[0] << 24) | (d[1] << 16) | (d[2] << 8) | d[3];
        if (out->dims[i] <= 0 || out->dims[i] > (1 << 30) ||
            __builtin_mul_overflow(items, (size_t)out->dims[i], &items)) {
            snprintf(err, errlen, "%s: dimension %d is %lld", path, i, (long long)out->dims[i]);
            rc = ZP_EDATA;
            goto out;
        }
    }
    out->bytes = items;
    if (!data_too)
        goto out;
    if (items > ((size_t)4 << 30)) {
        snprintf(err, errlen, "%s: %zu bytes of data is more than 4 GiB", path, items);
        rc = ZP_EDATA;
        goto out;
    }
    out->data = malloc(items ? items : 1);
    if (!out->data) {
        rc = ZP_ENOMEM;
        goto out;
    }
    size_t hdr = 4 + 4 * (size_t)out->ndims, got = 0;
    while (got < items) {
        unsigned chunk = items - got > (1u << 30) ? (1u << 30) : (unsigned)(items - got);
        int r = gzread(gz, out->data + got, chunk);
        if (r <= 0) {
            rc = gz_fail(gz, path, "data", hdr + got, hdr + items, err, errlen);
            goto out;
        }
        got += (size_t)r;
    }
    uint8_t extra;
    if (gzread(gz, &extra, 1) == 1) {
        snprintf(err, errlen, "%s: more bytes than the header's %zu", path, hdr + items);
        rc = ZP_EDATA;
    }
out:
    gzclose(gz);
    if (rc)
        idx_free(out);
    return rc;
}

/* Each of the split's labels against the train split's classes. */
static int check_idx_labels(const zp_dataset_meta_t *m, const char *path, const zp_idx_t *lab,
                            char *err, size_t len)
{
    for (size_t i = 0; i < lab->bytes; i++)
        if (zp_dataset_label_check(m, path, (int64_t)i, lab->data[i], err, len))
            return ZP_EDATA;
    return 0;
}

/* One IDX split: its images' header, and its labels kept as int32. */
static int probe_idx_split(const zp_config_t *cfg, int s, zp_dataset_t *ds, char *err, size_t len)
{
    const char *files[ZP_SPLITS][2] = {{cfg->train_images, cfg->train_labels},
                                       {cfg->test_images, cfg->test_labels}};
    zp_dataset_meta_t *m = &ds->meta;
    char path[600];
    zp_idx_t img, lab;
    zp_dataset_file(cfg, files[s][0], path, sizeof path);
    int rc = idx_read(path, 0, &img, err, len);
    if (rc)
        return rc;
    if (img.ndims != 3) {
        snprintf(err, len, "%s: %d dimensions, expected 3 (count, rows, columns)", path, img.ndims);
        return ZP_EDATA;
    }
    if (img.dims[1] * img.dims[2] > ZP_MAX_ELEMS) { /* each at most 2^30: no overflow */
        snprintf(err, len, "%s: images of %lld x %lld = %lld pixels, more than a message "
                 "carries (ZP_MAX_ELEMS = %u)", path, (long long)img.dims[1],
                 (long long)img.dims[2], (long long)(img.dims[1] * img.dims[2]), ZP_MAX_ELEMS);
        return ZP_EDATA;
    }
    zp_dataset_file(cfg, files[s][1], path, sizeof path);
    if ((rc = idx_read(path, 1, &lab, err, len)))
        return rc;
    if (lab.ndims != 1 || lab.dims[0] != img.dims[0]) {
        snprintf(err, len, "%s: %lld labels for %lld images", path, (long long)lab.dims[0],
                 (long long)img.dims[0]);
        rc = ZP_EDATA;
    } else if (s == ZP_SPLIT_TRAIN) {
        m->shape[0] = 1;
        m->shape[1] = img.dims[1];
        m->shape[2] = img.dims[2];
        int max = 0;
        for (size_t i = 0; i < lab.bytes; i++)
            max = lab.data[i] > max ? lab.data[i] : max;
        m->classes = max + 1 < 2 ? 2 : max + 1;
    } else if (img.dims[1] != m->shape[1] || img.dims[2] != m->shape[2]) {
        snprintf(err, len, "%s: images are %lldx%lld, the train split's %lldx%lld", path,
                 (long long)img.dims[1], (long long)img.dims[2], (long long)m->shape[1],
                 (long long)m->shape[2]);
        rc = ZP_EDATA;
    } else {
        rc = check_idx_labels(m, path, &lab, err, len);
    }
    zp_imagelist_t *l = &ds->split[s];
    if (!rc && !(l->label = malloc(sizeof *l->label * (lab.bytes ? lab.bytes : 1))))
        rc = ZP_ENOMEM;
    for (size_t i = 0; !rc && i < lab.bytes; i++)
        l->label[i] = lab.data[i];
    l->n = m->n[s] = img.dims[0];
    idx_free(&lab);
    return rc;
}

static int idx_probe(const zp_config_t *cfg, zp_dataset_t *ds, char *err, size_t len)
{
    int rc = 0;
    for (int s = 0; !rc && s < ZP_SPLITS; s++)
        rc = probe_idx_split(cfg, s, ds, err, len);
    if (rc && !strncmp(cfg->dataset_path, "/usr/share/datasets/", 20)) {
        size_t n = strlen(err);
        snprintf(err + n, len - n, " (Fashion-MNIST comes with the Debian package "
                 "dataset-fashion-mnist)");
    }
    return rc;
}

/* "images: PATH size=S mtime=T", or that it is missing. */
static void file_line(char *buf, size_t len, const char *label, const char *path)
{
    struct stat st;
    size_t n = strlen(buf);
    if (stat(path, &st) == 0)
        snprintf(buf + n, len - n, "%s: %s size=%lld mtime=%lld\n", label, path,
                 (long long)st.st_size, (long long)st.st_mtime);
    else
        snprintf(buf + n, len - n, "%s: %s missing\n", label, path);
}

static int idx_fingerprint(const zp_config_t *cfg, const zp_dataset_meta_t *m, int split, char *buf,
                           size_t len)
{
    (void)m;
    char p[600];
    snprintf(buf, len, "source: idx\n");
    zp_dataset_file(cfg, split ? cfg->test_images : cfg->train_images, p, sizeof p);
    file_line(buf, len, "images", p);
    zp_dataset_file(cfg, split ? cfg->test_labels : cfg->train_labels, p, sizeof p);
    file_line(buf, len, "labels", p);
    return 0;
}

typedef struct {
    zp_source_t base;
    zp_idx_t images[ZP_SPLITS];
    const int32_t *label[ZP_SPLITS]; /* the probe's, or own[] */
    int32_t *own[ZP_SPLITS];         /* read here when there is no probe; owned */
    size_t sample_bytes;
} idx_source_t;

static int idx_get(zp_source_t *src, int split, uint32_t index, uint8_t *pixels, int32_t *label,
                   char *err, size_t errlen)
{
    idx_source_t *s = (idx_source_t *)src;
    memcpy(pixels, s->images[split].data + (size_t)index * s->sample_bytes, s->sample_bytes);
    *label = s->label[split][index];
    (void)err;
    (void)errlen;
    return 0;
}

static void idx_destroy(zp_source_t *src)
{
    idx_source_t *s = (idx_source_t *)src;
    for (int i = 0; i < ZP_SPLITS; i++) {
        idx_free(&s->images[i]);
        free(s->own[i]);
    }
    free(s);
}

/* The labels of split sp from its file, checked (no probe to take them from). */
static int read_labels(idx_source_t *s, const zp_config_t *cfg, const zp_dataset_meta_t *meta,
                       int sp, char *err, size_t errlen)
{
    char path[600];
    zp_idx_t lab;
    zp_dataset_file(cfg, sp == ZP_SPLIT_TRAIN ? cfg->train_labels : cfg->test_labels, path, sizeof path);
    int rc = idx_read(path, 1, &lab, err, errlen);
    if (!rc && lab.bytes != (size_t)meta->n[sp]) {
        snprintf(err, errlen, "%s: %zu labels for %lld images", path, lab.bytes, (long long)meta->n[sp]);
        rc = ZP_EDATA;
    }
    for (size_t i = 0; !rc && i < lab.bytes; i++)
        rc = zp_dataset_label_check(meta, path, (int64_t)i, lab.data[i], err, errlen);
    if (!rc && !(s->own[sp] = malloc(sizeof(int32_t) * (lab.bytes ? lab.bytes : 1))))
        rc = ZP_ENOMEM;
    for (size_t i = 0; !rc && i < lab.bytes; i++)
        s->own[sp][i] = lab.data[i];
    s->label[sp] = s->own[sp];
    idx_free(&lab);
    return rc;
}

static int idx_open(zp_source_t **out, const zp_config_t *cfg, const zp_dataset_meta_t *meta,
                    char *err, size_t errlen)
{
    *out = NULL;
    idx_source_t *s = calloc(1, sizeof *s);
    if (!s)
        return ZP_ENOMEM;
    s->base.get = idx_get;
    s->base.destroy = idx_destroy;
    s->sample_bytes = (size_t)meta->elems;
    const char *files[ZP_SPLITS][2] = {{cfg->train_images, cfg->train_labels},
                                       {cfg->test_images, cfg->test_labels}};
    char path[600];
    for (int sp = 0; sp < ZP_SPLITS; sp++) {
        zp_dataset_file(cfg, files[sp][0], path, sizeof path);
        int rc = idx_read(path, 1, &s->images[sp], err, errlen);
        if (!rc && (s->images[sp].dims[0] != meta->n[sp] ||
                    s->images[sp].bytes != (size_t)meta->n[sp] * s->sample_bytes)) {
            snprintf(err, errlen, "%s: changed while the run started", path);
            rc = ZP_EDATA;
        }
        if (!rc && meta->probed && meta->probed->split[sp].n == meta->n[sp])
            s->label[sp] = meta->probed->split[sp].label;
        else if (!rc)
            rc = read_labels(s, cfg, meta, sp, err, errlen);
        if (rc) {
            idx_destroy(&s->base);
            return rc;
        }
    }
    *out = &s->base;
    return 0;
}

const zp_source_ops_t zp_source_idx = {
    .name = "idx",
    .dataset_name = zp_source_path_name,
    .probe = idx_probe,
    .fingerprint = idx_fingerprint,
    .open = idx_open,
};

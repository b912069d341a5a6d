/* source.c — the registry of dataset sources (made from schemas/config_keys.h's
 * ZP_SOURCES) and what every source shares: finishing a user's config, and
 * the probe's common part. */
#define _GNU_SOURCE
#include "pipeline/source/source.h"
#include "schemas/errors.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define ZP_SOURCE_DECLARE(NAME, name) extern const zp_source_ops_t zp_source_##name;
ZP_SOURCES(ZP_SOURCE_DECLARE)
#define ZP_SOURCE_ROW(NAME, name) [ZP_SOURCE_##NAME] = &zp_source_##name,
static const zp_source_ops_t *const SOURCES[ZP_SOURCE_COUNT] = {ZP_SOURCES(ZP_SOURCE_ROW)};

const zp_source_ops_t *zp_source_ops(int source)
{
    return source >= 0 && source < ZP_SOURCE_COUNT ? SOURCES[source] : NULL;
}

void zp_source_path_name(const zp_config_t *cfg, char *buf, size_t len)
{
    char p[256];
    snprintf(p, sizeof p, "%s", cfg->dataset_path);
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        p[--n] = 0;
    const char *base = strrchr(p, '/');
    snprintf(buf, len, "%.80s", base ? base + 1 : p);
}

/* What names cfg's dataset (not how it is prepared: a change of that is the
 * cache fingerprint's to catch), as text to hash. */
static void identity(const zp_config_t *cfg, const zp_source_ops_t *src, char *buf, size_t len)
{
    char path[PATH_MAX];
    if (!cfg->dataset_path[0] || !realpath(cfg->dataset_path, path))
        snprintf(path, sizeof path, "%s", cfg->dataset_path);
    FILE *f = fmemopen(buf, len, "w");
    if (!f) {
        snprintf(buf, len, "%d %s", cfg->dataset_source, path);
        return;
    }
    fprintf(f, "source %d\npath %s\nidx %s %s %s %s\nimages %s %s\n", cfg->dataset_source, path,
            cfg->train_images, cfg->train_labels, cfg->test_images, cfg->test_labels,
            cfg->image_train, cfg->image_test);
    if (src->identify)
        src->identify(cfg, f);
    fputc(0, f);
    fclose(f);
    buf[len - 1] = 0;
}

int zp_source_config(zp_config_t *cfg, char *err, size_t len)
{
    const zp_source_ops_t *src = zp_source_ops(cfg->dataset_source);
    int rc = src->check ? src->check(cfg, err, len) : 0;
    if (rc || zp_config_written(cfg, "cache.path"))
        return rc;
    char name[256], id[8192];
    src->dataset_name(cfg, name, sizeof name);
    identity(cfg, src, id, sizeof id);
    return zp_config_default_cache(cfg, name, id, err, len);
}

int zp_source_probe(zp_dataset_t **out, const zp_config_t *cfg, char *err, size_t len)
{
    *out = NULL;
    zp_dataset_t *ds = calloc(1, sizeof *ds);
    if (!ds) {
        snprintf(err, len, "the dataset's description: out of memory");
        return ZP_ENOMEM;
    }
    const zp_source_ops_t *src = zp_source_ops(cfg->dataset_source);
    zp_dataset_meta_t *m = &ds->meta;
    int rc = src->probe(cfg, ds, err, len);
    if (!rc && !src->records) { /* a source of records says its fields itself */
        m->elems = m->shape[0] * m->shape[1] * m->shape[2];
        m->dtype = cfg->dtype == ZP_DT_UINT8 ? ZP_DTYPE_U8 : ZP_DTYPE_F32;
        m->sample_bytes = (size_t)m->elems * zp_dtype_size((uint64_t)m->dtype);
        zp_fields_builtin(&m->fields, m->dtype, m->shape);
        if (cfg->mean.n > 1 && cfg->mean.n != m->shape[0]) {
            snprintf(err, len, "dataset.mean: %d values for %lld channels", cfg->mean.n,
                     (long long)m->shape[0]);
            rc = ZP_ECONFIG;
        }
    }
    if (rc) {
        zp_dataset_destroy(&ds);
        return rc;
    }
    m->probed = ds;
    *out = ds;
    return 0;
}

int zp_source_probe_meta(const zp_config_t *cfg, zp_dataset_meta_t *m, char *err, size_t len)
{
    zp_dataset_t *ds;
    memset(m, 0, sizeof *m);
    int rc = zp_source_probe(&ds, cfg, err, len);
    if (rc)
        return rc;
    *m = ds->meta;
    m->probed = NULL;
    zp_dataset_destroy(&ds);
    return 0;
}

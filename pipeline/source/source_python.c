/* source_python.c — dataset.source: python, the user's own map-style
 * Dataset (dataset.python.*): probed by running its interpreter
 * (pipeline/dataset/python.h), read by the Python loaders
 * (`INTERPRETER -m zeus_pipe._loader_process`, which serve the loader
 * stage's protocol through pipeline/api/loader_api.c). Its samples are
 * records of the fields __getitem__ returns. */
#define _GNU_SOURCE
#include "pipeline/source/source.h"
#include "pipeline/dataset/python.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* A module:callable name (empty only where `empty_ok`). */
static int is_callable_name(const char *s, int empty_ok)
{
    const char *colon = strchr(s, ':');
    if (!s[0])
        return empty_ok;
    return colon && colon != s && colon[1] && !strchr(colon + 1, ':');
}

/* A callable named as module:callable; no augmentation in the loaders (they
 * do not know a Dataset's fields); the built-in ops or a Python step, not
 * both; and a field normalised by the package (dataset.python.normalize)
 * takes the dataset's own statistics, written in the config: the defaults
 * of dataset.mean/std are Fashion-MNIST's, for the built-in IDX source, and
 * are never applied to another dataset's pixels unasked. */
static int python_check(const zp_config_t *cfg, char *err, size_t len)
{
    if (!is_callable_name(cfg->py_class, 0))
        return zp_config_fail(cfg, "dataset.python.class", err, len, "needs module:callable, like "
                              "my_data:SlowPets (got '%s')", cfg->py_class);
    if (!is_callable_name(cfg->py_augment_train, 1))
        return zp_config_fail(cfg, "dataset.python.augment.train", err, len, "needs "
                              "module:callable, like my_data:train_augment (got '%s')",
                              cfg->py_augment_train);
    if (!is_callable_name(cfg->py_augment_test, 1))
        return zp_config_fail(cfg, "dataset.python.augment.test", err, len, "needs "
                              "module:callable, like my_data:test_augment (got '%s')",
                              cfg->py_augment_test);
    if (cfg->aug_where == ZP_AUG_IN_LOADER)
        return zp_config_fail(cfg, "dataset.augment.where", err, len, "loader does not apply to "
                              "dataset.source: python: name your random transforms in "
                              "dataset.python.augment.train (module:callable, run by the loaders "
                              "after the cache)");
    const char *builtin = cfg->aug_resized_crop ? "dataset.augment.resized_crop"
                          : cfg->aug_hflip      ? "dataset.augment.hflip"
                          : cfg->aug_padding    ? "dataset.augment.crop_padding"
                          : cfg->aug_size       ? "dataset.augment.size" : NULL;
    if (builtin && (cfg->py_augment_train[0] || cfg->py_augment_test[0]))
        return zp_config_fail(cfg, builtin, err, len, "and dataset.python.augment.* both augment: "
                              "keep one (the built-in ops at C speed, or your Python step)");
    const char *missing = !zp_config_written(cfg, "dataset.mean")  ? "dataset.mean"
                          : !zp_config_written(cfg, "dataset.std") ? "dataset.std" : NULL;
    if (cfg->py_normalize[0] && missing)
        return zp_config_fail(cfg, "dataset.python.normalize", err, len, "'%s' is normalised with "
                              "dataset.mean and dataset.std, and the config does not set %s: set "
                              "both to your dataset's own per-channel statistics of pixels scaled "
                              "to 0..1 (ImageNet's: [0.485, 0.456, 0.406] and [0.229, 0.224, "
                              "0.225]), or leave dataset.python.normalize unset to get the field "
                              "as it is", cfg->py_normalize, missing);
    return 0;
}

/* The Dataset's module:callable. */
static void python_name(const zp_config_t *cfg, char *buf, size_t len)
{
    snprintf(buf, len, "%.80s", cfg->py_class);
}

static void python_identify(const zp_config_t *cfg, FILE *out)
{
    char path[PATH_MAX];
    fprintf(out, "python %s %s %s %s\n", cfg->py_class, cfg->py_args, cfg->py_splits, cfg->py_version);
    for (int i = 0; i < cfg->py_path.n; i++)
        fprintf(out, "sys.path %s\n", realpath(cfg->py_path.v[i], path) ? path : cfg->py_path.v[i]);
}

/* What __getitem__ returns depends on the code, its arguments and the
 * fields; an augment step runs after the cache and is not part of what it
 * keeps. */
static int python_fingerprint(const zp_config_t *cfg, const zp_dataset_meta_t *m, int split,
                              char *buf, size_t len)
{
    zp_dataset_meta_t kept = zp_dataset_cached_meta(m, split);
    size_t n = (size_t)snprintf(buf, len, "source: python %s version=\"%s\" source sha256=%s\n"
                                "args: %s\nsplits: %s\n", cfg->py_class, cfg->py_version,
                                m->source_hash, cfg->py_args, cfg->py_splits);
    if (n < len && zp_fields_format(&kept.fields, buf + n, len - n) >= 0)
        n = strlen(buf);
    if (n < len)
        snprintf(buf + n, len - n, "samples: %lld records of %zu bytes\n", (long long)m->n[split],
                 kept.sample_bytes);
    return 1;
}

const zp_source_ops_t zp_source_python = {
    .name = "python",
    .python = 1,
    .records = 1,
    .check = python_check,
    .dataset_name = python_name,
    .identify = python_identify,
    .probe = zp_python_probe,
    .fingerprint = python_fingerprint,
};

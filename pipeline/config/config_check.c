/* config_check.c — the rules a config must keep beyond each key's type and
 * range (schemas/config_keys.h): those that involve more than one key, or a
 * value's meaning. Each broken rule names the key to blame and what is wrong;
 * config.c points the error at where that key was set. */
#include "pipeline/config/config_table.h"
#include "schemas/msg.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Where a broken rule is told. */
typedef struct {
    const char **key;
    char *what;
    size_t len;
} rule_t;

__attribute__((format(printf, 3, 4))) static int fault(rule_t *r, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->what, r->len, fmt, ap);
    va_end(ap);
    *r->key = key;
    return 1;
}

/* A sample's values must fit in one message (ZP_MAX_ELEMS): beyond, every
 * SAMPLES would be refused as malformed and the run would wait forever. Each
 * factor is at most 65536 (synthetic) or 16384 (crop): no product overflows. */
static int check_sample_size(const zp_config_t *cfg, rule_t *r)
{
    const char *shape = "dataset.synthetic.shape";
    int64_t elems = 1;
    for (int i = 0; i < cfg->synth_shape.n && i < 3; i++)
        elems *= cfg->synth_shape.v[i];
    if (cfg->synth_shape.n < 1 || cfg->synth_shape.n > 3)
        return fault(r, shape, "needs 1 to 3 dimensions (got %d)", cfg->synth_shape.n);
    if (cfg->dataset_source == ZP_SOURCE_SYNTHETIC && elems > ZP_MAX_ELEMS)
        return fault(r, shape, "%lld values a sample, more than a message carries "
                     "(ZP_MAX_ELEMS = %u)", (long long)elems, ZP_MAX_ELEMS);
    int64_t crop = cfg->image_crop, most = (int64_t)sqrt(ZP_MAX_ELEMS / 3.0);
    int images = cfg->dataset_source == ZP_SOURCE_IMAGE_FOLDER ||
                 cfg->dataset_source == ZP_SOURCE_IMAGE_LIST;
    if (images && 3 * crop * crop > ZP_MAX_ELEMS)
        return fault(r, "dataset.image.crop", "3 x %lld x %lld = %lld values a sample, more "
                     "than a message carries (ZP_MAX_ELEMS = %u): at most %lld", (long long)crop,
                     (long long)crop, (long long)(3 * crop * crop), ZP_MAX_ELEMS, (long long)most);
    return 0;
}

/* dataset.source: python: a callable named as module:callable, and no
 * augmentation in the loaders (they do not know a Dataset's fields). */
/* A module:callable name (empty only where `empty_ok`). */
static int is_callable_name(const char *s, int empty_ok)
{
    const char *colon = strchr(s, ':');
    if (!s[0])
        return empty_ok;
    return colon && colon != s && colon[1] && !strchr(colon + 1, ':');
}

static int check_python(const zp_config_t *cfg, rule_t *r)
{
    if (!is_callable_name(cfg->py_class, 0))
        return fault(r, "dataset.python.class", "needs module:callable, like my_data:SlowPets "
                     "(got '%s')", cfg->py_class);
    if (!is_callable_name(cfg->py_augment_train, 1))
        return fault(r, "dataset.python.augment.train", "needs module:callable, like "
                     "my_data:train_augment (got '%s')", cfg->py_augment_train);
    if (!is_callable_name(cfg->py_augment_test, 1))
        return fault(r, "dataset.python.augment.test", "needs module:callable, like "
                     "my_data:test_augment (got '%s')", cfg->py_augment_test);
    if (cfg->aug_where == ZP_AUG_IN_LOADER)
        return fault(r, "dataset.augment.where", "loader does not apply to dataset.source: "
                     "python: name your random transforms in dataset.python.augment.train "
                     "(module:callable, run by the loaders after the cache)");
    const char *builtin = cfg->aug_resized_crop ? "dataset.augment.resized_crop"
                          : cfg->aug_hflip      ? "dataset.augment.hflip"
                          : cfg->aug_padding    ? "dataset.augment.crop_padding"
                          : cfg->aug_size       ? "dataset.augment.size" : NULL;
    if (builtin && (cfg->py_augment_train[0] || cfg->py_augment_test[0]))
        return fault(r, builtin, "and dataset.python.augment.* both augment: keep one (the "
                     "built-in ops at C speed, or your Python step)");
    return 0;
}

int zp_config_check(const zp_config_t *cfg, const char **key, char *what, size_t len)
{
    rule_t broken = {.key = key, .what = what, .len = len}, *r = &broken;
    if (strchr(cfg->run_name, '/') || cfg->run_name[0] == '.') /* "..", "../x": outside run.dir */
        return fault(r, "run.name", "must be one folder name in run.dir: no '/', not starting "
                     "with '.' (got '%s')", cfg->run_name);
    if (cfg->mean.n != 1 && cfg->std.n != 1 && cfg->mean.n != cfg->std.n)
        return fault(r, "dataset.std", "has %d values but dataset.mean has %d", cfg->std.n,
                     cfg->mean.n);
    if (cfg->mean.n == 0 || cfg->std.n == 0)
        return fault(r, cfg->mean.n ? "dataset.std" : "dataset.mean", "needs at least one value");
    if (cfg->betas.n != 2)
        return fault(r, "trainer.optimizer.betas", "needs 2 values (got %d)", cfg->betas.n);
    const char *range[2] = {"dataset.augment.scale", "dataset.augment.ratio"};
    const zp_floats_t *lohi[2] = {&cfg->aug_scale, &cfg->aug_ratio};
    for (int i = 0; i < 2; i++)
        if (lohi[i]->n != 2 || lohi[i]->v[0] > lohi[i]->v[1])
            return fault(r, range[i], "needs 2 values, lowest first");
    if (cfg->aug_where == ZP_AUG_IN_LOADER && cfg->cache_enabled)
        return fault(r, "dataset.augment.where",
                     "loader needs cache.enabled: false (the cache would keep one draw)");
    if (cfg->aug_where == ZP_AUG_IN_LOADER && cfg->dtype == ZP_DT_UINT8)
        return fault(r, "dataset.augment.where",
                     "loader needs dataset.dtype: float32 (augmented pixels are not bytes)");
    if (cfg->autoscale && cfg->max_workers && cfg->min_workers > cfg->max_workers)
        return fault(r, "loader.min_workers", "%lld is above loader.max_workers %lld: lower it, "
                     "or raise loader.max_workers (0: the free cores)",
                     (long long)cfg->min_workers, (long long)cfg->max_workers);
    if (cfg->dataset_source == ZP_SOURCE_PYTHON && check_python(cfg, r))
        return 1;
    return check_sample_size(cfg, r);
}

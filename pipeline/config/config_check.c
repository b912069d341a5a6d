/* config_check.c — the rules a config must keep beyond each key's type and
 * range (schemas/config_keys.h): those that involve more than one key, or a
 * value's meaning. Each broken rule names the key to blame and what is wrong;
 * config.c points the error at where that key was set. The rules on the keys
 * of one dataset source are that source's (pipeline/source/source_*.c). */
#include "pipeline/config/config_table.h"

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
    return 0;
}

/* cmd_cache.c — `zeus-pipe cache stat|verify|drop PATH [DB]`: an LMDB cache
 * seen from outside a run. Works on the environment alone; PATH may be a
 * config file instead, whose cache.path (set, or the default folder) is the
 * one meant (pipeline/cachedb/cachedb_admin.h does the work; this file prints). */
#define _GNU_SOURCE
#include "pipeline/cachedb/cachedb_admin.h"
#include "pipeline/cli/cmd.h"
#include "pipeline/config/config.h"
#include "pipeline/source/source.h"
#include "pipeline/base/json.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static int usage(FILE *out, int status)
{
    fprintf(out, "usage: zeus-pipe cache stat PATH [--json]   databases, entries, bytes, fingerprints, map use\n"
                 "       zeus-pipe cache verify PATH          check every value's header and checksum, and\n"
                 "                                            count the foreign ones (of another fingerprint)\n"
                 "       zeus-pipe cache drop PATH DB         remove one database (e.g. fashion-mnist/test)\n\n"
                 "PATH is the cache's folder (cache.path), or a config file (.yaml): its cache.path,\n"
                 "or the default folder it gets when unset (one per dataset under ~/.cache/zeus-pipe).\n");
    return status;
}

/* Prints err; the exit status: 2 when there is no environment, else 1. */
static int failed(int rc, const char *err)
{
    fprintf(stderr, "zeus-pipe: %s\n", err);
    return rc == -ENOENT ? 2 : 1;
}

static void print_json(const char *path, const zp_cachedb_admin_stat_t *st)
{
    printf("{\"path\":");
    zp_json_str(stdout, path);
    printf(",\"map_bytes\":%zu,\"used_bytes\":%zu,\"databases\":[", st->map_bytes, st->used_bytes);
    for (int i = 0; i < st->n; i++) {
        const zp_cachedb_db_t *d = &st->db[i];
        printf("%s{\"name\":", i ? "," : "");
        zp_json_str(stdout, d->name);
        printf(",\"entries\":%zu,\"bytes\":%zu,\"bytes_per_sample\":%zu,\"samples\":%lld,"
               "\"projected_bytes\":%zu,\"fingerprint\":", d->entries, d->bytes, d->per_sample,
               (long long)d->samples, d->projected);
        zp_json_str(stdout, d->fingerprint);
        printf("}");
    }
    printf("]}\n");
}

static void print_text(const char *path, zp_cachedb_admin_stat_t *st)
{
    printf("%s: map %.1f MiB, %.1f MiB used (%.0f%%)\n", path, st->map_bytes / 1048576.0,
           st->used_bytes / 1048576.0, 100.0 * st->used_bytes / (double)st->map_bytes);
    for (int i = 0; i < st->n; i++) {
        zp_cachedb_db_t *d = &st->db[i];
        printf("  %-28s %10zu entries %10.1f MiB", d->name, d->entries, d->bytes / 1048576.0);
        if (d->per_sample && d->samples)
            printf("  %zu bytes a sample: %.1f MiB for all %lld", d->per_sample,
                   d->projected / 1048576.0, (long long)d->samples);
        printf("\n");
        for (char *line = strtok(d->fingerprint, "\n"); line; line = strtok(NULL, "\n"))
            printf("      %s\n", line);
    }
}

static int cache_stat(const char *path, int json)
{
    static zp_cachedb_admin_stat_t st;
    char err[4200];
    int rc = zp_cachedb_admin_stat(path, &st, err, sizeof err);
    if (rc)
        return failed(rc, err);
    if (json)
        print_json(path, &st);
    else
        print_text(path, &st);
    return 0;
}

/* The first 10 bad values, one line each. */
static void print_bad(const char *db, uint32_t key, const char *why, void *arg)
{
    int *shown = arg;
    if ((*shown)++ < 10)
        printf("%s key %u: %s\n", db, key, why);
}

static int cache_verify(const char *path)
{
    char err[4200];
    int64_t values, bad, foreign;
    int shown = 0;
    int rc = zp_cachedb_admin_verify(path, print_bad, &shown, &values, &bad, &foreign, err,
                                     sizeof err);
    if (rc)
        return failed(rc, err);
    printf("%s: %lld values checked, %lld bad", path, (long long)values, (long long)bad);
    if (foreign)
        printf(" (%lld of them foreign: written for another dataset or transform; a run "
               "loads them again)", (long long)foreign);
    printf("\n");
    return bad ? 1 : 0;
}

static int cache_drop(const char *path, const char *db)
{
    char err[4400];
    size_t entries;
    int rc = zp_cachedb_admin_drop(path, db, &entries, err, sizeof err);
    if (rc)
        return failed(rc, err);
    printf("dropped %s (%zu entries) from %s\n", db, entries, path);
    return 0;
}

/* A config file named in PATH's place: its cache.path into `out` (said on
 * stderr); else PATH itself. 2 after a config error. */
static int cache_of(char **path, char *out, size_t len)
{
    const char *ext = strrchr(*path, '.');
    struct stat st;
    if (!ext || (strcmp(ext, ".yaml") && strcmp(ext, ".yml")) || stat(*path, &st) || !S_ISREG(st.st_mode))
        return 0;
    static zp_config_t cfg;
    char err[1024];
    if (zp_config_load(&cfg, *path, NULL, 0, err, sizeof err) || zp_source_config(&cfg, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    snprintf(out, len, "%s", cfg.cache_path);
    if (cfg.cache_default[0])
        fprintf(stderr, "zeus-pipe: %s's cache: %s (cache.path unset: the default folder, %s)\n",
                *path, out, cfg.cache_default);
    else
        fprintf(stderr, "zeus-pipe: %s's cache: %s\n", *path, out);
    *path = out;
    return 0;
}

int cmd_cache(int argc, char **argv)
{
    if (zp_cmd_wants_help(argc, argv))
        return usage(stdout, 0);
    char from_config[PATH_MAX];
    if (argc >= 3 && cache_of(&argv[2], from_config, sizeof from_config))
        return 2;
    if (argc >= 3 && !strcmp(argv[1], "stat") && argc <= 4)
        return cache_stat(argv[2], argc == 4 && !strcmp(argv[3], "--json"));
    if (argc == 3 && !strcmp(argv[1], "verify"))
        return cache_verify(argv[2]);
    if (argc == 4 && !strcmp(argv[1], "drop"))
        return cache_drop(argv[2], argv[3]);
    return usage(stderr, 2);
}

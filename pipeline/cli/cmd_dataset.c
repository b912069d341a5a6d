/* cmd_dataset.c — `zeus-pipe dataset CONFIG [KEY=VALUE ...]`: what the probe
 * finds, before anything is loaded: the splits and their samples, the files
 * of an array source (hdf5, npy) with theirs, and every field's type, shape
 * and bytes. A config is checked in a second, the way `up` would check it. */
#include "pipeline/cli/cmd.h"
#include "pipeline/config/config.h"
#include "pipeline/source/source.h"

#include <stdio.h>
#include <string.h>

static void print_files(const char *arrays, int split)
{
    const char *name = zp_dataset_split_name(split);
    size_t n = strlen(name);
    for (const char *p = arrays; p && *p;) {
        const char *nl = strchr(p, '\n');
        long long samples, bytes, mtime;
        int used = 0;
        if (!strncmp(p, name, n) && p[n] == ' ' &&
            sscanf(p + n, " %lld %lld %lld %n", &samples, &bytes, &mtime, &used) == 3 && used)
            printf("    %-10lld %.*s (%.1f MiB)\n", samples, (int)((nl ? nl : p + strlen(p)) - (p + n + used)),
                   p + n + used, (double)bytes / 1048576);
        p = nl ? nl + 1 : NULL;
    }
}

static void print_field(const zp_field_t *f)
{
    char shape[96] = "[";
    int at = 1;
    for (int i = 0; i < f->ndim && at < (int)sizeof shape - 24; i++)
        at += snprintf(shape + at, sizeof shape - (size_t)at, "%s%lld", i ? ", " : "",
                       (long long)f->shape[i]);
    snprintf(shape + at, sizeof shape - (size_t)at, "]");
    printf("  %-16s %-8s %-16s %zu bytes%s\n", f->name, zp_fields_type_name(f->dtype), shape, f->bytes,
           f->offset == ZP_FIELD_IN_LABELS ? " (beside the record, in the batch's label column)" : "");
}

int cmd_dataset(int argc, char **argv)
{
    if (zp_cmd_wants_help(argc, argv) || argc < 2) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: zeus-pipe dataset CONFIG [KEY=VALUE ...]\n\n"
                "Probes the dataset CONFIG names, as `up` does before any stage starts, and prints\n"
                "what it found: each split's samples (and an hdf5 or npy source's files, each\n"
                "with its samples), and every field of a sample with its type, shape and bytes.\n"
                "Nothing is loaded or cached. Exit status 0, or 2 with the error (a missing file\n"
                "or field, a type zeus-pipe does not read, ...) naming the file.\n");
        return argc < 2 ? 2 : 0;
    }
    static zp_config_t cfg;
    char err[2048];
    zp_dataset_t *ds = NULL;
    if (zp_config_load(&cfg, argv[1], argv + 2, argc - 2, err, sizeof err) ||
        zp_source_config(&cfg, err, sizeof err) || zp_source_probe(&ds, &cfg, err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: %s\n", err);
        return 2;
    }
    const zp_dataset_meta_t *m = &ds->meta;
    printf("dataset of %s: source %s\n", argv[1], zp_source_ops(cfg.dataset_source)->name);
    for (int s = 0; s < ZP_SPLITS; s++) {
        printf("  %-6s %lld samples\n", zp_dataset_split_name(s), (long long)m->n[s]);
        print_files(ds->arrays, s);
    }
    size_t beside = 0;
    for (int i = 0; i < m->fields.n; i++)
        beside += m->fields.f[i].offset == ZP_FIELD_IN_LABELS ? m->fields.f[i].bytes : 0;
    printf("fields: %d, %zu bytes a sample%s\n", m->fields.n, m->fields.record_bytes + beside,
           m->fields.n > 1 && !beside ? " (one record, each field aligned to its type)" : "");
    for (int i = 0; i < m->fields.n; i++)
        print_field(&m->fields.f[i]);
    if (m->classes > 1)
        printf("classes: %lld\n", (long long)m->classes);
    zp_dataset_destroy(&ds);
    return 0;
}

/* config_print.c — a resolved config as YAML (`zeus-pipe config`), and the
 * table of every key (`zeus-pipe config --keys [--markdown]`, docs/configuration.md's). */
#include "pipeline/config/config.h"
#include "pipeline/config/config_table.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_double(FILE *out, double v)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.15g", v);
    if (strtod(buf, NULL) != v)
        snprintf(buf, sizeof buf, "%.17g", v);
    if (!strpbrk(buf, ".eEn"))
        strcat(buf, ".0");
    fputs(buf, out);
}

static void print_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f) /* a raw newline would fold into a space */
            fprintf(out, "\\x%02x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static void print_value(FILE *out, const zp_config_t *cfg, const zp_config_key_t *k)
{
    const void *src = (const char *)cfg + k->off;
    char buf[64];
    switch (k->type) {
    case KT_INT:
    case KT_SIZE: fprintf(out, "%lld", (long long)*(const int64_t *)src); break;
    case KT_FLOAT: print_double(out, *(const double *)src); break;
    case KT_BOOL: fputs(*(const bool *)src ? "true" : "false", out); break;
    case KT_ENUM: fputs(zp_config_enum_name(k->choices, *(const int *)src, buf, sizeof buf), out); break;
    case KT_STR:
    case KT_PATH:
    case KT_PROG: print_string(out, src); break;
    case KT_JSON: fputs(src, out); break; /* JSON is YAML's flow style */
    case KT_STRS:
    case KT_PATHS: {
        const zp_strs_t *l = src;
        fputc('[', out);
        for (int i = 0; i < l->n; i++) {
            fputs(i ? ", " : "", out);
            print_string(out, l->v[i]);
        }
        fputc(']', out);
        break;
    }
    case KT_INTS: {
        const zp_ints_t *l = src;
        fputc('[', out);
        for (int i = 0; i < l->n; i++)
            fprintf(out, "%s%lld", i ? ", " : "", (long long)l->v[i]);
        fputc(']', out);
        break;
    }
    case KT_FLOATS: {
        const zp_floats_t *l = src;
        fputc('[', out);
        for (int i = 0; i < l->n; i++) {
            fputs(i ? ", " : "", out);
            print_double(out, l->v[i]);
        }
        fputc(']', out);
        break;
    }
    }
}

void zp_config_print(const zp_config_t *cfg, FILE *out)
{
    char prev[160] = "";
    for (int i = 0; i < zp_config_nkeys; i++) {
        const char *key = zp_config_keys[i].key;
        /* Length of the section prefix shared with the previous key. */
        size_t common = 0;
        for (size_t j = 0; key[j] && key[j] == prev[j]; j++)
            if (key[j] == '.')
                common = j + 1;
        int depth = 0;
        for (size_t j = 0; j < common; j++)
            depth += key[j] == '.';
        const char *p = key + common;
        for (const char *dot; (dot = strchr(p, '.')); p = dot + 1, depth++)
            fprintf(out, "%*s%.*s:\n", depth * 2, "", (int)(dot - p), p);
        fprintf(out, "%*s%s: ", depth * 2, "", p);
        print_value(out, cfg, &zp_config_keys[i]);
        fputc('\n', out);
        snprintf(prev, sizeof prev, "%s", key);
    }
}

void zp_config_print_keys(FILE *out, bool markdown)
{
    static const char *tn[] = {"int", "float", "bool", "string", "enum", "int list", "float list", "size",
                             "string list", "mapping", "path", "path list", "program"};
    _Static_assert(sizeof tn / sizeof tn[0] == KT_PROG + 1, "a name for every key type");
    static const char paths[] =
        "A relative path (types path, path list and program) is relative to where it is written: "
        "the config file's folder for a value in the file, the working directory for a default or "
        "a KEY=VALUE on the command line. trainer.command runs in the config file's folder.";
    if (markdown)
        fprintf(out, "%s\n\n| key | type | default | range | meaning |\n| --- | --- | --- | --- | --- |\n",
                paths);
    else
        fprintf(out, "%s\n\n", paths);
    for (int i = 0; i < zp_config_nkeys; i++) {
        const zp_config_key_t *k = &zp_config_keys[i];
        char range[96] = "";
        if (k->type == KT_ENUM) {
            snprintf(range, sizeof range, "%s", k->choices);
            for (char *p = range; markdown && *p; p++)
                if (*p == '|')
                    *p = '/';
        }
        else if (k->type == KT_INT || k->type == KT_INTS || k->type == KT_SIZE)
            snprintf(range, sizeof range, "%.0f..%.0f", k->lo, k->hi);
        else if (k->type == KT_FLOAT || k->type == KT_FLOATS)
            snprintf(range, sizeof range, "%g..%g", k->lo, k->hi);
        const char *def = k->def ? (*k->def ? k->def : "\"\"") : "(required)";
        if (markdown)
            fprintf(out, "| `%s` | %s | `%s` | %s | %s |\n", k->key, tn[k->type], def,
                    range, k->help);
        else
            fprintf(out, "%-34s %-10s %-22s %-18s %s\n", k->key, tn[k->type], def, range, k->help);
    }
}

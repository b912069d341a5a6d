/* config.c — libyaml into zp_config_t, driven by the key table in
 * schemas/config_keys.h (config_print.c prints a config and the keys). */
#define _GNU_SOURCE
#include "pipeline/config/config.h"
#include "pipeline/config/config_table.h"
#include "pipeline/base/log.h"
#include "schemas/config_keys.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <libgen.h>
#include <limits.h>
#include <unistd.h>
#include <strings.h>
#include <xxhash.h>
#include <yaml.h>

#define LO_NUM(lo) _Generic((lo), char *: 0.0, const char *: 0.0, default: (lo))
#define LO_STR(lo) _Generic((lo), char *: (lo), const char *: (lo), default: NULL)
#define ROW(k, t, f, d, lo, hi, h)                                                                 \
    {k, KT_##t, offsetof(zp_config_t, f), sizeof(((zp_config_t *)0)->f), d, LO_NUM(lo), hi, LO_STR(lo), h},
const zp_config_key_t zp_config_keys[] = {ZP_CONFIG_KEYS(ROW)};
#undef ROW
const int zp_config_nkeys = (int)(sizeof zp_config_keys / sizeof zp_config_keys[0]);
#define KEYS zp_config_keys
#define NKEYS ((int)(sizeof zp_config_keys / sizeof zp_config_keys[0]))

/* Where the value being applied came from, for error messages. */
typedef struct {
    const char *file;     /* config file, or NULL for an override */
    const char *override; /* the override text, or NULL */
    char *err;
    size_t errlen;
} origin_t;

static int find_key(const char *name)
{
    for (int i = 0; i < NKEYS; i++)
        if (strcmp(KEYS[i].key, name) == 0)
            return i;
    return -1;
}

static int is_section(const char *prefix)
{
    size_t n = strlen(prefix);
    for (int i = 0; i < NKEYS; i++)
        if (strncmp(KEYS[i].key, prefix, n) == 0 && KEYS[i].key[n] == '.')
            return 1;
    return 0;
}

static int levenshtein(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 99;
    int d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = c < del ? (c < ins ? c : ins) : (del < ins ? del : ins);
        }
    return d[la][lb];
}

/* The closest known key: small edit distance, or the same last component. */
static const char *suggest(const char *name)
{
    const char *best = NULL;
    int best_d = 4;
    const char *leaf = strrchr(name, '.');
    leaf = leaf ? leaf + 1 : name;
    for (int i = 0; i < NKEYS; i++) {
        int d = levenshtein(name, KEYS[i].key);
        const char *kl = strrchr(KEYS[i].key, '.');
        kl = kl ? kl + 1 : KEYS[i].key;
        if (d >= best_d && strcmp(kl, leaf) == 0)
            d = 3;
        if (d < best_d) {
            best_d = d;
            best = KEYS[i].key;
        }
    }
    return best;
}

/* Appends the offending line of `file` and a caret under `col`. */
static void append_line(char *err, size_t errlen, const char *file, size_t line, size_t col)
{
    FILE *f = fopen(file, "r");
    if (!f)
        return;
    char buf[512];
    size_t ln = 0;
    while (fgets(buf, sizeof buf, f)) {
        if (++ln == line) {
            buf[strcspn(buf, "\r\n")] = 0;
            size_t n = strlen(err);
            snprintf(err + n, errlen - n, "\n    %s\n    %*s^", buf, (int)(col > 1 ? col - 1 : 0), "");
            break;
        }
    }
    fclose(f);
}

__attribute__((format(printf, 5, 6))) static int fail_at(origin_t *o, const yaml_mark_t *m,
                                                        const char *key, const char *unused,
                                                        const char *fmt, ...)
{
    (void)unused;
    char what[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (o->override)
        snprintf(o->err, o->errlen, "override '%s': %s: %s", o->override, key, what);
    else {
        size_t line = m ? m->line + 1 : 1, col = m ? m->column + 1 : 1;
        snprintf(o->err, o->errlen, "%s:%zu:%zu: %s: %s", o->file, line, col, key, what);
        if (m)
            append_line(o->err, o->errlen, o->file, line, col);
    }
    return ZP_ECONFIG;
}

/* ---- scalar parsing -------------------------------------------------------------------- */

static int parse_int(const char *s, int64_t *out)
{
    if (!*s)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

static int parse_float(const char *s, double *out)
{
    if (!*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

/* "4GiB", "512 MiB", "1000000", "2GB": bytes. */
static int parse_size(const char *s, int64_t *out)
{
    static const struct {
        const char *unit;
        double mul;
    } units[] = {{"", 1},          {"B", 1},          {"KiB", 1024.0},   {"MiB", 1048576.0},
                 {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}, {"KB", 1e3}, {"MB", 1e6},
                 {"GB", 1e9},       {"TB", 1e12},      {"K", 1024.0},     {"M", 1048576.0},
                 {"G", 1073741824.0}, {"T", 1099511627776.0}};
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0)
        return -1;
    while (*end == ' ')
        end++;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcasecmp(end, units[i].unit) && v * units[i].mul < 9.2e18) {
            *out = (int64_t)(v * units[i].mul);
            return 0;
        }
    return -1;
}

static int parse_bool(const char *s, bool *out)
{
    static const char *yes[] = {"true", "yes", "on"}, *no[] = {"false", "no", "off"};
    for (int i = 0; i < 3; i++) {
        if (strcasecmp(s, yes[i]) == 0)
            return *out = true, 0;
        if (strcasecmp(s, no[i]) == 0)
            return *out = false, 0;
    }
    return -1;
}

static int enum_index(const char *choices, const char *s)
{
    int i = 0;
    for (const char *p = choices; *p; i++) {
        size_t n = strcspn(p, "|");
        if (strlen(s) == n && strncmp(p, s, n) == 0)
            return i;
        p += n;
        if (*p == '|')
            p++;
    }
    return -1;
}

const char *zp_config_enum_name(const char *choices, int idx, char *buf, size_t len)
{
    const char *p = choices;
    for (int i = 0; i < idx && *p; i++) {
        p += strcspn(p, "|");
        if (*p == '|')
            p++;
    }
    size_t n = strcspn(p, "|");
    snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), p);
    return buf;
}

static const char *type_name(kt_t t)
{
    static const char *names[] = {"an integer", "a number", "true or false", "a string",
                                  "one of the choices", "a list of integers", "a list of numbers",
                                  "a size like 4GiB", "a list of strings",
                                  "a mapping (or any YAML value)", "a path", "a list of paths",
                                  "a program (a name on PATH, or a path)"};
    _Static_assert(sizeof names / sizeof names[0] == KT_PROG + 1, "a name for every key type");
    return names[t];
}

static const char *scalar_of(yaml_node_t *n) { return (const char *)n->data.scalar.value; }

static int is_plain(yaml_node_t *n) { return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE; }

static int check_range(origin_t *o, const zp_config_key_t *k, yaml_node_t *n, double v, const char *text)
{
    if (v < k->lo || v > k->hi) {
        if (k->type == KT_INT || k->type == KT_INTS)
            return fail_at(o, &n->start_mark, k->key, NULL, "must be %.0f..%.0f (got %s)", k->lo,
                           k->hi, text);
        return fail_at(o, &n->start_mark, k->key, NULL, "must be %g..%g (got %s)", k->lo, k->hi,
                       text);
    }
    return 0;
}

static int set_list(origin_t *o, const zp_config_key_t *k, yaml_document_t *doc, yaml_node_t *n, void *dst)
{
    yaml_node_t *items[ZP_LIST_MAX];
    int count = 0;
    if (n->type == YAML_SCALAR_NODE && is_plain(n) && n->data.scalar.length > 0) {
        items[count++] = n; /* a single value is a list of one */
    } else if (n->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
             it++) {
            if (count == ZP_LIST_MAX)
                return fail_at(o, &n->start_mark, k->key, NULL, "at most %d values", ZP_LIST_MAX);
            items[count++] = yaml_document_get_node(doc, *it);
        }
    } else {
        return fail_at(o, &n->start_mark, k->key, NULL, "expected %s", type_name(k->type));
    }
    for (int i = 0; i < count; i++) {
        yaml_node_t *e = items[i];
        if (e->type != YAML_SCALAR_NODE || !is_plain(e))
            return fail_at(o, &e->start_mark, k->key, NULL, "expected %s", type_name(k->type));
        const char *s = scalar_of(e);
        double v = 0;
        int64_t iv = 0;
        if (k->type == KT_INTS ? parse_int(s, &iv) : parse_float(s, &v))
            return fail_at(o, &e->start_mark, k->key, NULL, "expected %s (got '%s')",
                           type_name(k->type), s);
        if (k->type == KT_INTS)
            v = (double)iv;
        int rc = check_range(o, k, e, v, s);
        if (rc)
            return rc;
        if (k->type == KT_INTS)
            ((zp_ints_t *)dst)->v[i] = iv;
        else
            ((zp_floats_t *)dst)->v[i] = v;
    }
    if (k->type == KT_INTS)
        ((zp_ints_t *)dst)->n = count;
    else
        ((zp_floats_t *)dst)->n = count;
    return 0;
}

/* A list of strings: a sequence of non-empty scalars (quoted or not), or one
 * non-empty scalar, a list of one. An empty item is refused where it stands. */
static int set_strs(origin_t *o, const zp_config_key_t *k, yaml_document_t *doc, yaml_node_t *n,
                    zp_strs_t *dst)
{
    yaml_node_t *items[ZP_STRS_MAX];
    int count = 0;
    if (n->type == YAML_SCALAR_NODE && n->data.scalar.length > 0) {
        items[count++] = n;
    } else if (n->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
             it++) {
            if (count == ZP_STRS_MAX)
                return fail_at(o, &n->start_mark, k->key, NULL, "at most %d items", ZP_STRS_MAX);
            items[count++] = yaml_document_get_node(doc, *it);
        }
    } else {
        return fail_at(o, &n->start_mark, k->key, NULL, "expected %s", type_name(k->type));
    }
    for (int i = 0; i < count; i++) {
        yaml_node_t *e = items[i];
        if (e->type != YAML_SCALAR_NODE)
            return fail_at(o, &e->start_mark, k->key, NULL, "item %d: expected a string", i);
        if (e->data.scalar.length == 0)
            return fail_at(o, &e->start_mark, k->key, NULL, "item %d is empty: remove it or "
                           "write what it should be", i);
        if (e->data.scalar.length >= ZP_STR_LEN || strlen(scalar_of(e)) != e->data.scalar.length)
            return fail_at(o, &e->start_mark, k->key, NULL, "item %d: longer than %d characters "
                           "or holds a NUL", i, ZP_STR_LEN - 1);
        memcpy(dst->v[i], scalar_of(e), e->data.scalar.length + 1);
    }
    dst->n = count;
    return 0;
}

/* s is a number as JSON writes one: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int json_number(const char *s)
{
    s += *s == '-';
    if (!isdigit((unsigned char)*s) || (s[0] == '0' && isdigit((unsigned char)s[1])))
        return 0;
    while (isdigit((unsigned char)*s))
        s++;
    if (*s == '.') {
        if (!isdigit((unsigned char)*++s))
            return 0;
        while (isdigit((unsigned char)*s))
            s++;
    }
    if (*s == 'e' || *s == 'E') {
        s += s[1] == '+' || s[1] == '-';
        if (!isdigit((unsigned char)*++s))
            return 0;
        while (isdigit((unsigned char)*s))
            s++;
    }
    return !*s;
}

/* A plain scalar that JSON reads as it is: a number, true, false or null. */
static const char *json_literal(yaml_node_t *n)
{
    const char *s = scalar_of(n);
    bool b;
    if (!is_plain(n))
        return NULL;
    if (!strcmp(s, "null") || !strcmp(s, "~"))
        return "null";
    if (!parse_bool(s, &b))
        return b ? "true" : "false";
    return json_number(s) ? s : NULL;
}

/* Appends the JSON of node n to buf[*at..len); 0, or -1 when it does not fit. */
static int to_json(yaml_document_t *doc, yaml_node_t *n, char *buf, size_t len, size_t *at, int depth)
{
#define PUT(...)                                                                                   \
    do {                                                                                           \
        int w_ = snprintf(buf + *at, len - *at, __VA_ARGS__);                                      \
        if (w_ < 0 || (size_t)w_ >= len - *at)                                                     \
            return -1;                                                                             \
        *at += (size_t)w_;                                                                         \
    } while (0)
    if (depth > 16)
        return -1;
    if (n->type == YAML_SCALAR_NODE) {
        const char *lit = json_literal(n);
        if (lit) {
            PUT("%s", lit);
            return 0;
        }
        PUT("\"");
        for (const unsigned char *p = (const unsigned char *)scalar_of(n); *p; p++) {
            if (*p == '"' || *p == '\\')
                PUT("\\%c", *p);
            else if (*p < 0x20)
                PUT("\\u%04x", *p);
            else
                PUT("%c", *p);
        }
        PUT("\"");
        return 0;
    }
    if (n->type == YAML_SEQUENCE_NODE) {
        PUT("[");
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
            if (it != n->data.sequence.items.start)
                PUT(", ");
            if (to_json(doc, yaml_document_get_node(doc, *it), buf, len, at, depth + 1))
                return -1;
        }
        PUT("]");
        return 0;
    }
    PUT("{");
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top; pr++) {
        yaml_node_t *kn = yaml_document_get_node(doc, pr->key);
        if (kn->type != YAML_SCALAR_NODE)
            return -1;
        if (pr != n->data.mapping.pairs.start)
            PUT(", ");
        yaml_node_t key = *kn;
        key.data.scalar.style = YAML_DOUBLE_QUOTED_SCALAR_STYLE; /* a key is always a string */
        if (to_json(doc, &key, buf, len, at, depth + 1))
            return -1;
        PUT(": ");
        if (to_json(doc, yaml_document_get_node(doc, pr->value), buf, len, at, depth + 1))
            return -1;
    }
    PUT("}");
    return 0;
#undef PUT
}

/* A mapping kept as JSON text (dataset.python.args): what the user's Python
 * gets as keyword arguments. */
static int set_json(origin_t *o, const zp_config_key_t *k, yaml_document_t *doc, yaml_node_t *n,
                    char *dst)
{
    size_t at = 0;
    if (n->type != YAML_MAPPING_NODE)
        return fail_at(o, &n->start_mark, k->key, NULL, "expected a mapping of names to values, "
                       "like {root: /data, size: 64}");
    if (to_json(doc, n, dst, k->size, &at, 0))
        return fail_at(o, &n->start_mark, k->key, NULL, "longer than %zu characters as JSON, "
                       "nested deeper than 16, or a key that is not a plain name", k->size - 1);
    return 0;
}

int zp_config_pairs(const char *json, char (*name)[ZP_CONFIG_PAIR_NAME],
                    char (*value)[ZP_CONFIG_PAIR_VALUE], int max, char *err, size_t errlen)
{
    yaml_parser_t p;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&p)) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)json, strlen(json));
    int loaded = yaml_parser_load(&p, &doc), n = -1; /* JSON is YAML's flow style */
    yaml_node_t *root = loaded ? yaml_document_get_root_node(&doc) : NULL;
    if (!root || root->type != YAML_MAPPING_NODE)
        snprintf(err, errlen, "expected a mapping of names to strings");
    else if (root->data.mapping.pairs.top - root->data.mapping.pairs.start > max)
        snprintf(err, errlen, "more than %d names", max);
    else
        n = 0;
    for (yaml_node_pair_t *pr = n ? NULL : root->data.mapping.pairs.start;
         pr && pr < root->data.mapping.pairs.top; pr++, n++) {
        yaml_node_t *k = yaml_document_get_node(&doc, pr->key), *v = yaml_document_get_node(&doc, pr->value);
        if (k->type != YAML_SCALAR_NODE || v->type != YAML_SCALAR_NODE) {
            snprintf(err, errlen, "%s: expected a string", k->type == YAML_SCALAR_NODE ? scalar_of(k) : "a name");
            n = -1;
            break;
        }
        if (k->data.scalar.length >= ZP_CONFIG_PAIR_NAME || v->data.scalar.length >= ZP_CONFIG_PAIR_VALUE) {
            snprintf(err, errlen, "%.40s: a name has at most %d characters, a value %d",
                     scalar_of(k), ZP_CONFIG_PAIR_NAME - 1, ZP_CONFIG_PAIR_VALUE - 1);
            n = -1;
            break;
        }
        snprintf(name[n], ZP_CONFIG_PAIR_NAME, "%s", scalar_of(k));
        snprintf(value[n], ZP_CONFIG_PAIR_VALUE, "%s", scalar_of(v));
    }
    if (loaded)
        yaml_document_delete(&doc);
    yaml_parser_delete(&p);
    return n;
}

/* Validates node `n` against key `k` and stores it into cfg. */
static int set_value(origin_t *o, zp_config_t *cfg, const zp_config_key_t *k, yaml_document_t *doc,
                     yaml_node_t *n)
{
    void *dst = (char *)cfg + k->off;
    if (k->type == KT_INTS || k->type == KT_FLOATS)
        return set_list(o, k, doc, n, dst);
    if (k->type == KT_STRS || k->type == KT_PATHS)
        return set_strs(o, k, doc, n, dst);
    if (k->type == KT_JSON)
        return set_json(o, k, doc, n, dst);
    if (n->type != YAML_SCALAR_NODE)
        return fail_at(o, &n->start_mark, k->key, NULL, "expected %s, not a %s", type_name(k->type),
                       n->type == YAML_MAPPING_NODE ? "mapping" : "list");
    const char *s = scalar_of(n);
    switch (k->type) {
    case KT_INT: {
        int64_t v;
        if (!is_plain(n) || parse_int(s, &v))
            return fail_at(o, &n->start_mark, k->key, NULL, "expected an integer (got '%s')", s);
        int rc = check_range(o, k, n, (double)v, s);
        if (rc)
            return rc;
        *(int64_t *)dst = v;
        return 0;
    }
    case KT_SIZE: {
        int64_t v;
        if (!is_plain(n) || parse_size(s, &v))
            return fail_at(o, &n->start_mark, k->key, NULL,
                           "expected a size like 4GiB, 512MiB or 1000000 (got '%s')", s);
        if (v < k->lo || v > k->hi)
            return fail_at(o, &n->start_mark, k->key, NULL, "must be %.0f..%.0f bytes (got %s)",
                           k->lo, k->hi, s);
        *(int64_t *)dst = v;
        return 0;
    }
    case KT_FLOAT: {
        double v;
        if (!is_plain(n) || parse_float(s, &v))
            return fail_at(o, &n->start_mark, k->key, NULL, "expected a number (got '%s')", s);
        int rc = check_range(o, k, n, v, s);
        if (rc)
            return rc;
        *(double *)dst = v;
        return 0;
    }
    case KT_BOOL:
        if (!is_plain(n) || parse_bool(s, (bool *)dst))
            return fail_at(o, &n->start_mark, k->key, NULL, "expected true or false (got '%s')", s);
        return 0;
    case KT_STR:
    case KT_PATH:
    case KT_PROG:
        if (strlen(s) >= k->size)
            return fail_at(o, &n->start_mark, k->key, NULL, "longer than %zu characters",
                           k->size - 1);
        memcpy(dst, s, strlen(s) + 1);
        return 0;
    case KT_ENUM: {
        int idx = enum_index(k->choices, s);
        if (idx < 0) {
            char list[128];
            snprintf(list, sizeof list, "%s", k->choices);
            for (char *p = list; *p; p++)
                if (*p == '|')
                    *p = '/';
            return fail_at(o, &n->start_mark, k->key, NULL, "must be one of %s (got '%s')", list, s);
        }
        *(int *)dst = idx;
        return 0;
    }
    default:
        return ZP_EINVAL;
    }
}

/* ---- documents --------------------------------------------------------------------------- */

/* A reader error (bad UTF-8, a control character) has a byte offset, not a
 * mark: count the lines and characters of `f` up to it. */
static yaml_mark_t offset_mark(FILE *f, size_t offset)
{
    yaml_mark_t m = {0};
    rewind(f);
    for (size_t i = 0; i < offset; i++) {
        int c = fgetc(f);
        if (c == EOF)
            break;
        if (c == '\n')
            m.line++, m.column = 0;
        else if ((c & 0xC0) != 0x80)
            m.column++;
    }
    return m;
}

static int syntax_error(origin_t *o, yaml_parser_t *p, FILE *f, const char *key)
{
    yaml_mark_t m = p->problem_mark;
    if (p->error == YAML_READER_ERROR && f)
        m = offset_mark(f, p->problem_offset);
    return fail_at(o, &m, key, NULL, "YAML syntax error: %s%s%s", p->problem ? p->problem : "?",
                   p->context ? " " : "", p->context ? p->context : "");
}

/* Parses `text` (or the open file `f`) into `doc`; on a syntax error fills o->err. */
static int load_doc(origin_t *o, yaml_document_t *doc, FILE *f, const char *text, const char *key)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return ZP_ENOMEM;
    if (f)
        yaml_parser_set_input_file(&p, f);
    else if (text)
        yaml_parser_set_input_string(&p, (const unsigned char *)text, strlen(text));
    int rc = 0;
    if (!yaml_parser_load(&p, doc)) {
        rc = syntax_error(o, &p, f, key);
    } else if (f) {
        yaml_document_t extra;
        if (!yaml_parser_load(&p, &extra)) {
            rc = syntax_error(o, &p, f, key); /* a broken second document is still an error */
        } else {
            if (yaml_document_get_root_node(&extra)) {
                yaml_mark_t m = extra.start_mark;
                rc = fail_at(o, &m, key, NULL, "only one YAML document is allowed");
            }
            yaml_document_delete(&extra);
        }
        if (rc)
            yaml_document_delete(doc);
    }
    yaml_parser_delete(&p);
    return rc;
}

typedef struct {
    char name[64];
    yaml_mark_t mark;
} section_t;

typedef struct {
    unsigned char seen[NKEYS];
    yaml_mark_t mark[NKEYS];        /* where a key's value was written in the file */
    const char *override_of[NKEYS]; /* or the override that set it last */
    section_t sections[32];
    int nsections;
} walk_t;

static int walk_map(origin_t *o, zp_config_t *cfg, walk_t *w, yaml_document_t *doc,
                    yaml_node_t *map, const char *prefix)
{
    for (yaml_node_pair_t *pr = map->data.mapping.pairs.start; pr < map->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *kn = yaml_document_get_node(doc, pr->key);
        yaml_node_t *vn = yaml_document_get_node(doc, pr->value);
        if (kn->type != YAML_SCALAR_NODE)
            return fail_at(o, &kn->start_mark, *prefix ? prefix : "(root)", NULL,
                           "keys must be plain names");
        char full[160];
        snprintf(full, sizeof full, "%s%s%s", prefix, *prefix ? "." : "", scalar_of(kn));
        int idx = find_key(full);
        if (idx >= 0) {
            if (w->seen[idx])
                return fail_at(o, &kn->start_mark, full, NULL, "duplicate key");
            w->seen[idx] = 1;
            w->mark[idx] = vn->start_mark;
            cfg->where[idx] = (zp_config_where_t){(int32_t)vn->start_mark.line + 1,
                                                  (int32_t)vn->start_mark.column + 1};
            int rc = set_value(o, cfg, &KEYS[idx], doc, vn);
            if (rc)
                return rc;
        } else if (is_section(full)) {
            if (vn->type != YAML_MAPPING_NODE)
                return fail_at(o, &vn->start_mark, full, NULL, "expected a mapping of keys");
            for (int i = 0; i < w->nsections; i++)
                if (!strcmp(w->sections[i].name, full))
                    return fail_at(o, &kn->start_mark, full, NULL, "duplicate key");
            if (w->nsections < 32) {
                snprintf(w->sections[w->nsections].name, 64, "%.63s", full);
                w->sections[w->nsections++].mark = kn->start_mark;
            }
            int rc = walk_map(o, cfg, w, doc, vn, full);
            if (rc)
                return rc;
        } else {
            const char *s = suggest(full);
            if (s)
                return fail_at(o, &kn->start_mark, full, NULL, "unknown key (did you mean %s?)", s);
            return fail_at(o, &kn->start_mark, full, NULL, "unknown key");
        }
    }
    return 0;
}

/* Position to blame for a missing key: its closest enclosing section, else 1:1. */
static const yaml_mark_t *missing_mark(walk_t *w, const char *key)
{
    const yaml_mark_t *best = NULL;
    size_t best_len = 0;
    for (int i = 0; i < w->nsections; i++) {
        size_t n = strlen(w->sections[i].name);
        if (strncmp(key, w->sections[i].name, n) == 0 && key[n] == '.' && n > best_len) {
            best = &w->sections[i].mark;
            best_len = n;
        }
    }
    return best;
}

static int load_file(origin_t *o, zp_config_t *cfg, walk_t *w, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(o->err, o->errlen, "%s: cannot open: %s", path, strerror(errno));
        return ZP_ECONFIG;
    }
    yaml_document_t doc;
    int rc = load_doc(o, &doc, f, NULL, "(syntax)");
    fclose(f);
    if (rc)
        return rc;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root && root->type == YAML_MAPPING_NODE)
        rc = walk_map(o, cfg, w, &doc, root, "");
    else if (root && !(root->type == YAML_SCALAR_NODE && root->data.scalar.length == 0))
        rc = fail_at(o, &root->start_mark, "(root)", NULL, "expected a mapping of keys");
    yaml_document_delete(&doc);
    return rc;
}

static int apply_override(origin_t *o, zp_config_t *cfg, walk_t *w, const char *ov)
{
    o->override = ov;
    o->file = NULL;
    const char *eq = strchr(ov, '=');
    char key[160];
    if (!eq || eq == ov || (size_t)(eq - ov) >= sizeof key)
        return fail_at(o, NULL, "(override)", NULL, "expected KEY=VALUE");
    snprintf(key, sizeof key, "%.*s", (int)(eq - ov), ov);
    int idx = find_key(key);
    if (idx < 0) {
        const char *s = suggest(key);
        if (s)
            return fail_at(o, NULL, key, NULL, "unknown key (did you mean %s?)", s);
        return fail_at(o, NULL, key, NULL, "unknown key");
    }
    yaml_document_t doc;
    int rc = load_doc(o, &doc, NULL, eq + 1, key);
    if (rc)
        return rc;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root)
        rc = fail_at(o, NULL, key, NULL, "missing value");
    else
        rc = set_value(o, cfg, &KEYS[idx], &doc, root);
    yaml_document_delete(&doc);
    if (!rc) {
        w->seen[idx] = 1;
        w->override_of[idx] = ov;
        size_t at = 0, n = strlen(ov) + 1; /* kept for zp_config_fail */
        while (at < sizeof cfg->overrides && cfg->overrides[at])
            at += strlen(cfg->overrides + at) + 1;
        int fits = at + n <= sizeof cfg->overrides;
        if (fits)
            memcpy(cfg->overrides + at, ov, n);
        cfg->where[idx] = (zp_config_where_t){-1, fits ? (int32_t)at : -1};
    }
    return rc;
}

static int apply_defaults(zp_config_t *cfg, char *err, size_t errlen)
{
    origin_t o = {.file = "(defaults)", .err = err, .errlen = errlen};
    for (int i = 0; i < NKEYS; i++) {
        if (!KEYS[i].def)
            continue;
        yaml_document_t doc;
        if (load_doc(&o, &doc, NULL, KEYS[i].def, KEYS[i].key))
            return ZP_ECONFIG;
        yaml_node_t *root = yaml_document_get_root_node(&doc);
        int rc = 0;
        if (root)
            rc = set_value(&o, cfg, &KEYS[i], &doc, root);
        else if (KEYS[i].type == KT_STR || KEYS[i].type == KT_PATH || KEYS[i].type == KT_PROG)
            ((char *)cfg + KEYS[i].off)[0] = 0;
        yaml_document_delete(&doc);
        if (rc)
            return rc;
    }
    return 0;
}

bool zp_config_written(const zp_config_t *cfg, const char *key)
{
    int i = find_key(key);
    return i >= 0 && cfg->where[i].line != 0;
}

int zp_config_fail(const zp_config_t *cfg, const char *key, char *err, size_t errlen,
                   const char *fmt, ...)
{
    char what[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    int i = find_key(key);
    zp_config_where_t at = i >= 0 ? cfg->where[i] : (zp_config_where_t){0, 0};
    if (at.line < 0 && at.col >= 0) {
        snprintf(err, errlen, "override '%s': %s: %s", cfg->overrides + at.col, key, what);
    } else if (at.line < 0) {
        snprintf(err, errlen, "an override: %s: %s", key, what);
    } else { /* a default is blamed on the top of the file */
        size_t line = at.line ? (size_t)at.line : 1, col = at.line ? (size_t)at.col : 1;
        snprintf(err, errlen, "%s:%zu:%zu: %s: %s", cfg->file[0] ? cfg->file : "(command line)",
                 line, col, key, what);
        if (cfg->file[0])
            append_line(err, errlen, cfg->file, line, col);
    }
    return ZP_ECONFIG;
}

/* The rules beyond one key's type and range (config_check.c), the error
 * pointed at the key a rule blames. */
static int cross_check(origin_t *o, const zp_config_t *cfg)
{
    const char *key;
    char what[384];
    if (!zp_config_check(cfg, &key, what, sizeof what))
        return 0;
    return zp_config_fail(cfg, key, o->err, o->errlen, "%s", what);
}

/* ---- the default cache folder --------------------------------------------------------- */

/* The folder the default caches live in: node-local under Slurm (a home
 * folder is often NFS, which a multi-node run refuses for a cache):
 * zeus-pipe-UID in $SLURM_TMPDIR, $TMPDIR, else /tmp (folders users share:
 * each user's own); elsewhere the user's cache folder, as torch hub's and the
 * datasets libraries': $XDG_CACHE_HOME, else ~/.cache. Writes `why` (which
 * variable chose it). */
static void cache_base(char *buf, size_t len, const char **why)
{
    const char *v;
    if (getenv("SLURM_JOB_ID")) {
        if ((v = getenv("SLURM_TMPDIR")) && v[0] == '/')
            *why = "$SLURM_TMPDIR: node-local under Slurm";
        else if ((v = getenv("TMPDIR")) && v[0] == '/')
            *why = "$TMPDIR: node-local under Slurm";
        else
            v = "/tmp", *why = "/tmp: node-local under Slurm";
        snprintf(buf, len, "%s/zeus-pipe-%u", v, (unsigned)getuid());
    } else if ((v = getenv("XDG_CACHE_HOME")) && v[0] == '/') {
        snprintf(buf, len, "%s/zeus-pipe", v);
        *why = "$XDG_CACHE_HOME";
    } else if ((v = getenv("HOME")) && v[0] == '/') {
        snprintf(buf, len, "%s/.cache/zeus-pipe", v);
        *why = "~/.cache";
    } else {
        snprintf(buf, len, "/tmp/zeus-pipe-%u", (unsigned)getuid());
        *why = "/tmp: no $HOME";
    }
}

int zp_config_default_cache(zp_config_t *cfg, const char *label, const char *id, char *err,
                            size_t errlen)
{
    char name[48], base[PATH_MAX];
    const char *cut = strrchr(label, ':'), *slash = strrchr(label, '/');
    label = cut && cut > slash ? cut + 1 : slash ? slash + 1 : label;
    size_t n = 0;
    for (; label[n] && n < sizeof name - 1; n++)
        name[n] = isalnum((unsigned char)label[n]) || strchr("._-", label[n]) ? label[n] : '_';
    name[n] = 0;
    const char *why;
    cache_base(base, sizeof base, &why);
    if (strlen(base) > 200)
        return zp_config_fail(cfg, "cache.path", err, errlen, "unset, so the default folder is in "
                              "%s, whose path is %zu characters (at most 200 fit): set cache.path",
                              base, strlen(base));
    /* %.200s: the base fits (checked above); the bound tells the compiler so */
    snprintf(cfg->cache_path, sizeof cfg->cache_path, "%.200s/%.40s-%012llx", base, n ? name : "dataset",
             (unsigned long long)(XXH3_64bits(id, strlen(id)) >> 16));
    snprintf(cfg->cache_default, sizeof cfg->cache_default, "%s", why);
    return 0;
}

/* ---- paths ------------------------------------------------------------------------------ */

/* `p` (of room `size`), written in the config file, put in the file's folder
 * `dir` as the user typed it ("" for the working directory): a join, with no
 * "/../" folded, so that symbolic links resolve as the kernel will. An
 * absolute path, "", and a program without a '/' (a name on PATH) stay. */
static int beside(origin_t *o, const yaml_mark_t *m, const zp_config_key_t *k, char *p, size_t size,
                  const char *dir)
{
    if (!*dir || !p[0] || p[0] == '/' || (k->type == KT_PROG && !strchr(p, '/')))
        return 0;
    const char *rel = p;
    while (rel[0] == '.' && rel[1] == '/')
        rel += 2;
    if (!strcmp(rel, "."))
        rel = "";
    char out[PATH_MAX + ZP_STR_LEN];
    int len = snprintf(out, sizeof out, "%s%s", dir, rel);
    if (len < 0 || (size_t)len >= size)
        return fail_at(o, m, k->key, NULL, "'%s' in the config's folder is %s, %d characters; at "
                       "most %zu fit: write a shorter path", p, out, len, size - 1);
    memcpy(p, out, (size_t)len + 1);
    return 0;
}

/* Puts every path key written in the config file `path` in the file's folder,
 * so that a relative path in a config names the file beside it wherever `up`
 * is typed from. Defaults and KEY=VALUEs stay relative to the working
 * directory, as the shell's arguments are. */
static int resolve_paths(origin_t *o, zp_config_t *cfg, walk_t *w, const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path + 1) : 0, path); /* "a/b/" or "" */
    for (int i = 0; i < NKEYS; i++) {
        const zp_config_key_t *k = &KEYS[i];
        if ((k->type != KT_PATH && k->type != KT_PATHS && k->type != KT_PROG) || !w->seen[i] ||
            w->override_of[i])
            continue;
        void *dst = (char *)cfg + k->off;
        int rc = 0;
        if (k->type == KT_PATHS) {
            zp_strs_t *l = dst;
            for (int j = 0; j < l->n && !rc; j++)
                rc = beside(o, &w->mark[i], k, l->v[j], ZP_STR_LEN, dir);
        } else {
            rc = beside(o, &w->mark[i], k, dst, k->size, dir);
        }
        if (rc)
            return rc;
    }
    return 0;
}

static int load(zp_config_t *cfg, const char *path, char *const *overrides, int n, char *err,
                size_t errlen, int as_run)
{
    memset(cfg, 0, sizeof *cfg);
    err[0] = 0;
    int rc = apply_defaults(cfg, err, errlen);
    if (rc)
        return rc;
    walk_t w;
    memset(&w, 0, sizeof w);
    origin_t o = {.file = path, .err = err, .errlen = errlen};
    if (path) {
        snprintf(cfg->file, sizeof cfg->file, "%s", path);
        if ((rc = load_file(&o, cfg, &w, path)))
            return rc;
    }
    if (path && !as_run && (rc = resolve_paths(&o, cfg, &w, path)))
        return rc;
    for (int i = 0; i < n; i++)
        if ((rc = apply_override(&o, cfg, &w, overrides[i])))
            return rc;
    o.override = NULL;
    o.file = path ? path : "(command line)";
    for (int i = 0; i < NKEYS; i++)
        if (!KEYS[i].def && !w.seen[i]) {
            const yaml_mark_t *m = missing_mark(&w, KEYS[i].key);
            yaml_mark_t top = {0};
            return fail_at(&o, path ? (m ? m : &top) : NULL, KEYS[i].key, NULL,
                           "required key is missing");
        }
    if (!cfg->run_name[0]) {
        const char *base = path ? strrchr(path, '/') : NULL;
        base = base ? base + 1 : (path ? path : "run");
        const char *ext = strrchr(base, '.'); /* only the last extension: a.b.yaml is "a.b" */
        int len = ext && ext != base ? (int)(ext - base) : (int)strlen(base);
        snprintf(cfg->run_name, sizeof cfg->run_name, "%.*s", len, base);
    }
    return cross_check(&o, cfg);
}

int zp_config_load(zp_config_t *cfg, const char *path, char *const *overrides, int n, char *err,
                   size_t errlen)
{
    return load(cfg, path, overrides, n, err, errlen, 0);
}

int zp_config_load_run(zp_config_t *cfg, const char *path, char *err, size_t errlen)
{
    return load(cfg, path, NULL, 0, err, errlen, 1);
}

int zp_config_load_run_with(zp_config_t *cfg, const char *path, char *const *overrides, int n,
                            char *err, size_t errlen)
{
    return load(cfg, path, overrides, n, err, errlen, 1);
}

void zp_config_folder(const zp_config_t *cfg, char *out, size_t len)
{
    char real[PATH_MAX];
    if (cfg->file[0] && realpath(cfg->file, real))
        snprintf(out, len, "%s", dirname(real));
    else if (!getcwd(out, len))
        snprintf(out, len, ".");
}

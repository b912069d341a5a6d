/* config_table.h — the config keys as a table the loader (config.c) and the
 * printer (config_print.c) walk: one row per key of schemas/config_keys.h,
 * with where its value lives in zp_config_t. Internal to the config module. */
#ifndef ZP_CONFIG_TABLE_H
#define ZP_CONFIG_TABLE_H

#include "pipeline/config/config.h"

#include <stddef.h>

/* PATH, PATHS and PROG are strings naming files: made absolute at load, a relative
 * one against the folder of the config file it was written in, or the working
 * directory (a default, a KEY=VALUE). A PROG without a '/' is a name on PATH. */
typedef enum {
    KT_INT, KT_FLOAT, KT_BOOL, KT_STR, KT_ENUM, KT_INTS, KT_FLOATS, KT_SIZE, KT_STRS, KT_JSON,
    KT_PATH, KT_PATHS, KT_PROG
} kt_t;

typedef struct {
    const char *key;
    kt_t type;
    size_t off, size;
    const char *def; /* NULL: required */
    double lo, hi;
    const char *choices;
    const char *help;
} zp_config_key_t;

extern const zp_config_key_t zp_config_keys[];
extern const int zp_config_nkeys;

/* The rules beyond each key's type and range (config_check.c): 0 when cfg
 * keeps them all, else 1 with the key to blame in *key and what is wrong in
 * `what`. */
int zp_config_check(const zp_config_t *cfg, const char **key, char *what, size_t len);

/* The idx-th of "a|b|c" into buf. */
const char *zp_config_enum_name(const char *choices, int idx, char *buf, size_t len);

#endif

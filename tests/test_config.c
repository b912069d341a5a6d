/* Unit tests of the configuration loader: every malformed file under
 * configs/bad/ is rejected with the exact "FILE:LINE:COL: KEY: what" line the
 * user reads; defaults, overrides and `zeus-pipe config` output round-trip.
 * A config is loaded as a user's is (load_config: the keys, then its
 * source's rules and default cache folder). Paths are relative to tests/,
 * where ctest runs this binary. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipeline/config/config.h"
#include "pipeline/base/log.h"
#include "pipeline/source/source.h"
#include "schemas/config_keys.h"

#define BAD "configs/bad/"
#define GOOD "configs/good/"

static char err[2048];

/* A user's config: zp_config_load, then zp_source_config. */
static int load_config(zp_config_t *cfg, const char *path, char **ov, int n, char *e, size_t len)
{
    int rc = zp_config_load(cfg, path, ov, n, e, len);
    return rc ? rc : zp_source_config(cfg, e, len);
}

/* The first line of err (the part before the offending line and caret). */
static const char *first_line(void)
{
    static char line[1024];
    snprintf(line, sizeof line, "%.*s", (int)strcspn(err, "\n"), err);
    return line;
}

/* The text of line `n` (from 1) of `path`, without its newline. */
static const char *line_of(const char *path, int n)
{
    static char buf[512];
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    buf[0] = 0;
    for (int i = 0; i < n && fgets(buf, sizeof buf, f); i++)
        ;
    fclose(f);
    buf[strcspn(buf, "\r\n")] = 0;
    return buf;
}

/* ---- malformed files: one case per file, exact first line ------------------------------ */

typedef struct {
    const char *file; /* under configs/bad/ */
    const char *want; /* the first line of the error after "FILE:" */
    bool shows_line;  /* the offending line and a caret under LINE:COL follow */
} bad_case_t;

static void rejects_bad_file(void **state)
{
    const bad_case_t *c = *state;
    char path[256], first[1024], want[2048];
    snprintf(path, sizeof path, BAD "%s", c->file);
    snprintf(first, sizeof first, "%s:%s", path, c->want);
    zp_config_t cfg;
    assert_int_equal(load_config(&cfg, path, NULL, 0, err, sizeof err), ZP_ECONFIG);
    assert_string_equal(first_line(), first);
    if (!c->shows_line) {
        assert_null(strchr(err, '\n'));
        return;
    }
    int line, col;
    assert_int_equal(sscanf(c->want, "%d:%d:", &line, &col), 2);
    snprintf(want, sizeof want, "%s\n    %s\n    %*s^", first, line_of(path, line), col - 1, "");
    assert_string_equal(err, want);
}

#define CASE(test_name, file, want, shows_line)                                                    \
    {#test_name, rejects_bad_file, NULL, NULL, &(bad_case_t){file, want, shows_line}}

static const struct CMUnitTest bad_files[] = {
    CASE(unknown_top_level_key_is_rejected, "unknown_key.yaml", "3:1: colour: unknown key", true),
    CASE(unknown_nested_key_suggests_the_close_spelling, "unknown_nested_key.yaml",
         "4:3: loader.worker: unknown key (did you mean loader.workers?)", true),
    CASE(unknown_key_suggests_the_key_with_the_same_leaf_name, "leaf_name_elsewhere.yaml",
         "4:3: trainer.lr: unknown key (did you mean trainer.optimizer.lr?)", true),
    CASE(word_for_an_int_is_rejected_at_the_value, "int_not_a_number.yaml",
         "4:12: loader.workers: expected an integer (got 'many')", true),
    CASE(quoted_number_for_an_int_is_rejected, "int_quoted.yaml",
         "4:12: loader.workers: expected an integer (got '3')", true),
    CASE(int_below_its_range_is_rejected, "int_below_range.yaml",
         "4:12: loader.workers: must be 1..256 (got 0)", true),
    CASE(int_above_its_range_is_rejected, "int_above_range.yaml",
         "5:10: prefetch.depth: must be 1..64 (got 65)", true),
    CASE(float_above_its_range_is_rejected, "float_above_range.yaml",
         "5:15: trainer.optimizer.momentum: must be 0..0.999 (got 1.5)", true),
    CASE(word_for_a_float_is_rejected, "float_not_a_number.yaml",
         "5:9: trainer.optimizer.lr: expected a number (got 'fast')", true),
    CASE(bool_other_than_true_or_false_is_rejected, "bool_not_a_bool.yaml",
         "4:12: prefetch.shuffle: expected true or false (got 'maybe')", true),
    CASE(enum_value_outside_its_choices_is_rejected, "enum_unknown_choice.yaml",
         "4:12: trainer.backend: must be one of cpu/null/cuda/auto (got 'gpu')", true),
    CASE(list_element_that_is_not_an_integer_is_rejected_at_the_element,
         "list_non_integer_element.yaml",
         "5:19: trainer.model.hidden: expected a list of integers (got 'x')", true),
    CASE(list_element_out_of_range_is_rejected_at_the_element, "list_element_out_of_range.yaml",
         "5:19: trainer.model.hidden: must be 1..65536 (got 0)", true),
    CASE(empty_item_of_a_string_list_is_rejected_at_the_item, "command_empty_item.yaml",
         "4:27: trainer.command: item 1 is empty: remove it or write what it should be", true),
    CASE(mapping_for_a_string_list_is_rejected, "command_mapping.yaml",
         "4:12: trainer.command: expected a list of strings", true),
    CASE(list_longer_than_the_maximum_is_rejected, "list_too_long.yaml",
         "5:13: trainer.model.hidden: at most 8 values", true),
    CASE(mapping_where_an_int_is_expected_is_rejected, "mapping_for_int.yaml",
         "4:12: loader.workers: expected an integer, not a mapping", true),
    CASE(list_where_an_int_is_expected_is_rejected, "list_for_int.yaml",
         "4:12: loader.workers: expected an integer, not a list", true),
    CASE(scalar_where_a_section_is_expected_is_rejected, "scalar_for_section.yaml",
         "3:9: loader: expected a mapping of keys", true),
    CASE(duplicate_key_is_rejected_at_its_second_occurrence, "duplicate_key.yaml",
         "6:3: loader.workers: duplicate key", true),
    CASE(section_written_twice_is_rejected_at_its_second_occurrence, "duplicate_section.yaml",
         "5:1: loader: duplicate key", true),
    CASE(string_longer_than_its_field_is_rejected, "string_too_long.yaml",
         "4:9: run.name: longer than 63 characters", true),
    CASE(non_scalar_key_is_rejected, "key_not_a_name.yaml",
         "1:3: (root): keys must be plain names", true),
    CASE(missing_required_key_points_at_its_section, "missing_source_in_section.yaml",
         "2:1: dataset.source: required key is missing", true),
    CASE(missing_required_key_without_its_section_points_at_1_1, "missing_source_no_section.yaml",
         "1:1: dataset.source: required key is missing", true),
    CASE(empty_file_lacks_the_required_key, "empty.yaml",
         "1:1: dataset.source: required key is missing", false),
    CASE(unclosed_flow_list_is_a_syntax_error_at_its_position, "syntax_unclosed_bracket.yaml",
         "6:9: (syntax): YAML syntax error: did not find expected ',' or ']' while parsing a flow "
         "sequence",
         true),
    CASE(bad_indentation_is_a_syntax_error_at_its_position, "syntax_bad_indentation.yaml",
         "5:2: (syntax): YAML syntax error: did not find expected key while parsing a block "
         "mapping",
         true),
    CASE(root_that_is_a_list_is_rejected, "root_is_list.yaml",
         "1:1: (root): expected a mapping of keys", true),
    CASE(second_yaml_document_is_rejected, "two_documents.yaml",
         "3:1: (syntax): only one YAML document is allowed", true),
    CASE(broken_second_yaml_document_is_a_syntax_error, "second_document_broken.yaml",
         "5:1: (syntax): YAML syntax error: did not find expected ',' or ']' while parsing a flow "
         "sequence",
         false), /* the end of the file: no line to show */
    CASE(control_character_is_reported_at_its_line_and_column, "control_character.yaml",
         "4:11: (syntax): YAML syntax error: control characters are not allowed", true),
    CASE(invalid_utf8_is_reported_at_its_line_and_column, "invalid_utf8.yaml",
         "3:7: (syntax): YAML syntax error: invalid trailing UTF-8 octet", true),
    CASE(run_name_outside_run_dir_is_rejected_at_its_line, "run_name_outside_run_dir.yaml",
         "2:9: run.name: must be one folder name in run.dir: no '/', not starting with '.' (got "
         "'../../etc')", true),
    CASE(std_with_a_length_other_than_mean_or_one_is_rejected, "std_mean_mismatch.yaml",
         "4:8: dataset.std: has 3 values but dataset.mean has 2", true),
    CASE(synthetic_shape_of_four_dimensions_is_rejected, "shape_too_many_dims.yaml",
         "4:12: dataset.synthetic.shape: needs 1 to 3 dimensions (got 4)", true),
    CASE(image_crop_whose_samples_exceed_the_wire_limit_is_rejected, "image_crop_over_the_wire_limit.yaml",
         "4:11: dataset.image.crop: 3 x 2365 x 2365 = 16779675 values a sample, more than a message "
         "carries (ZP_MAX_ELEMS = 16777216): at most 2364", true),
    CASE(synthetic_shape_whose_samples_exceed_the_wire_limit_is_rejected,
         "synthetic_shape_over_the_wire_limit.yaml",
         "4:12: dataset.synthetic.shape: 16779264 values a sample, more than a message carries "
         "(ZP_MAX_ELEMS = 16777216)", true),
    CASE(autoscale_min_above_max_names_both_keys, "autoscale_min_above_max.yaml",
         "5:16: loader.min_workers: 4 is above loader.max_workers 2: lower it, or raise "
         "loader.max_workers (0: the free cores)",
         true),
    CASE(augmentation_in_loaders_with_the_cache_on_is_rejected, "augment_in_loader_with_cache.yaml",
         "4:12: dataset.augment.where: loader needs cache.enabled: false (the cache would keep one draw)",
         true),
    CASE(augmentation_in_loaders_of_uint8_samples_is_rejected, "augment_in_loader_with_uint8.yaml",
         "5:12: dataset.augment.where: loader needs dataset.dtype: float32 (augmented pixels are not bytes)",
         true),
    CASE(augment_scale_with_the_highest_first_is_rejected, "augment_scale_reversed.yaml",
         "5:12: dataset.augment.scale: needs 2 values, lowest first", true),
    CASE(a_python_step_beside_the_built_in_ops_is_rejected_before_any_stage,
         "python_two_augment_steps.yaml",
         "7:19: dataset.augment.resized_crop: and dataset.python.augment.* both augment: keep one "
         "(the built-in ops at C speed, or your Python step)", true),
    CASE(a_python_augment_step_that_names_no_callable_is_rejected,
         "python_augment_not_a_callable.yaml",
         "5:22: dataset.python.augment.train: needs module:callable, like my_data:train_augment "
         "(got 'my_data')", true),
};

static void nonexistent_file_is_reported_with_its_path(void **state)
{
    (void)state;
    zp_config_t cfg;
    assert_int_equal(load_config(&cfg, BAD "does_not_exist.yaml", NULL, 0, err, sizeof err),
                     ZP_ECONFIG);
    assert_string_equal(err, BAD "does_not_exist.yaml: cannot open: No such file or directory");
}

/* ---- defaults and names ------------------------------------------------------------------ */

/* Checks of one default, written as in schemas/config_keys.h, against the
 * field it landed in. `key` names the key in a failure. */
static void default_int(const char *key, const char *def, int64_t got)
{
    if (strtoll(def, NULL, 10) != got)
        fail_msg("%s: default %s, got %lld", key, def, (long long)got);
}

static void default_float(const char *key, const char *def, double got)
{
    if (strtod(def, NULL) != got)
        fail_msg("%s: default %s, got %.17g", key, def, got);
}

static void default_bool(const char *key, const char *def, bool got)
{
    if ((strcmp(def, "true") == 0) != got)
        fail_msg("%s: default %s, got %d", key, def, got);
}

static void default_str(const char *key, const char *def, const char *got)
{
    if (strcmp(def, got) != 0)
        fail_msg("%s: default '%s', got '%s'", key, def, got);
}

static void default_enum(const char *key, const char *def, const char *choices, int got)
{
    /* the got-th "|"-separated choice must be the default */
    const char *p = choices;
    for (int i = 0; i < got && p; i++)
        p = strchr(p, '|'), p = p ? p + 1 : NULL;
    if (!p || strncmp(p, def, strlen(def)) != 0 || (p[strlen(def)] != '|' && p[strlen(def)]))
        fail_msg("%s: default %s, got choice %d of %s", key, def, got, choices);
}

/* def is "[a, b, ...]"; each value is parsed by strtod and compared as double. */
static void default_list(const char *key, const char *def, int n, const int64_t *iv,
                         const double *fv)
{
    const char *p = def + 1;
    int count = 0;
    for (char *end; *p && *p != ']'; p = end + strspn(end, ", "), count++) {
        double want = strtod(p, &end);
        assert_true(end != p);
        if (count >= n || want != (iv ? (double)iv[count] : fv[count]))
            fail_msg("%s: default %s, value %d differs", key, def, count);
    }
    if (count != n)
        fail_msg("%s: default %s, got %d values", key, def, n);
}

/* def is a size with a binary unit, like "4GiB". */
static void default_size(const char *key, const char *def, int64_t got)
{
    char *unit;
    double v = strtod(def, &unit);
    double mul = !strcmp(unit, "GiB") ? 1073741824.0 : !strcmp(unit, "MiB") ? 1048576.0 : 1.0;
    if ((int64_t)(v * mul) != got)
        fail_msg("%s: default %s, got %lld", key, def, (long long)got);
}


#define CHECK_SIZE(k, d, f, lo) default_size(k, d, c.f)
#define CHECK_PATH(k, d, f, lo) default_str(k, d, c.f)
#define CHECK_PROG(k, d, f, lo) default_str(k, d, c.f)
#define CHECK_PATHS(k, d, f, lo) CHECK_STRS(k, d, f, lo)
#define CHECK_INT(k, d, f, lo) default_int(k, d, c.f)
#define CHECK_FLOAT(k, d, f, lo) default_float(k, d, c.f)
#define CHECK_BOOL(k, d, f, lo) default_bool(k, d, c.f)
#define CHECK_STR(k, d, f, lo) default_str(k, d, c.f)
#define CHECK_ENUM(k, d, f, lo) default_enum(k, d, lo, c.f)
#define CHECK_INTS(k, d, f, lo) default_list(k, d, c.f.n, c.f.v, NULL)
#define CHECK_FLOATS(k, d, f, lo) default_list(k, d, c.f.n, NULL, c.f.v)
#define CHECK_STRS(k, d, f, lo)                                                                    \
    if (strcmp(d, "[]") || c.f.n != 0)                                                             \
        fail_msg("%s: default %s, got %d strings", k, d, c.f.n);
#define CHECK_JSON(k, d, f, lo) default_str(k, d, c.f)
#define CHECK_DEFAULT(key, type, field, def, lo, hi, help)                                         \
    if (def && strcmp(key, "run.name") && strcmp(key, "cache.path")) /* see their own tests */     \
        CHECK_##type(key, def, field, lo);

static void defaults_fill_every_key_the_file_omits(void **state)
{
    (void)state;
    zp_config_t c;
    assert_int_equal(load_config(&c, GOOD "minimal.yaml", NULL, 0, err, sizeof err), 0);
    assert_string_equal(err, "");
    assert_int_equal(c.dataset_source, ZP_SOURCE_SYNTHETIC);
    assert_string_equal(c.file, GOOD "minimal.yaml");
    /* every row of the key table, against its field */
    ZP_CONFIG_KEYS(CHECK_DEFAULT)
    /* and a few spelled out, as a reader would look them up */
    assert_int_equal(c.depth, 2);
    assert_string_equal(c.run_dir, "runs"); /* the working directory's */
    assert_true(c.shuffle);
    assert_int_equal(c.backend, ZP_BACKEND_CPU);
}

static void run_name_defaults_to_the_file_base_name_without_extension(void **state)
{
    (void)state;
    zp_config_t c;
    assert_int_equal(load_config(&c, GOOD "minimal.yaml", NULL, 0, err, sizeof err), 0);
    assert_string_equal(c.run_name, "minimal");
}

/* cache.path as `load` resolves it under the environment given (NAME=VALUE
 * or NAME= to unset, NULL-ended); `why` gets what chose it. */
static void cache_path_under(const char *path, char **ov, int n, char *out, char *why, ...)
{
    va_list ap;
    va_start(ap, why);
    for (const char *e; (e = va_arg(ap, const char *));) {
        const char *eq = strchr(e, '=');
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(eq - e), e);
        if (eq[1])
            setenv(name, eq + 1, 1);
        else
            unsetenv(name);
    }
    va_end(ap);
    zp_config_t c;
    assert_int_equal(load_config(&c, path, ov, n, err, sizeof err), 0);
    strcpy(out, c.cache_path);
    strcpy(why, c.cache_default);
}

static void an_unset_cache_path_is_a_folder_per_dataset_where_users_keep_caches(void **state)
{
    (void)state;
    char a[256], b[256], c[256], why[64];
    char *other[] = {"dataset.synthetic.train_samples=999"}, *set[] = {"cache.path=/data/mine"};
    cache_path_under(GOOD "minimal.yaml", NULL, 0, a, why, "SLURM_JOB_ID=", "XDG_CACHE_HOME=/x/c",
                     "HOME=/home/u", (char *)NULL);
    assert_string_equal(why, "$XDG_CACHE_HOME");
    assert_memory_equal(a, "/x/c/zeus-pipe/synthetic-", 25);
    assert_int_equal(strlen(a), 25 + 12); /* 12 hex digits of the dataset's identity */
    cache_path_under(GOOD "minimal.yaml", other, 1, b, why, (char *)NULL);
    assert_string_not_equal(a, b); /* another dataset, another folder */
    assert_memory_equal(b, "/x/c/zeus-pipe/synthetic-", 25);
    cache_path_under(GOOD "minimal.yaml", NULL, 0, c, why, "XDG_CACHE_HOME=", (char *)NULL);
    assert_string_equal(why, "~/.cache");
    assert_string_equal(c + strlen("/home/u/.cache"), a + strlen("/x/c")); /* the same dataset */
    assert_memory_equal(c, "/home/u/.cache/zeus-pipe/", 25);
    char mine[64]; /* under Slurm the folder is each user's own: zeus-pipe-UID */
    snprintf(mine, sizeof mine, "zeus-pipe-%u/", (unsigned)getuid());
    cache_path_under(GOOD "minimal.yaml", NULL, 0, c, why, "SLURM_JOB_ID=5", "SLURM_TMPDIR=/l/5",
                     "TMPDIR=/t", (char *)NULL);
    assert_string_equal(why, "$SLURM_TMPDIR: node-local under Slurm");
    assert_memory_equal(c + 5, mine, strlen(mine));
    assert_string_equal(c + 5 + strlen(mine), a + strlen("/x/c/zeus-pipe/")); /* the same name */
    cache_path_under(GOOD "minimal.yaml", NULL, 0, c, why, "SLURM_TMPDIR=", (char *)NULL);
    assert_memory_equal(c, "/t/", 3);
    assert_memory_equal(c + 3, mine, strlen(mine));
    cache_path_under(GOOD "minimal.yaml", NULL, 0, c, why, "TMPDIR=", (char *)NULL);
    assert_memory_equal(c, "/tmp/", 5);
    assert_memory_equal(c + 5, mine, strlen(mine));
    cache_path_under(GOOD "minimal.yaml", set, 1, c, why, "SLURM_JOB_ID=", (char *)NULL);
    assert_string_equal(c, "/data/mine");
    assert_string_equal(why, ""); /* set: no default chose it */
}

static void run_name_drops_only_the_last_extension(void **state)
{
    (void)state;
    zp_config_t c;
    assert_int_equal(load_config(&c, GOOD "lr0.05.v2.yaml", NULL, 0, err, sizeof err), 0);
    assert_string_equal(c.run_name, "lr0.05.v2");
}

static void run_name_in_the_file_wins_over_the_base_name(void **state)
{
    (void)state;
    zp_config_t c;
    assert_int_equal(load_config(&c, GOOD "every_key.yaml", NULL, 0, err, sizeof err), 0);
    assert_string_equal(c.run_name, "every-key");
}

static void every_key_of_a_full_file_is_parsed(void **state)
{
    (void)state;
    zp_config_t c;
    assert_int_equal(load_config(&c, GOOD "every_key.yaml", NULL, 0, err, sizeof err), 0);
    assert_int_equal(c.dataset_source, ZP_SOURCE_IDX);
    assert_string_equal(c.run_dir, GOOD "runs/a \"quoted\" \\dir"); /* beside the file */
    assert_int_equal(c.seed, 2147483647);
    assert_int_equal(c.mean.n, 3);
    assert_true(c.mean.v[2] == -0.406);
    assert_true(c.std.v[1] == 0.30000000000000004);
    assert_true(c.std.v[2] == 1e-6);
    assert_int_equal(c.synth_test, 0);
    assert_int_equal(c.synth_shape.n, 3);
    assert_int_equal(c.synth_shape.v[0], 3);
    assert_true(c.cache_enabled);
    assert_string_equal(c.cache_path, "/tmp/a cache");
    assert_int_equal(c.cache_max_bytes, 1610612736);
    assert_int_equal(c.commit_every, 7);
    assert_int_equal(c.on_mismatch, ZP_MISMATCH_REBUILD);
    assert_int_equal(c.cache_encoding, ZP_ENC_JPEG);
    assert_int_equal(c.jpeg_quality, 75);
    assert_int_equal(c.image_cache_side, 400);
    assert_int_equal(c.loader_workers, 256);
    assert_int_equal(c.fetch_timeout_s, 120);
    assert_false(c.shuffle);
    assert_true(c.drop_last);
    assert_int_equal(c.backend, ZP_BACKEND_NULL);
    assert_int_equal(c.hidden.n, 0);
    assert_true(c.momentum == 0.0);
    assert_int_equal(c.limit_train_batches, 1000000000);
    assert_int_equal(c.stat_interval_ms, 50);
    assert_false(c.tensorboard);
    assert_int_equal(c.trace_max_events, 5000);
    assert_int_equal(c.trainer_command.n, 4);
    assert_string_equal(c.trainer_command.v[0], "./train.sh");
    assert_string_equal(c.trainer_command.v[2], "a \"quoted\" arg, with spaces");
    assert_string_equal(c.trainer_command.v[3], "0.1");
    /* a mapping kept as JSON: keys quoted, numbers, true and null as they are, strings escaped */
    assert_string_equal(c.py_args, "{\"root\": \"/data/pets\", \"size\": 64, \"weird key\": [1, 2.5, "
                                   "true, null, \"x\\\"y\"], \"nested\": {\"a\": -1e-3}}");
    assert_string_equal(c.py_splits, "{\"train\": {\"split\": \"train\"}, \"test\": {\"split\": \"val\"}}");
    assert_int_equal(c.py_path.n, 2);
    assert_string_equal(c.py_interp, "/opt/venv/bin/python");
    assert_string_equal(c.py_augment_train, "pets.aug:train_step");
    assert_string_equal(c.py_augment_test, "pets.aug:center");
    assert_int_equal(c.py_random, ZP_PY_RANDOM_CACHE_FIRST_DRAW);
}

static void python_source_needs_module_colon_callable_and_a_mapping_of_args(void **state)
{
    (void)state;
    zp_config_t c;
    char *ok[] = {"dataset.source=python", "dataset.python.class=my_data:Pets",
                  "dataset.python.args={root: '01', n: 010, f: .5}"};
    assert_int_equal(load_config(&c, GOOD "minimal.yaml", ok, 3, err, sizeof err), 0);
    /* what JSON would misread stays a string: a leading zero, a bare dot */
    assert_string_equal(c.py_args, "{\"root\": \"01\", \"n\": \"010\", \"f\": \".5\"}");
    char *noclass[] = {"dataset.source=python", "dataset.python.class=my_data.Pets"};
    assert_int_equal(load_config(&c, GOOD "minimal.yaml", noclass, 2, err, sizeof err), ZP_ECONFIG);
    assert_non_null(strstr(err, "dataset.python.class: needs module:callable"));
    char *list[] = {"dataset.source=python", "dataset.python.class=a:B", "dataset.python.args=[1, 2]"};
    assert_int_equal(load_config(&c, GOOD "minimal.yaml", list, 3, err, sizeof err), ZP_ECONFIG);
    assert_non_null(strstr(err, "dataset.python.args: expected a mapping"));
    char *aug[] = {"dataset.source=python", "dataset.python.class=a:B", "dataset.augment.where=loader"};
    assert_int_equal(load_config(&c, GOOD "minimal.yaml", aug, 3, err, sizeof err), ZP_ECONFIG);
    assert_non_null(strstr(err, "does not apply to dataset.source: python"));
}

static void string_list_override_and_single_string(void **state)
{
    (void)state;
    char *ov[] = {"trainer.command=[python3, 'my train.py', --lr, '0.5']"};
    zp_config_t c;
    assert_int_equal(load_config(&c, GOOD "minimal.yaml", ov, 1, err, sizeof err), 0);
    assert_int_equal(c.trainer_command.n, 4);
    assert_string_equal(c.trainer_command.v[1], "my train.py");
    assert_string_equal(c.trainer_command.v[3], "0.5");
    char *one[] = {"trainer.command=./run.sh"}; /* one string: a list of one */
    assert_int_equal(load_config(&c, GOOD "minimal.yaml", one, 1, err, sizeof err), 0);
    assert_int_equal(c.trainer_command.n, 1);
    assert_string_equal(c.trainer_command.v[0], "./run.sh");
    char *empty[] = {"trainer.command=[a, '']"};
    assert_int_equal(load_config(&c, GOOD "minimal.yaml", empty, 1, err, sizeof err), ZP_ECONFIG);
    assert_string_equal(err, "override 'trainer.command=[a, '']': trainer.command: item 1 is empty: "
                             "remove it or write what it should be");
}

/* dataset.augment.where: loader excludes every_key.yaml's cache.enabled: true;
 * augment_in_loader.yaml sets it instead. */
#define DIFFERS(key, type, field, def, lo, hi, help)                                               \
    if (memcmp(&a.field, &b.field, sizeof a.field) == 0 &&                                         \
        (strcmp(key, "dataset.augment.where") || memcmp(&l.field, &b.field, sizeof l.field) == 0)) \
        fail_msg("%s: every_key.yaml leaves it at its default", key);

static void full_fixture_sets_every_key(void **state)
{
    (void)state;
    /* so that the round trip below exercises every key with a value of its own */
    zp_config_t a, b, l;
    assert_int_equal(load_config(&a, GOOD "every_key.yaml", NULL, 0, err, sizeof err), 0);
    assert_int_equal(load_config(&b, GOOD "minimal.yaml", NULL, 0, err, sizeof err), 0);
    assert_int_equal(load_config(&l, GOOD "augment_in_loader.yaml", NULL, 0, err, sizeof err), 0);
    ZP_CONFIG_KEYS(DIFFERS)
}

/* ---- overrides --------------------------------------------------------------------------- */

static void overrides_apply_after_the_file(void **state)
{
    (void)state;
    char *ov[] = {"loader.workers=3", "trainer.model.hidden=[512,64]", "prefetch.shuffle=false",
                  "trainer.optimizer.lr=0.5", "trainer.backend=null"};
    zp_config_t c;
    assert_int_equal(load_config(&c, GOOD "every_key.yaml", ov, 5, err, sizeof err), 0);
    assert_int_equal(c.loader_workers, 3);
    assert_int_equal(c.hidden.n, 2);
    assert_int_equal(c.hidden.v[0], 512);
    assert_int_equal(c.hidden.v[1], 64);
    assert_false(c.shuffle);
    assert_true(c.lr == 0.5);
    assert_int_equal(c.backend, ZP_BACKEND_NULL);
    assert_int_equal(c.credit, 64); /* untouched keys keep the file's value */
}

static void overrides_alone_can_supply_the_required_key(void **state)
{
    (void)state;
    char *ov[] = {"dataset.source=idx"};
    zp_config_t c;
    assert_int_equal(load_config(&c, NULL, ov, 1, err, sizeof err), 0);
    assert_int_equal(c.dataset_source, ZP_SOURCE_IDX);
    assert_string_equal(c.run_name, "run");
    assert_string_equal(c.file, "");
}

static void one_mean_or_one_std_applies_to_every_channel(void **state)
{
    (void)state;
    char *ov1[] = {"dataset.source=synthetic", "dataset.mean=[0.5]", "dataset.std=[0.2, 0.3, 0.4]"};
    char *ov2[] = {"dataset.source=synthetic", "dataset.mean=[0.1, 0.2, 0.3]", "dataset.std=[0.5]"};
    char *ov3[] = {"dataset.source=synthetic", "dataset.mean=[0.1, 0.2]", "dataset.std=[0.5, 0.2, 0.1]"};
    zp_config_t c;
    assert_int_equal(load_config(&c, NULL, ov1, 3, err, sizeof err), 0);
    assert_int_equal(load_config(&c, NULL, ov2, 3, err, sizeof err), 0);
    assert_int_equal(load_config(&c, NULL, ov3, 3, err, sizeof err), ZP_ECONFIG);
    assert_string_equal(err, "override 'dataset.std=[0.5, 0.2, 0.1]': dataset.std: has 3 values "
                             "but dataset.mean has 2");
}

static void missing_required_key_without_a_file_names_the_command_line(void **state)
{
    (void)state;
    zp_config_t c;
    assert_int_equal(load_config(&c, NULL, NULL, 0, err, sizeof err), ZP_ECONFIG);
    assert_string_equal(err, "(command line):1:1: dataset.source: required key is missing");
}

typedef struct {
    const char *override;
    const char *err; /* exact, whole message */
} bad_override_t;

/* 3 x crop^2 values a sample: 2364 fits in a message, 2365 does not (and
 * every SAMPLES would then be refused as malformed: a run that hangs). */
static void image_crop_is_bounded_by_the_wire_limit(void **state)
{
    (void)state;
    char *ov[] = {"dataset.source=image_folder", "dataset.image.resize=0", "dataset.image.crop=2364"};
    zp_config_t cfg;
    assert_int_equal(load_config(&cfg, GOOD "minimal.yaml", ov, 3, err, sizeof err), 0);
    ov[2] = "dataset.image.crop=16384";
    assert_int_equal(load_config(&cfg, GOOD "minimal.yaml", ov, 3, err, sizeof err), ZP_ECONFIG);
    assert_string_equal(err, "override 'dataset.image.crop=16384': dataset.image.crop: 3 x 16384 x "
                             "16384 = 805306368 values a sample, more than a message carries "
                             "(ZP_MAX_ELEMS = 16777216): at most 2364");
    /* the crop of a source without images is not a sample size */
    ov[0] = "dataset.source=synthetic";
    assert_int_equal(load_config(&cfg, GOOD "minimal.yaml", ov, 3, err, sizeof err), 0);
}

static void rejects_bad_override(void **state)
{
    const bad_override_t *c = *state;
    char *ov[] = {(char *)c->override};
    zp_config_t cfg;
    assert_int_equal(load_config(&cfg, GOOD "minimal.yaml", ov, 1, err, sizeof err), ZP_ECONFIG);
    assert_string_equal(err, c->err);
}

#define OVR(test_name, ov, msg)                                                                    \
    {#test_name, rejects_bad_override, NULL, NULL, &(bad_override_t){ov, msg}}

static const struct CMUnitTest bad_overrides[] = {
    OVR(run_name_that_climbs_out_of_run_dir_is_rejected, "run.name=../elsewhere",
        "override 'run.name=../elsewhere': run.name: must be one folder name in run.dir: no '/', "
        "not starting with '.' (got '../elsewhere')"),
    OVR(run_name_that_is_the_parent_is_rejected, "run.name=..",
        "override 'run.name=..': run.name: must be one folder name in run.dir: no '/', not "
        "starting with '.' (got '..')"),
    OVR(run_name_with_a_slash_is_rejected, "run.name=a/b",
        "override 'run.name=a/b': run.name: must be one folder name in run.dir: no '/', not "
        "starting with '.' (got 'a/b')"),
    OVR(override_out_of_range_is_rejected, "loader.workers=0",
        "override 'loader.workers=0': loader.workers: must be 1..256 (got 0)"),
    OVR(override_of_an_unknown_key_suggests_the_close_spelling, "loader.wrkers=2",
        "override 'loader.wrkers=2': loader.wrkers: unknown key (did you mean loader.workers?)"),
    OVR(override_without_equals_is_rejected, "noequals",
        "override 'noequals': (override): expected KEY=VALUE"),
    OVR(override_with_an_empty_key_is_rejected, "=3",
        "override '=3': (override): expected KEY=VALUE"),
    OVR(override_with_no_value_is_rejected, "loader.workers=",
        "override 'loader.workers=': loader.workers: missing value"),
    OVR(override_with_a_bad_list_element_is_rejected, "trainer.model.hidden=[512,x]",
        "override 'trainer.model.hidden=[512,x]': trainer.model.hidden: expected a list of "
        "integers (got 'x')"),
    OVR(override_with_a_bad_enum_is_rejected, "dataset.source=s3",
        "override 'dataset.source=s3': dataset.source: must be one of idx/synthetic/image_folder/image_list/python/hdf5/npy (got 's3')"),
    OVR(override_of_a_section_is_an_unknown_key, "loader=3",
        "override 'loader=3': loader: unknown key"),

};

/* ---- round trip of zeus-pipe config ------------------------------------------------------ */

/* Zeroes what may differ without meaning: the file name and list slots past n. */
static void normalise(zp_config_t *c)
{
    memset(c->file, 0, sizeof c->file);
    memset(c->cache_default, 0, sizeof c->cache_default); /* how a path was chosen: not a key */
    memset(c->where, 0, sizeof c->where);                 /* where keys were set: neither */
    memset(c->overrides, 0, sizeof c->overrides);
    zp_ints_t *il[] = {&c->synth_shape, &c->hidden};
    for (int i = 0; i < 2; i++)
        memset(il[i]->v + il[i]->n, 0, sizeof(int64_t) * (size_t)(ZP_LIST_MAX - il[i]->n));
    zp_floats_t *fl[] = {&c->mean, &c->std};
    for (int i = 0; i < 2; i++)
        memset(fl[i]->v + fl[i]->n, 0, sizeof(double) * (size_t)(ZP_LIST_MAX - fl[i]->n));
}

/* Loads `path` with `ov`, prints it, loads the print as a run's config.yaml, and asserts both are the same. */
static void assert_round_trip(const char *path, char **ov, int n)
{
    zp_config_t a, b;
    assert_int_equal(load_config(&a, path, ov, n, err, sizeof err), 0);
    char tmp[] = "/tmp/zp-test-config-XXXXXX";
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    zp_config_print(&a, f);
    assert_int_equal(fclose(f), 0);
    int rc = zp_config_load_run(&b, tmp, err, sizeof err); /* as a run reads its copy */
    unlink(tmp);
    if (rc)
        fail_msg("printed config does not load: %s", err);
    normalise(&a);
    normalise(&b);
    /* field by field first, for a readable failure; then every byte */
    assert_string_equal(a.run_name, b.run_name);
    assert_string_equal(a.run_dir, b.run_dir);
    assert_string_equal(a.dataset_path, b.dataset_path);
    assert_int_equal(a.mean.n, b.mean.n);
    assert_int_equal(a.std.n, b.std.n);
    assert_int_equal(a.hidden.n, b.hidden.n);
    assert_true(a.lr == b.lr);
    assert_memory_equal(&a, &b, sizeof a);
}

static void printed_defaults_load_back_identically(void **state)
{
    (void)state;
    assert_round_trip(GOOD "minimal.yaml", NULL, 0);
}

static void printed_full_config_loads_back_identically(void **state)
{
    (void)state;
    assert_round_trip(GOOD "every_key.yaml", NULL, 0);
}

static void printed_config_with_overrides_loads_back_identically(void **state)
{
    (void)state;
    char *ov[] = {"trainer.model.hidden=[512,64,32]", "trainer.optimizer.lr=0.1",
                  "dataset.mean=[0.1,0.2,0.3]", "dataset.std=0.5", "run.name=tab\there",
                  "trainer.optimizer.weight_decay=1e-9"};
    assert_round_trip(GOOD "every_key.yaml", ov, 6);
}

static void printed_strings_with_control_characters_load_back_identically(void **state)
{
    (void)state;
    char *ov[] = {"dataset.train_images=\"line\\none\\ttab\\x01ctl \\\"q\\\" \\\\\"", "run.name=caf\u00e9"};
    zp_config_t c;
    assert_int_equal(load_config(&c, GOOD "minimal.yaml", ov, 2, err, sizeof err), 0);
    assert_string_equal(c.train_images, "line\none\ttab\x01" "ctl \"q\" \\");
    assert_string_equal(c.run_name, "caf\u00e9");
    assert_round_trip(GOOD "minimal.yaml", ov, 2);
}

static void printed_shipped_config_loads_back_identically(void **state)
{
    (void)state;
    assert_round_trip("../configs/fashion-mnist.yaml", NULL, 0);
}

/* A relative path written in a config file is put in the file's folder, as
 * the file's path names it; a KEY=VALUE or a default stays relative to the
 * working directory; a run's own config.yaml is read as it was written. */
static void relative_paths_in_a_file_are_put_in_its_folder(void **state)
{
    (void)state;
    char tmp[] = "/tmp/zp-config-XXXXXX", path[PATH_MAX], want[2 * PATH_MAX], home[PATH_MAX];
    assert_non_null(mkdtemp(tmp));
    assert_non_null(getcwd(home, sizeof home));
    snprintf(path, sizeof path, "%s/sub", tmp);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/sub/a.yaml", tmp);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("dataset:\n  source: synthetic\n  path: data\n  python:\n    path: [../src, /abs, .]\n"
          "    interpreter: ./venv/bin/python\ncache:\n  path: ./c\n", f);
    fclose(f);
    char *ov[] = {"run.dir=out/runs"};
    zp_config_t c;
    assert_int_equal(load_config(&c, path, ov, 1, err, sizeof err), 0);
    snprintf(want, sizeof want, "%s/sub/data", tmp);
    assert_string_equal(c.dataset_path, want);
    snprintf(want, sizeof want, "%s/sub/../src", tmp);
    assert_string_equal(c.py_path.v[0], want);
    assert_string_equal(c.py_path.v[1], "/abs");
    snprintf(want, sizeof want, "%s/sub/", tmp);
    assert_string_equal(c.py_path.v[2], want);
    snprintf(want, sizeof want, "%s/sub/venv/bin/python", tmp);
    assert_string_equal(c.py_interp, want);
    snprintf(want, sizeof want, "%s/sub/c", tmp);
    assert_string_equal(c.cache_path, want);
    assert_string_equal(c.run_dir, "out/runs"); /* an override: the working directory's */

    /* the run's copy, in another folder, read back as it was written */
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s/config.yaml", tmp);
    f = fopen(copy, "w");
    assert_non_null(f);
    zp_config_print(&c, f);
    fclose(f);
    zp_config_t back;
    assert_int_equal(zp_config_load_run(&back, copy, err, sizeof err), 0);
    assert_string_equal(back.dataset_path, c.dataset_path);
    assert_string_equal(back.run_dir, "out/runs");
    assert_string_equal(back.py_interp, c.py_interp);

    /* a config named from its own folder: the paths stay as written */
    assert_int_equal(chdir(tmp), 0);
    assert_int_equal(load_config(&c, "sub/a.yaml", NULL, 0, err, sizeof err), 0);
    assert_string_equal(c.dataset_path, "sub/data");
    assert_string_equal(c.cache_path, "sub/c");
    assert_string_equal(c.run_dir, "runs");
    assert_int_equal(chdir("sub"), 0);
    char *ov2[] = {"dataset.python.interpreter=python3.11"};
    assert_int_equal(load_config(&c, "a.yaml", ov2, 1, err, sizeof err), 0);
    assert_string_equal(c.dataset_path, "data");
    assert_string_equal(c.py_interp, "python3.11");
    assert_int_equal(chdir(home), 0);
    remove(copy);
    remove(path);
    snprintf(path, sizeof path, "%s/sub", tmp);
    rmdir(path);
    rmdir(tmp);
}

int main(void)
{
    const struct CMUnitTest others[] = {
        cmocka_unit_test(nonexistent_file_is_reported_with_its_path),
        cmocka_unit_test(defaults_fill_every_key_the_file_omits),
        cmocka_unit_test(relative_paths_in_a_file_are_put_in_its_folder),
        cmocka_unit_test(run_name_defaults_to_the_file_base_name_without_extension),
        cmocka_unit_test(run_name_drops_only_the_last_extension),
        cmocka_unit_test(run_name_in_the_file_wins_over_the_base_name),
        cmocka_unit_test(string_list_override_and_single_string),
        cmocka_unit_test(an_unset_cache_path_is_a_folder_per_dataset_where_users_keep_caches),
        cmocka_unit_test(every_key_of_a_full_file_is_parsed),
        cmocka_unit_test(python_source_needs_module_colon_callable_and_a_mapping_of_args),
        cmocka_unit_test(full_fixture_sets_every_key),
        cmocka_unit_test(overrides_apply_after_the_file),
        cmocka_unit_test(overrides_alone_can_supply_the_required_key),
        cmocka_unit_test(one_mean_or_one_std_applies_to_every_channel),
        cmocka_unit_test(image_crop_is_bounded_by_the_wire_limit),
        cmocka_unit_test(missing_required_key_without_a_file_names_the_command_line),
        cmocka_unit_test(printed_defaults_load_back_identically),
        cmocka_unit_test(printed_full_config_loads_back_identically),
        cmocka_unit_test(printed_config_with_overrides_loads_back_identically),
        cmocka_unit_test(printed_strings_with_control_characters_load_back_identically),
        cmocka_unit_test(printed_shipped_config_loads_back_identically),
    };
    int failed = 0;
    failed += cmocka_run_group_tests_name("config: malformed files", bad_files, NULL, NULL);
    failed += cmocka_run_group_tests_name("config: malformed overrides", bad_overrides, NULL, NULL);
    failed += cmocka_run_group_tests_name("config: loading and printing", others, NULL, NULL);
    return failed ? 1 : 0;
}

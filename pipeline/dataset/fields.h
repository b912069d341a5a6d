/* fields.h — a sample as a fixed list of named fields.
 *
 * Every sample of a split has the same fields, each with a name, an element
 * type and a fixed shape: (image, label) for the built-in sources, whatever
 * a Python Dataset's __getitem__ returns for `dataset.source: python`
 * ((x, y), {"image": ..., "mask": ..., "label": ...}).
 *
 * On the wire, in the cache and in a ring slot a sample is one record of
 * `record_bytes`: its fields one after the other, each at an offset aligned
 * to its element size, the record padded to a multiple of its largest
 * element size; a batch is n records back to back. So field f of sample i
 * lies at data + i * record_bytes + offset, and a batch's field is an array
 * of n elements whose stride is record_bytes (a multiple of every element
 * size). One field alone is its record, unpadded.
 * The built-in sources keep their int32 label beside the records, in the
 * batch's label column: that field's offset is ZP_FIELD_IN_LABELS.
 *
 * The list is written once per run into RUN/dataset/meta as lines
 *     fields K ITEM
 *     field NAME DTYPE NDIM D0 D1 ...
 * (ITEM: tuple or dict, how a Python source's items hold them) and read
 * back by every stage, the client library and the Python package. */
#ifndef ZP_FIELDS_H
#define ZP_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#define ZP_FIELDS_MAX 16
#define ZP_FIELD_DIMS 6
#define ZP_FIELD_NAME 32
#define ZP_FIELD_IN_LABELS SIZE_MAX /* offset of the built-in sources' label */

/* Element types, numbered as zeus_pipe.h's ZP_CLIENT_* (1 and 2 are also the
 * wire's ZP_DTYPE_F32 and ZP_DTYPE_U8). */
enum {
    ZP_FT_F32 = 1, ZP_FT_U8, ZP_FT_I8, ZP_FT_I16, ZP_FT_I32, ZP_FT_I64, ZP_FT_F16, ZP_FT_BF16,
    ZP_FT_F64, ZP_FT_COUNT
};
/* How a Python source's __getitem__ returns its fields. */
enum { ZP_ITEM_TUPLE, ZP_ITEM_DICT };

typedef struct {
    char name[ZP_FIELD_NAME]; /* [A-Za-z0-9_.-]+ */
    int dtype;                /* ZP_FT_* */
    int ndim;                 /* 0 (a scalar) .. ZP_FIELD_DIMS */
    int64_t shape[ZP_FIELD_DIMS];
    size_t bytes;  /* of one sample's field */
    size_t offset; /* in the record; ZP_FIELD_IN_LABELS for the label column */
} zp_field_t;

typedef struct {
    int n;
    int item; /* ZP_ITEM_* */
    zp_field_t f[ZP_FIELDS_MAX];
    size_t record_bytes; /* the record of the fields that have an offset */
} zp_fields_t;

/* "float32", "uint8", ... and back (0 for an unknown name); bytes of one. */
const char *zp_fields_type_name(int dtype);
int zp_fields_type_of(const char *name);
size_t zp_fields_type_size(int dtype);

/* Appends a field laid out after the record's last one (in_labels: the
 * label column instead). 0, or ZP_EDATA with a sentence in err: a bad or
 * repeated name, an unknown type, more than ZP_FIELDS_MAX fields or
 * ZP_FIELD_DIMS dimensions, a dimension below 1, or a record of more than
 * `max_bytes`. */
int zp_fields_add(zp_fields_t *fs, const char *name, int dtype, int ndim, const int64_t *shape,
                  int in_labels, size_t max_bytes, char *err, size_t len);

/* The built-in sources' fields: "image" (dtype: ZP_FT_F32 or ZP_FT_U8;
 * channels x height x width) in the record, "label" (int32) in the label
 * column. */
void zp_fields_builtin(zp_fields_t *fs, int dtype, const int64_t shape[3]);

/* The lines above (a final newline included) into buf; the length written,
 * or -1 when it did not fit. */
int zp_fields_format(const zp_fields_t *fs, char *buf, size_t len);

/* Reads those lines from `text` (from its "fields" line on; other lines
 * before it are skipped). 0; -ENOENT when text has no "fields" line;
 * ZP_EDATA with a sentence in err when they are malformed. */
int zp_fields_parse(zp_fields_t *fs, const char *text, size_t max_bytes, char *err, size_t len);

/* The field called `name`, or NULL. */
const zp_field_t *zp_fields_find(const zp_fields_t *fs, const char *name);

#endif

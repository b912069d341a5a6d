/* json.c — a msgpack object written as one line of JSON: strings escaped,
 * invalid UTF-8 replaced, non-finite numbers as null. */
#include "pipeline/base/json.h"

#include <math.h>
#include <string.h>

size_t zp_json_utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : c < 0xc2 ? 0 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : c < 0xf5 ? 4 : 0;
    if (!len || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) ||
        (c == 0xf4 && s[1] > 0x8f))
        return 0;
    return len;
}

/* Quoted and escaped; a byte that is no part of well-formed UTF-8 (a path
 * is bytes) becomes U+FFFD, so the output is always valid JSON. */
static void write_str(FILE *out, const char *s, uint32_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', out);
    for (uint32_t i = 0; i < n;) {
        unsigned char c = p[i];
        uint32_t len = (uint32_t)zp_json_utf8_len(p + i, n - i);
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else if (!len)
            fputs("\\ufffd", out);
        else
            fwrite(p + i, 1, len, out);
        i += len ? len : 1;
    }
    fputc('"', out);
}

static void write_obj(FILE *out, const msgpack_object *o, int depth)
{
    if (depth > 8) {
        fputs("null", out);
        return;
    }
    switch (o->type) {
    case MSGPACK_OBJECT_NIL: fputs("null", out); break;
    case MSGPACK_OBJECT_BOOLEAN: fputs(o->via.boolean ? "true" : "false", out); break;
    case MSGPACK_OBJECT_POSITIVE_INTEGER: fprintf(out, "%llu", (unsigned long long)o->via.u64); break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: fprintf(out, "%lld", (long long)o->via.i64); break;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        if (isfinite(o->via.f64))
            fprintf(out, "%.15g", o->via.f64);
        else
            fputs("null", out);
        break;
    case MSGPACK_OBJECT_STR: write_str(out, o->via.str.ptr, o->via.str.size); break;
    case MSGPACK_OBJECT_ARRAY:
        fputc('[', out);
        for (uint32_t i = 0; i < o->via.array.size; i++) {
            if (i)
                fputc(',', out);
            write_obj(out, &o->via.array.ptr[i], depth + 1);
        }
        fputc(']', out);
        break;
    case MSGPACK_OBJECT_MAP:
        fputc('{', out);
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            const msgpack_object_kv *kv = &o->via.map.ptr[i];
            if (i)
                fputc(',', out);
            if (kv->key.type == MSGPACK_OBJECT_STR)
                write_str(out, kv->key.via.str.ptr, kv->key.via.str.size);
            else
                fputs("\"?\"", out);
            fputc(':', out);
            write_obj(out, &kv->val, depth + 1);
        }
        fputc('}', out);
        break;
    default: fputs("null", out); break;
    }
}

void zp_json_write(FILE *out, const msgpack_object *o)
{
    write_obj(out, o, 0);
}

void zp_json_str(FILE *out, const char *s)
{
    write_str(out, s, (uint32_t)strlen(s));
}

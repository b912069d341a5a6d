/* json.h — writes a msgpack object as one line of JSON. */
#ifndef ZP_JSON_H
#define ZP_JSON_H

#include <msgpack.h>
#include <stdio.h>

/* Maps, arrays, strings, integers, floats (non-finite as null), booleans, nil.
 * Binary values become null. Nesting deeper than 8 becomes null. Strings as
 * zp_json_str writes them. */
void zp_json_write(FILE *out, const msgpack_object *o);
/* A C string as a JSON string: quoted, with quotes, backslashes and control
 * characters escaped and a byte that is not well-formed UTF-8 written as
 * U+FFFD. Every string a JSON output takes from a path, a peer or the user goes
 * through it; never a "%s" between quotes. */
void zp_json_str(FILE *out, const char *s);
/* The length of the well-formed UTF-8 sequence at s (n > 0 bytes left), or
 * 0: no overlong form, no surrogate, nothing above U+10FFFF. JSON's and
 * HTML's escapers (escape.h) both judge bytes by it. */
size_t zp_json_utf8_len(const unsigned char *s, size_t n);

#endif

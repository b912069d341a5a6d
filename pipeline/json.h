/* json.h — writes a msgpack object as one line of JSON. */
#ifndef ZP_JSON_H
#define ZP_JSON_H

#include <msgpack.h>
#include <stdio.h>

/* Maps, arrays, strings, integers, floats (non-finite as null), booleans, nil.
 * Binary values become null. Nesting deeper than 8 becomes null. */
void zp_json_write(FILE *out, const msgpack_object *o);
/* A C string as a JSON string, quoted and escaped. */
void zp_json_str(FILE *out, const char *s);

#endif

/* keys.h — CURVE key pairs in files, for loaders on other hosts.
 *
 *   NAME.pub   the public key: 40 Z85 characters and a newline; give it away
 *   NAME.key   "public <Z85>\nsecret <Z85>\n", mode 0600; keep it
 *
 * A run with transport.kind: tcp writes its own pair as RUN/server.pub and
 * RUN/server.key; only clients whose NAME.pub lies in transport.allowed_keys
 * are let in. */
#ifndef ZP_KEYS_H
#define ZP_KEYS_H

#include <stddef.h>
#include <stdint.h>

#define ZP_Z85_KEY 41 /* 40 characters and the terminating NUL */

/* Writes base.key and base.pub (a new pair); refuses to overwrite. */
int zp_keys_generate(const char *base, char *err, size_t errlen);
/* Reads NAME.key into pub and sec. */
int zp_keys_read_pair(const char *path, char pub[ZP_Z85_KEY], char sec[ZP_Z85_KEY], char *err,
                      size_t errlen);
/* Reads NAME.pub into pub. */
int zp_keys_read_public(const char *path, char pub[ZP_Z85_KEY], char *err, size_t errlen);

#endif

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

/* Writes base.key and base.pub (a new pair); refuses to overwrite. 0, or a
 * ZP_E* code / -errno with the reason in err (as for every function here). */
int zp_keys_generate(const char *base, char *err, size_t errlen);
/* Reads NAME.key into pub and sec. */
int zp_keys_read_pair(const char *path, char pub[ZP_Z85_KEY], char sec[ZP_Z85_KEY], char *err,
                      size_t errlen);
/* Reads NAME.pub into pub. */
int zp_keys_read_public(const char *path, char pub[ZP_Z85_KEY], char *err, size_t errlen);

/* A secret key file (NAME.key, ranks.key) that its owner's group or anyone
 * else may read or write is refused with -EACCES, err naming the `chmod 600`
 * to run. */

/* The Slurm job's rank keys, one pair per rank 1..world-1, written by rank 0
 * into its run directory:
 *
 *   ranks.key  "rank R public <Z85> secret <Z85>\n" a line each, mode 0600
 *   ranks.pub  "rank R <Z85>\n" a line each
 *
 * A rank connects with the pair of its own line; rank 0 lets each key in as
 * that rank and no other (pipeline/stage/zap.h). Writes base.key and base.pub;
 * refuses to overwrite. */
int zp_keys_generate_ranks(const char *base, int world, char *err, size_t errlen);
/* Reads rank `rank`'s pair from ranks.key; ZP_EINVAL when it has none. */
int zp_keys_read_rank(const char *path, int rank, char pub[ZP_Z85_KEY], char sec[ZP_Z85_KEY],
                      char *err, size_t errlen);
/* Reads rank `rank`'s public key from ranks.pub; ZP_EINVAL when it has none. */
int zp_keys_read_rank_public(const char *path, int rank, char pub[ZP_Z85_KEY], char *err,
                             size_t errlen);

#endif

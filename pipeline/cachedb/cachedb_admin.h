/* cachedb_admin.h — an LMDB cache seen from outside a run (`zeus-pipe cache`):
 * its databases, their entries and fingerprints, every value checked, one
 * database dropped. Works on the environment at a path alone, without a
 * config or a dataset (cachedb.h is the cache as a run sees it).
 *
 * Each function opens the environment, does its work in one transaction and
 * closes it again; none prints. On failure each returns non-zero with a
 * sentence in err that starts with the path: -ENOENT when PATH holds no LMDB
 * environment (no data.mdb), else LMDB's code (mdb_strerror names it). */
#ifndef ZP_CACHEDB_ADMIN_H
#define ZP_CACHEDB_ADMIN_H

#include <lmdb.h>
#include <stddef.h>
#include <stdint.h>

#define ZP_CACHEDB_DBS_MAX 64 /* named databases looked at; more are left out */

/* One named database of the environment. */
typedef struct {
    char name[96];          /* "fashion-mnist/train", or "meta" */
    size_t entries, bytes;  /* bytes: its branch, leaf and overflow pages */
    char fingerprint[2048]; /* as recorded in meta ("" when none) */
    int64_t samples;        /* the split's samples, from its fingerprint's "samples:" line (0: none) */
    size_t per_sample;      /* bytes / entries (0 when empty) */
    size_t projected;       /* per_sample x samples: the database's size once every sample is kept */
} zp_cachedb_db_t;

typedef struct {
    size_t map_bytes, used_bytes; /* the map's size; the pages in use */
    int n;                        /* databases in db[] */
    zp_cachedb_db_t db[ZP_CACHEDB_DBS_MAX];
} zp_cachedb_admin_stat_t;

/* Fills st with the map's use and each named database (in LMDB's order; one
 * whose stat cannot be read is left out). 0, or non-zero with err. */
int zp_cachedb_admin_stat(const char *path, zp_cachedb_admin_stat_t *st, char *err, size_t len);

/* Called by zp_cachedb_admin_verify for each bad value: the database, the key as a
 * sample index (0 when the key is not 4 bytes) and why it is bad. */
typedef void zp_cachedb_admin_bad_fn(const char *db, uint32_t key, const char *why, void *arg);

/* Checks every value of every database but "meta" (zp_cachedb_admin_check,
 * against the fingerprint recorded for its database), calls bad() for each
 * bad one (NULL: none), and counts the values read, the bad ones and, among
 * those, the foreign ones (written for another fingerprint). 0 when it could
 * read the environment (bad values or not), or non-zero with err. */
int zp_cachedb_admin_verify(const char *path, zp_cachedb_admin_bad_fn *bad, void *arg, int64_t *values,
                            int64_t *nbad, int64_t *foreign, char *err, size_t len);

/* Removes database `db` and its fingerprint, in one write transaction; its
 * entry count before in *entries. "meta" is refused (MDB_INCOMPATIBLE); a
 * database that does not exist is MDB_NOTFOUND ("no such database" in err).
 * Nothing is removed on failure. */
int zp_cachedb_admin_drop(const char *path, const char *db, size_t *entries, char *err, size_t len);

/* A stored value on its own, without a dataset to check it against: a 4-byte
 * key, the header's magic, version, dtype, key and payload size, the
 * checksum, and its fingerprint against `fp` (the XXH3-64 of its database's
 * fingerprint text; 0: not checked). NULL when it is good, else why not (a
 * static string; ZP_CACHE_FOREIGN for another fingerprint). */
const char *zp_cachedb_admin_check(const MDB_val *k, const MDB_val *v, uint64_t fp);

#endif

/* cachedb_admin.c — `zeus-pipe cache`'s work on an LMDB environment: stat,
 * verify, drop (cachedb_admin.h). */
#define _GNU_SOURCE
#include "pipeline/cachedb/cachedb_admin.h"
#include "pipeline/cachedb/cachedb.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

static int open_env(const char *path, int readonly, MDB_env **env, char *err, size_t len)
{
    struct stat st;
    char data[4096];
    snprintf(data, sizeof data, "%s/data.mdb", path);
    if (stat(data, &st)) {
        snprintf(err, len, "%s: no LMDB environment there", path);
        return -ENOENT;
    }
    int rc = mdb_env_create(env);
    if (!rc) {
        mdb_env_set_maxdbs(*env, 64);
        rc = mdb_env_open(*env, path, readonly ? MDB_RDONLY : 0, 0644);
    }
    if (rc) {
        snprintf(err, len, "%s: %s", path, mdb_strerror(rc));
        mdb_env_close(*env);
        *env = NULL;
    }
    return rc;
}

/* The environment at path, read-only, with a read transaction begun. */
static int open_read(const char *path, MDB_env **env, MDB_txn **txn, char *err, size_t len)
{
    int rc = open_env(path, 1, env, err, len);
    if (!rc && (rc = mdb_txn_begin(*env, NULL, MDB_RDONLY, txn))) {
        snprintf(err, len, "%s: %s", path, mdb_strerror(rc));
        mdb_env_close(*env);
        *env = NULL;
    }
    return rc;
}

/* The names of the named databases (keys of the main database). */
static int list_dbs(MDB_txn *txn, char names[][96], int max)
{
    MDB_dbi main;
    MDB_cursor *cur;
    int n = 0;
    if (mdb_dbi_open(txn, NULL, 0, &main) || mdb_cursor_open(txn, main, &cur))
        return 0;
    MDB_val k, v;
    for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); !rc && n < max;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
        if (k.mv_size < 96) {
            memcpy(names[n], k.mv_data, k.mv_size);
            names[n++][k.mv_size] = 0;
        }
    mdb_cursor_close(cur);
    return n;
}

static void fingerprint_of(MDB_txn *txn, const char *db, char *buf, size_t len)
{
    MDB_dbi meta;
    char key[128];
    snprintf(key, sizeof key, "fingerprint/%.100s", db);
    MDB_val k = {strlen(key), key}, v;
    buf[0] = 0;
    if (!mdb_dbi_open(txn, "meta", 0, &meta) && !mdb_get(txn, meta, &k, &v))
        snprintf(buf, len, "%.*s", (int)(v.mv_size < len ? v.mv_size : len - 1), (char *)v.mv_data);
}

int zp_cachedb_admin_stat(const char *path, zp_cachedb_admin_stat_t *out, char *err, size_t len)
{
    MDB_env *env;
    MDB_txn *txn;
    int rc = open_read(path, &env, &txn, err, len);
    if (rc)
        return rc;
    MDB_envinfo info;
    MDB_stat est;
    mdb_env_info(env, &info);
    mdb_env_stat(env, &est);
    char names[ZP_CACHEDB_DBS_MAX][96];
    int n = list_dbs(txn, names, ZP_CACHEDB_DBS_MAX);
    out->map_bytes = info.me_mapsize;
    out->used_bytes = (info.me_last_pgno + 1) * (size_t)est.ms_psize;
    out->n = 0;
    for (int i = 0; i < n; i++) {
        MDB_dbi dbi;
        MDB_stat st;
        if (mdb_dbi_open(txn, names[i], 0, &dbi) || mdb_stat(txn, dbi, &st))
            continue;
        zp_cachedb_db_t *d = &out->db[out->n++];
        memcpy(d->name, names[i], sizeof d->name);
        d->entries = st.ms_entries;
        d->bytes = (st.ms_branch_pages + st.ms_leaf_pages + st.ms_overflow_pages) * (size_t)st.ms_psize;
        fingerprint_of(txn, names[i], d->fingerprint, sizeof d->fingerprint);
        const char *line = strstr(d->fingerprint, "\nsamples: ");
        long long samples = 0;
        if (line && sscanf(line, "\nsamples: %lld", &samples) == 1 && samples > 0)
            d->samples = samples;
        d->per_sample = d->entries ? d->bytes / d->entries : 0;
        d->projected = d->per_sample * (size_t)d->samples;
    }
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return 0;
}

const char *zp_cachedb_admin_check(const MDB_val *k, const MDB_val *v, uint64_t fp)
{
    const uint8_t *p = v->mv_data;
    if (k->mv_size != 4)
        return "key is not a 4-byte sample index";
    if (v->mv_size < ZP_CACHE_HDR || memcmp(p, "ZPC1", 4))
        return "bad magic";
    if (p[4] != ZP_CACHE_VERSION)
        return "value schema of another zeus-pipe version (cache.on_mismatch=rebuild rebuilds it)";
    uint32_t u[6];
    memcpy(u, p + 8, sizeof u);
    const uint8_t *kb = k->mv_data;
    uint32_t index = (uint32_t)kb[0] << 24 | (uint32_t)kb[1] << 16 | (uint32_t)kb[2] << 8 | kb[3];
    if (u[4] != index)
        return "value belongs to another key";
    if (p[5] != ZP_DTYPE_F32 && p[5] != ZP_DTYPE_U8)
        return "unknown dtype";
    if (p[7] > ZP_CACHE_JPEG)
        return "unknown layout";
    if ((p[7] != ZP_CACHE_JPEG && (uint64_t)u[0] * u[1] * u[2] * zp_dtype_size(p[5]) != u[5]) ||
        v->mv_size != ZP_CACHE_HDR + (size_t)u[5])
        return "payload size disagrees with the shape";
    uint64_t h, has;
    memcpy(&h, p + 40, 8);
    if (zp_cachedb_sum(p, p + ZP_CACHE_HDR, u[5]) != h)
        return "checksum mismatch (header or payload)";
    memcpy(&has, p + 32, 8);
    if (fp && has != fp)
        return ZP_CACHE_FOREIGN;
    return NULL;
}

/* One database's values through zp_cachedb_admin_check, against the
 * fingerprint recorded for it (none: no value is foreign). */
static void verify_db(MDB_txn *txn, const char *name, zp_cachedb_admin_bad_fn *bad, void *arg,
                      int64_t *values, int64_t *nbad, int64_t *foreign)
{
    MDB_dbi dbi;
    MDB_cursor *cur;
    char text[8192];
    fingerprint_of(txn, name, text, sizeof text);
    uint64_t fp = text[0] ? XXH3_64bits(text, strlen(text)) : 0;
    if (mdb_dbi_open(txn, name, 0, &dbi) || mdb_cursor_open(txn, dbi, &cur))
        return;
    MDB_val k, v;
    for (int r = mdb_cursor_get(cur, &k, &v, MDB_FIRST); !r; r = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        ++*values;
        const char *why = zp_cachedb_admin_check(&k, &v, fp);
        if (!why)
            continue;
        ++*nbad;
        *foreign += !strcmp(why, ZP_CACHE_FOREIGN);
        const uint8_t *kb = k.mv_data;
        if (bad)
            bad(name, k.mv_size == 4 ? (uint32_t)kb[0] << 24 | (uint32_t)kb[1] << 16 |
                                           (uint32_t)kb[2] << 8 | kb[3]
                                     : 0,
                why, arg);
    }
    mdb_cursor_close(cur);
}

int zp_cachedb_admin_verify(const char *path, zp_cachedb_admin_bad_fn *bad, void *arg, int64_t *values,
                            int64_t *nbad, int64_t *foreign, char *err, size_t len)
{
    MDB_env *env;
    *values = *nbad = *foreign = 0;
    MDB_txn *txn;
    int rc = open_read(path, &env, &txn, err, len);
    if (rc)
        return rc;
    char names[ZP_CACHEDB_DBS_MAX][96];
    int n = list_dbs(txn, names, ZP_CACHEDB_DBS_MAX);
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], "meta"))
            verify_db(txn, names[i], bad, arg, values, nbad, foreign);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return 0;
}

int zp_cachedb_admin_drop(const char *path, const char *db, size_t *entries, char *err, size_t len)
{
    MDB_env *env;
    int rc = open_env(path, 0, &env, err, len);
    if (rc)
        return rc;
    MDB_txn *txn = NULL; /* mdb_txn_abort(NULL) does nothing */
    MDB_dbi dbi, meta;
    MDB_stat st = {0};
    char key[128];
    snprintf(key, sizeof key, "fingerprint/%.100s", db);
    MDB_val k = {strlen(key), key};
    rc = mdb_txn_begin(env, NULL, 0, &txn);
    if (!rc && !strcmp(db, "meta"))
        rc = MDB_INCOMPATIBLE;
    if (!rc)
        rc = mdb_dbi_open(txn, db, 0, &dbi);
    if (!rc) {
        mdb_stat(txn, dbi, &st);
        rc = mdb_drop(txn, dbi, 1);
    }
    if (!rc && !mdb_dbi_open(txn, "meta", 0, &meta))
        mdb_del(txn, meta, &k, NULL);
    rc = rc ? (mdb_txn_abort(txn), rc) : mdb_txn_commit(txn);
    mdb_env_close(env);
    if (rc)
        snprintf(err, len, "%s: cannot drop %s: %s", path, db,
                 rc == MDB_NOTFOUND ? "no such database" : mdb_strerror(rc));
    *entries = st.ms_entries;
    return rc;
}

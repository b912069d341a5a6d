/* cmd_cache.c — `zeus-pipe cache stat|verify|drop PATH [DB]`: an LMDB cache
 * seen from outside a run. Works on the environment alone, without a config. */
#define _GNU_SOURCE
#include "pipeline/cachedb.h"
#include "pipeline/cli/cmd.h"
#include "pipeline/json.h"
#include "pipeline/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int usage(FILE *out, int status)
{
    fprintf(out, "usage: zeus-pipe cache stat PATH [--json]   databases, entries, bytes, fingerprints, map use\n"
                 "       zeus-pipe cache verify PATH          check every value's header and checksum\n"
                 "       zeus-pipe cache drop PATH DB         remove one database (e.g. fashion-mnist/test)\n");
    return status;
}

static int open_env(const char *path, int readonly, MDB_env **env)
{
    struct stat st;
    char data[4096];
    snprintf(data, sizeof data, "%s/data.mdb", path);
    if (stat(data, &st)) {
        fprintf(stderr, "zeus-pipe: %s: no LMDB environment there\n", path);
        return 2;
    }
    int rc = mdb_env_create(env);
    if (!rc) {
        mdb_env_set_maxdbs(*env, 64);
        rc = mdb_env_open(*env, path, readonly ? MDB_RDONLY : 0, 0644);
    }
    if (rc) {
        fprintf(stderr, "zeus-pipe: %s: %s\n", path, mdb_strerror(rc));
        mdb_env_close(*env);
        return 1;
    }
    return 0;
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

static int cache_stat(const char *path, int json)
{
    MDB_env *env;
    int rc = open_env(path, 1, &env);
    if (rc)
        return rc;
    MDB_txn *txn;
    MDB_envinfo info;
    MDB_stat est;
    mdb_env_info(env, &info);
    mdb_env_stat(env, &est);
    if ((rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn))) {
        fprintf(stderr, "zeus-pipe: %s: %s\n", path, mdb_strerror(rc));
        mdb_env_close(env);
        return 1;
    }
    char names[64][96], fp[2048];
    int n = list_dbs(txn, names, 64);
    size_t used = (info.me_last_pgno + 1) * (size_t)est.ms_psize;
    if (json) {
        printf("{\"path\":");
        zp_json_str(stdout, path);
        printf(",\"map_bytes\":%zu,\"used_bytes\":%zu,\"databases\":[", info.me_mapsize, used);
    } else
        printf("%s: map %.1f MiB, %.1f MiB used (%.0f%%)\n", path, info.me_mapsize / 1048576.0,
               used / 1048576.0, 100.0 * used / (double)info.me_mapsize);
    for (int i = 0, first = 1; i < n; i++) {
        MDB_dbi dbi;
        MDB_stat st;
        if (mdb_dbi_open(txn, names[i], 0, &dbi) || mdb_stat(txn, dbi, &st))
            continue;
        size_t bytes = (st.ms_branch_pages + st.ms_leaf_pages + st.ms_overflow_pages) * (size_t)st.ms_psize;
        fingerprint_of(txn, names[i], fp, sizeof fp);
        if (json) {
            printf("%s{\"name\":", first ? "" : ",");
            zp_json_str(stdout, names[i]);
            printf(",\"entries\":%zu,\"bytes\":%zu,\"fingerprint\":", st.ms_entries, bytes);
            zp_json_str(stdout, fp);
            printf("}");
            first = 0;
        } else {
            printf("  %-28s %10zu entries %10.1f MiB\n", names[i], st.ms_entries, bytes / 1048576.0);
            for (char *line = strtok(fp, "\n"); line; line = strtok(NULL, "\n"))
                printf("      %s\n", line);
        }
    }
    if (json)
        printf("]}\n");
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return 0;
}

/* A stored value on its own: header consistent, key and checksum right. */
static const char *check_value(const MDB_val *k, const MDB_val *v)
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
    if ((uint64_t)u[0] * u[1] * u[2] * zp_dtype_size(p[5]) != u[5] ||
        v->mv_size != ZP_CACHE_HDR + (size_t)u[5])
        return "payload size disagrees with the shape";
    uint64_t h;
    memcpy(&h, p + 32, 8);
    if (zp_cache_sum(p, p + ZP_CACHE_HDR, u[5]) != h)
        return "checksum mismatch (header or payload)";
    return NULL;
}

static int cache_verify(const char *path)
{
    MDB_env *env;
    int rc = open_env(path, 1, &env);
    if (rc)
        return rc;
    MDB_txn *txn;
    if ((rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn))) {
        mdb_env_close(env);
        return 1;
    }
    char names[64][96];
    int n = list_dbs(txn, names, 64);
    int64_t values = 0, bad = 0;
    for (int i = 0; i < n; i++) {
        MDB_dbi dbi;
        MDB_cursor *cur;
        if (!strcmp(names[i], "meta") || mdb_dbi_open(txn, names[i], 0, &dbi) ||
            mdb_cursor_open(txn, dbi, &cur))
            continue;
        MDB_val k, v;
        for (int r = mdb_cursor_get(cur, &k, &v, MDB_FIRST); !r; r = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
            values++;
            const char *why = check_value(&k, &v);
            if (why && bad++ < 10) {
                const uint8_t *kb = k.mv_data;
                printf("%s key %u: %s\n", names[i],
                       k.mv_size == 4 ? (uint32_t)kb[0] << 24 | (uint32_t)kb[1] << 16 | (uint32_t)kb[2] << 8 | kb[3] : 0, why);
            }
        }
        mdb_cursor_close(cur);
    }
    mdb_txn_abort(txn);
    mdb_env_close(env);
    printf("%s: %lld values checked, %lld bad\n", path, (long long)values, (long long)bad);
    return bad ? 1 : 0;
}

static int cache_drop(const char *path, const char *db)
{
    MDB_env *env;
    int rc = open_env(path, 0, &env);
    if (rc)
        return rc;
    MDB_txn *txn;
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
    if (rc) {
        fprintf(stderr, "zeus-pipe: %s: cannot drop %s: %s\n", path, db,
                rc == MDB_NOTFOUND ? "no such database" : mdb_strerror(rc));
        return 1;
    }
    printf("dropped %s (%zu entries) from %s\n", db, st.ms_entries, path);
    return 0;
}

int cmd_cache(int argc, char **argv)
{
    if (zp_wants_help(argc, argv))
        return usage(stdout, 0);
    if (argc >= 3 && !strcmp(argv[1], "stat") && argc <= 4)
        return cache_stat(argv[2], argc == 4 && !strcmp(argv[3], "--json"));
    if (argc == 3 && !strcmp(argv[1], "verify"))
        return cache_verify(argv[2]);
    if (argc == 4 && !strcmp(argv[1], "drop"))
        return cache_drop(argv[2], argv[3]);
    return usage(stderr, 2);
}

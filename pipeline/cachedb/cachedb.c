/* cachedb.c — the LMDB cache as every process sees it: opening the environment
 * and its databases, the fingerprint check, the value layout and its checksums,
 * which samples are present. */
#define _GNU_SOURCE
#include "pipeline/cachedb/cachedb.h"
#include "pipeline/source/source.h"
#include "pipeline/dataset/augment_field.h"
#include "pipeline/image/augment.h"
#include "pipeline/base/files.h"
#include "pipeline/base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <sys/sysinfo.h>
#include <xxhash.h>
#if defined(ZP_HAVE_XXH_DISPATCH) && (defined(__x86_64__) || defined(__i386__))
/* A value's checksum (every cache hit's, CMakeLists.txt's ZP_HAVE_XXH_DISPATCH):
 * libxxhash's x86 build picks the widest vector unit at run time (AVX2 or
 * AVX-512: 85 ns for 3 KiB, against 180 ns for its default SSE2). It returns
 * with the vector registers' upper halves in use, and SSE code after it pays
 * for that on every instruction until they are cleared: the crop's resample
 * ran 2.5 times slower after a whole image's checksum. */
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>

__attribute__((target("avx"))) static void clear_upper(void) { __builtin_ia32_vzeroupper(); }

static uint64_t value_sum(const void *data, size_t bytes, uint64_t seed)
{
    uint64_t h = XXH3_64bits_withSeed_dispatch(data, bytes, seed);
    if (__builtin_cpu_supports("avx")) /* also checks that the OS keeps AVX state */
        clear_upper();
    return h;
}
#else
static uint64_t value_sum(const void *data, size_t bytes, uint64_t seed)
{
    return XXH3_64bits_withSeed(data, bytes, seed);
}
#endif

#define MIB (1024ull * 1024)

static int lmdb_fail(char *err, size_t len, const char *path, const char *what, int rc)
{
    snprintf(err, len, "%s: %s: %s", path, what, mdb_strerror(rc));
    return rc;
}

void zp_cachedb_willneed(zp_cachedb_t *c)
{
    mdb_filehandle_t fd;
    MDB_envinfo info;
    MDB_stat st;
    struct sysinfo si;
    if (mdb_env_get_fd(c->env, &fd) || mdb_env_info(c->env, &info) || mdb_env_stat(c->env, &st) ||
        sysinfo(&si))
        return;
    off_t used = (off_t)(info.me_last_pgno + 1) * st.ms_psize;
    if ((double)used < 0.5 * (double)si.freeram * si.mem_unit)
        posix_fadvise(fd, 0, used, POSIX_FADV_WILLNEED);
}

int zp_cachedb_reader_check(zp_cachedb_t *c)
{
    int dead = 0;
    int rc = mdb_reader_check(c->env, &dead);
    if (rc)
        zp_warn("%s: cannot check the reader table: %s", c->path, mdb_strerror(rc));
    else if (dead)
        zp_info("%s: freed %d reader slot(s) of dead processes", c->path, dead);
    return rc ? 0 : dead;
}

/* Another process grew the map past ours: take its size (no transaction of
 * this process may be open). */
static int adopt_map(zp_cachedb_t *c)
{
    MDB_envinfo info;
    int rc = mdb_env_set_mapsize(c->env, 0);
    if (rc || (rc = mdb_env_info(c->env, &info)))
        return rc;
    if (info.me_mapsize != c->map_bytes)
        zp_info("%s: the map was grown by another process; now %zu MiB", c->path,
                (size_t)info.me_mapsize >> 20);
    c->map_bytes = info.me_mapsize;
    return 0;
}

/* Begins a transaction; adopts a map another process grew, and frees the
 * reader slots of dead processes when the table is full. */
static int begin(zp_cachedb_t *c, unsigned flags, MDB_txn **txn)
{
    int rc = mdb_txn_begin(c->env, NULL, flags, txn);
    for (int tries = 0; rc && tries < 2; tries++) {
        if (rc == MDB_MAP_RESIZED && !adopt_map(c))
            rc = mdb_txn_begin(c->env, NULL, flags, txn);
        else if (rc == MDB_READERS_FULL && zp_cachedb_reader_check(c) > 0)
            rc = mdb_txn_begin(c->env, NULL, flags, txn);
        else
            break;
    }
    if (rc)
        *txn = NULL;
    return rc;
}

int zp_cachedb_read_begin(zp_cachedb_t *c, MDB_txn **txn) { return begin(c, MDB_RDONLY, txn); }

int zp_cachedb_write_begin(zp_cachedb_t *c, MDB_txn **txn) { return begin(c, 0, txn); }

static int open_dbs(zp_cachedb_t *c, char *err, size_t len)
{
    MDB_txn *txn;
    int rc = c->readonly ? zp_cachedb_read_begin(c, &txn) : zp_cachedb_write_begin(c, &txn);
    if (rc == MDB_READERS_FULL)
        return lmdb_fail(err, len, c->path, "every reader slot is taken by a live process "
                         "(mdb_stat -r lists them)", rc);
    if (rc)
        return lmdb_fail(err, len, c->path, "begin", rc);
    unsigned flags = c->readonly ? 0 : MDB_CREATE;
    rc = mdb_dbi_open(txn, "meta", flags, &c->meta);
    for (int s = 0; !rc && s < ZP_SPLITS; s++)
        rc = mdb_dbi_open(txn, c->name[s], flags, &c->dbi[s]);
    if (rc) {
        mdb_txn_abort(txn);
        return lmdb_fail(err, len, c->path, "open databases", rc);
    }
    rc = mdb_txn_commit(txn);
    return rc ? lmdb_fail(err, len, c->path, "commit", rc) : 0;
}

int zp_cachedb_open(zp_cachedb_t *c, const zp_config_t *cfg, const zp_dataset_meta_t *m,
                    int readonly, char *err, size_t len)
{
    (void)m;
    memset(c, 0, sizeof *c);
    c->readonly = readonly;
    c->max_bytes = (size_t)cfg->cache_max_bytes;
    snprintf(c->path, sizeof c->path, "%s", cfg->cache_path);
    char ds[96];
    zp_source_ops(cfg->dataset_source)->dataset_name(cfg, ds, sizeof ds);
    for (int s = 0; s < ZP_SPLITS; s++)
        snprintf(c->name[s], sizeof c->name[s], "%.80s/%s", ds, zp_dataset_split_name(s));
    int made = readonly ? 0 : zp_files_mkdirs(c->path, 0755);
    if (made) {
        snprintf(err, len, "%s: cannot create: %s", c->path, strerror(-made));
        return made;
    }
    int rc = mdb_env_create(&c->env);
    if (rc)
        return lmdb_fail(err, len, c->path, "mdb_env_create", rc);
    mdb_env_set_maxdbs(c->env, 64);
    mdb_env_set_maxreaders(c->env, 512);
    if (!readonly) {
        /* Start small and grow on demand up to cache.max_bytes. */
        char data[300];
        struct stat st;
        snprintf(data, sizeof data, "%s/data.mdb", c->path);
        size_t used = stat(data, &st) == 0 ? (size_t)st.st_size : 0;
        c->map_bytes = used + 64 * MIB;
        if (c->map_bytes > c->max_bytes)
            c->map_bytes = used > c->max_bytes ? used : c->max_bytes;
        mdb_env_set_mapsize(c->env, c->map_bytes);
    }
    rc = mdb_env_open(c->env, c->path, readonly ? MDB_RDONLY | MDB_NORDAHEAD : MDB_NORDAHEAD, 0644);
    if (rc) {
        lmdb_fail(err, len, c->path, "mdb_env_open", rc);
        zp_cachedb_close(c);
        return rc;
    }
    MDB_envinfo info;
    mdb_env_info(c->env, &info);
    c->map_bytes = info.me_mapsize;
    zp_cachedb_reader_check(c); /* slots of killed processes pin pages and fill the table */
    if ((rc = open_dbs(c, err, len)))
        zp_cachedb_close(c);
    return rc;
}

void zp_cachedb_close(zp_cachedb_t *c)
{
    if (c->env)
        mdb_env_close(c->env);
    c->env = NULL;
}

void zp_cachedb_fingerprint(const zp_config_t *cfg, const zp_dataset_meta_t *m, int split,
                            char *buf, size_t len)
{
    int u8 = m->dtype == ZP_DTYPE_U8;
    snprintf(buf, len, "value schema: %d (%s, XXH3-64 of header and payload)\n", ZP_CACHE_VERSION,
             u8 ? "uint8" : "float32");
    size_t n = strlen(buf);
    if (zp_source_ops(cfg->dataset_source)->fingerprint(cfg, m, split, buf + n, len - n))
        return; /* the source's lines say all that is kept */
    n = strlen(buf);
    if (split == ZP_SPLIT_TRAIN && zp_augment_whole(cfg)) { /* the crop is made at assembly */
        n += (size_t)snprintf(buf + n, len - n, "kept: whole images, longer side at most %lld "
                              "(Pillow bilinear), %s", (long long)cfg->image_cache_side,
                              cfg->cache_encoding == ZP_ENC_JPEG ? "jpeg" : "raw RGB");
        if (cfg->cache_encoding == ZP_ENC_JPEG)
            n += (size_t)snprintf(buf + n, len - n, " quality %lld", (long long)cfg->jpeg_quality);
        n += (size_t)snprintf(buf + n, len - n, "\n");
    }
    n += (size_t)snprintf(buf + n, len - n, "samples: %lld of %lldx%lldx%lld\n",
                          (long long)m->n[split], (long long)m->shape[0], (long long)m->shape[1],
                          (long long)m->shape[2]);
    if (u8) { /* the trainer normalises: mean and std do not change what is kept */
        snprintf(buf + n, len - n, "transform: none (uint8 pixels)\n");
        return;
    }
    n += (size_t)snprintf(buf + n, len - n, "transform: normalize(mean=[");
    for (int i = 0; i < cfg->mean.n; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%.17g", i ? ", " : "", cfg->mean.v[i]);
    n += (size_t)snprintf(buf + n, len - n, "], std=[");
    for (int i = 0; i < cfg->std.n; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%.17g", i ? ", " : "", cfg->std.v[i]);
    snprintf(buf + n, len - n, "]) to float32\n");
}

/* The first line where two fingerprints differ, as "was: X; now: Y". */
static void describe_change(const char *old, const char *now, char *buf, size_t len)
{
    while (*old || *now) {
        size_t a = strcspn(old, "\n"), b = strcspn(now, "\n");
        if (a != b || memcmp(old, now, a)) {
            snprintf(buf, len, "was \"%.*s\", now \"%.*s\"", (int)(a > 200 ? 200 : a), old,
                     (int)(b > 200 ? 200 : b), now);
            return;
        }
        old += a + (old[a] == '\n');
        now += b + (now[b] == '\n');
    }
    snprintf(buf, len, "no difference");
}

/* The sentence for a split that this run would change while `busy` (the
 * holder of the writers' lock) writes to it. */
static int refuse_busy(const zp_cachedb_t *c, int s, const char *what, const char *busy, char *err,
                       size_t len)
{
    snprintf(err, len, "%s: cache %s %s, and %s: a run cannot rebuild or start it for another "
             "dataset while one writes to it; wait for that run to end, or give this one another "
             "cache.path", c->path, c->name[s], what, busy);
    return ZP_ECONFIG;
}

static int check_split(zp_cachedb_t *c, MDB_txn *txn, const zp_config_t *cfg,
                       const zp_dataset_meta_t *m, int s, const char *busy, char *err, size_t len)
{
    char fp[8192], key[128];
    zp_cachedb_fingerprint(cfg, m, s, fp, sizeof fp);
    snprintf(key, sizeof key, "fingerprint/%s", c->name[s]);
    MDB_val k = {strlen(key), key}, v;
    int rc = mdb_get(txn, c->meta, &k, &v);
    if (rc == 0 && (v.mv_size != strlen(fp) || memcmp(v.mv_data, fp, v.mv_size))) {
        char old[8192], what[600];
        snprintf(old, sizeof old, "%.*s", (int)(v.mv_size < 8191 ? v.mv_size : 8191),
                 (const char *)v.mv_data);
        describe_change(old, fp, what, sizeof what);
        if (cfg->on_mismatch != ZP_MISMATCH_REBUILD) {
            snprintf(err, len,
                     "%s: cache %s was built from another dataset or transform: %s\n"
                     "  rebuild it with cache.on_mismatch=rebuild, or use another cache.path",
                     c->path, c->name[s], what);
            return ZP_ECONFIG;
        }
        if (busy) {
            char was[700];
            snprintf(was, sizeof was, "was built from another dataset or transform (%s)", what);
            return refuse_busy(c, s, was, busy, err, len);
        }
        fprintf(stderr, "zeus-pipe: %s: rebuilding %s (%s)\n", c->path, c->name[s], what);
        if ((rc = mdb_drop(txn, c->dbi[s], 0)))
            return lmdb_fail(err, len, c->path, "empty the database", rc);
    } else if (rc == 0) {
        return 0;
    } else if (rc != MDB_NOTFOUND) {
        return lmdb_fail(err, len, c->path, "read the fingerprint", rc);
    } else if (busy) {
        return refuse_busy(c, s, "has no fingerprint yet", busy, err, len);
    }
    v.mv_size = strlen(fp);
    v.mv_data = fp;
    rc = mdb_put(txn, c->meta, &k, &v, 0);
    return rc ? lmdb_fail(err, len, c->path, "write the fingerprint", rc) : 0;
}

int zp_cachedb_holds(zp_cachedb_t *c, const zp_config_t *cfg, const zp_dataset_meta_t *m)
{
    MDB_txn *txn;
    if (zp_cachedb_read_begin(c, &txn))
        return 0;
    int same = 1;
    for (int s = 0; same && s < ZP_SPLITS; s++) {
        char fp[8192], key[128];
        zp_cachedb_fingerprint(cfg, m, s, fp, sizeof fp);
        snprintf(key, sizeof key, "fingerprint/%s", c->name[s]);
        MDB_val k = {strlen(key), key}, v;
        same = !mdb_get(txn, c->meta, &k, &v) && v.mv_size == strlen(fp) &&
               !memcmp(v.mv_data, fp, v.mv_size);
    }
    mdb_txn_abort(txn);
    return same;
}

int zp_cachedb_check(zp_cachedb_t *c, const zp_config_t *cfg, const zp_dataset_meta_t *m,
                     const char *busy, char *err, size_t len)
{
    MDB_txn *txn;
    int rc = zp_cachedb_write_begin(c, &txn);
    if (rc)
        return lmdb_fail(err, len, c->path, "begin", rc);
    for (int s = 0; !rc && s < ZP_SPLITS; s++)
        rc = check_split(c, txn, cfg, m, s, busy, err, len);
    if (rc) {
        mdb_txn_abort(txn);
        return rc;
    }
    rc = mdb_txn_commit(txn);
    return rc ? lmdb_fail(err, len, c->path, "commit", rc) : 0;
}

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); } /* little-endian hosts */

/* The header's fields after the shape, and its checksum. */
static void finish_header(uint8_t *hdr, uint64_t fp, uint32_t index, int32_t label,
                          const void *payload, size_t bytes)
{
    memcpy(hdr + 20, &label, 4);
    put_u32(hdr + 24, index);
    put_u32(hdr + 28, (uint32_t)bytes);
    memcpy(hdr + 32, &fp, 8);
    uint64_t sum = zp_cachedb_sum(hdr, payload, bytes);
    memcpy(hdr + 40, &sum, 8);
}

void zp_cachedb_header(uint8_t *hdr, const zp_dataset_meta_t *m, uint64_t fp, uint32_t index,
                       int32_t label, const void *payload, size_t bytes)
{
    memcpy(hdr, "ZPC1", 4);
    hdr[4] = ZP_CACHE_VERSION, hdr[5] = (uint8_t)m->dtype, hdr[6] = 3, hdr[7] = 0;
    for (int i = 0; i < 3; i++)
        put_u32(hdr + 8 + 4 * i, (uint32_t)m->shape[i]);
    finish_header(hdr, fp, index, label, payload, bytes);
}

void zp_cachedb_whole_header(uint8_t *hdr, uint64_t fp, int layout, uint32_t index, int32_t label,
                             int h, int w, const void *payload, size_t bytes)
{
    memcpy(hdr, "ZPC1", 4);
    hdr[4] = ZP_CACHE_VERSION, hdr[5] = ZP_DTYPE_U8, hdr[6] = 3, hdr[7] = (uint8_t)layout;
    put_u32(hdr + 8, 3);
    put_u32(hdr + 12, (uint32_t)h);
    put_u32(hdr + 16, (uint32_t)w);
    finish_header(hdr, fp, index, label, payload, bytes);
}

/* 1 when the value carries fingerprint fp. */
static int of_fp(const uint8_t *p, uint64_t fp)
{
    uint64_t has;
    memcpy(&has, p + 32, 8);
    return has == fp;
}

int zp_cachedb_check_whole(const MDB_val *v, const zp_dataset_meta_t *m, uint64_t fp, int64_t side,
                           uint32_t index, int32_t *label, zp_cache_whole_t *out, const char **why)
{
    const uint8_t *p = v->mv_data;
    uint32_t u[6];
    uint64_t sum;
    if (v->mv_size < ZP_CACHE_HDR)
        return *why = "value shorter than its header", ZP_EDATA;
    memcpy(u, p + 8, sizeof u);
    if (memcmp(p, "ZPC1", 4) || p[4] != ZP_CACHE_VERSION || p[5] != ZP_DTYPE_U8 || p[6] != 3)
        return *why = "bad magic, version or dtype", ZP_EDATA;
    if (p[7] != ZP_CACHE_RAW && p[7] != ZP_CACHE_JPEG)
        return *why = "a sample where a whole image is kept", ZP_EDATA;
    if (u[0] != 3 || u[1] < 1 || u[1] > side || u[2] < 1 || u[2] > side)
        return *why = "image size outside 1..dataset.image.cache_side", ZP_EDATA;
    if (v->mv_size != ZP_CACHE_HDR + (size_t)u[5] ||
        (p[7] == ZP_CACHE_RAW && (uint64_t)u[1] * u[2] * 3 != u[5]))
        return *why = "value has the wrong size", ZP_EDATA;
    if (u[4] != index)
        return *why = "value belongs to another key", ZP_EDATA;
    if (!of_fp(p, fp))
        return *why = ZP_CACHE_FOREIGN, ZP_EDATA;
    memcpy(label, p + 20, 4);
    if (*label < 0 || *label >= m->classes)
        return *why = "label outside the dataset's classes", ZP_EDATA;
    memcpy(&sum, p + 40, 8);
    if (zp_cachedb_sum(p, p + ZP_CACHE_HDR, u[5]) != sum)
        return *why = "checksum mismatch (header or payload)", ZP_EDATA;
    *out = (zp_cache_whole_t){p[7], (int)u[1], (int)u[2], p + ZP_CACHE_HDR, u[5]};
    return 0;
}

uint64_t zp_cachedb_sum(const uint8_t *hdr, const void *payload, size_t bytes)
{
    return value_sum(payload, bytes, XXH3_64bits(hdr, 40));
}

int zp_cachedb_check_value(const MDB_val *v, const zp_dataset_meta_t *m, uint64_t fp,
                           uint32_t index, int32_t *label, const uint8_t **payload,
                           const char **why)
{
    uint64_t sum;
    int rc = zp_cachedb_check_header(v, m, fp, index, label, payload, &sum, why);
    if (!rc && zp_cachedb_sum(v->mv_data, *payload, m->sample_bytes) != sum)
        return *why = "checksum mismatch (header or payload)", ZP_EDATA;
    return rc;
}

int zp_cachedb_check_header(const MDB_val *v, const zp_dataset_meta_t *m, uint64_t fp,
                            uint32_t index, int32_t *label, const uint8_t **payload, uint64_t *sum,
                            const char **why)
{
    const uint8_t *p = v->mv_data;
    size_t bytes = m->sample_bytes;
    uint32_t u[6];
    if (v->mv_size != ZP_CACHE_HDR + bytes)
        return *why = "value has the wrong size", ZP_EDATA;
    memcpy(u, p + 8, sizeof u);
    if (memcmp(p, "ZPC1", 4) || p[4] != ZP_CACHE_VERSION || p[5] != m->dtype || p[6] != 3)
        return *why = "bad magic, version or dtype", ZP_EDATA;
    if (p[7] != ZP_CACHE_SAMPLE)
        return *why = "a whole image where a sample is kept", ZP_EDATA;
    if (u[0] != m->shape[0] || u[1] != m->shape[1] || u[2] != m->shape[2] || u[5] != bytes)
        return *why = "shape differs from the dataset's", ZP_EDATA;
    if (u[4] != index)
        return *why = "value belongs to another key", ZP_EDATA;
    if (!of_fp(p, fp))
        return *why = ZP_CACHE_FOREIGN, ZP_EDATA;
    memcpy(sum, p + 40, 8);
    memcpy(label, p + 20, 4);
    if (*label < 0 || *label >= m->classes)
        return *why = "label outside the dataset's classes", ZP_EDATA;
    *payload = p + ZP_CACHE_HDR;
    return 0;
}

int64_t zp_cachedb_present(zp_cachedb_t *c, int split, int64_t n, uint8_t *present)
{
    memset(present, 0, (size_t)(n + 7) / 8);
    MDB_txn *txn;
    MDB_cursor *cur;
    if ((c->error = zp_cachedb_read_begin(c, &txn)))
        return 0;
    int64_t count = 0;
    if ((c->error = mdb_cursor_open(txn, c->dbi[split], &cur)) == 0) {
        MDB_val k, v;
        int rc;
        for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
             rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
            if (k.mv_size != 4)
                continue;
            const uint8_t *b = k.mv_data;
            uint32_t i = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
            if (i < n) {
                present[i >> 3] |= (uint8_t)(1u << (i & 7));
                count++;
            }
        }
        c->error = rc == MDB_NOTFOUND ? 0 : rc;
        mdb_cursor_close(cur);
    }
    mdb_txn_abort(txn);
    return count;
}

uint64_t zp_cachedb_value_fp(const zp_config_t *cfg, const zp_dataset_meta_t *m, int split)
{
    char text[8192];
    zp_cachedb_fingerprint(cfg, m, split, text, sizeof text);
    return XXH3_64bits(text, strlen(text));
}

uint64_t zp_cachedb_fingerprint_hash(const zp_config_t *cfg, const zp_dataset_meta_t *m)
{
    char text[8192];
    uint64_t h = XXH3_64bits(&m->dtype, sizeof m->dtype);
    for (int split = 0; split < ZP_SPLITS; split++) {
        zp_cachedb_fingerprint(cfg, m, split, text, sizeof text);
        h = XXH3_64bits_withSeed(text, strlen(text), h);
    }
    if (zp_augment_whole(cfg)) { /* loaders crop the train images they load */
        char w[256];
        snprintf(w, sizeof w, "crop at assembly: seed=%lld hflip=%d scale %.17g %.17g ratio %.17g "
                 "%.17g", (long long)cfg->seed, cfg->aug_hflip, cfg->aug_scale.v[0],
                 cfg->aug_scale.v[1], cfg->aug_ratio.v[0], cfg->aug_ratio.v[1]);
        h = XXH3_64bits_withSeed(w, strlen(w), h);
    }
    if (cfg->py_augment_train[0] || cfg->py_augment_test[0]) { /* part of what loaders send */
        char w[600];
        snprintf(w, sizeof w, "python augment: train=%s test=%s", cfg->py_augment_train,
                 cfg->py_augment_test);
        h = XXH3_64bits_withSeed(w, strlen(w), h);
    }
    if (zp_augment_field_wanted(cfg)) { /* loaders make a miss's field with the built-in ops */
        char w[400];
        snprintf(w, sizeof w, "field augment: %s size=%lld seed=%lld padding=%lld resized_crop=%d "
                 "hflip=%d scale %.17g %.17g ratio %.17g %.17g", cfg->aug_field,
                 (long long)cfg->aug_size, (long long)cfg->seed, (long long)cfg->aug_padding,
                 cfg->aug_resized_crop, cfg->aug_hflip, cfg->aug_scale.v[0], cfg->aug_scale.v[1],
                 cfg->aug_ratio.v[0], cfg->aug_ratio.v[1]);
        h = XXH3_64bits_withSeed(w, strlen(w), h);
    }
    if (cfg->aug_where != ZP_AUG_IN_LOADER)
        return h;
    /* loaders that augment: the augmentation is part of what they send */
    int n = snprintf(text, sizeof text, "augment: seed=%lld padding=%lld resized_crop=%d hflip=%d",
                     (long long)cfg->seed, (long long)cfg->aug_padding, cfg->aug_resized_crop,
                     cfg->aug_hflip);
    for (int i = 0; i < cfg->aug_scale.n; i++)
        n += snprintf(text + n, sizeof text - (size_t)n, " %.17g", cfg->aug_scale.v[i]);
    for (int i = 0; i < cfg->aug_ratio.n; i++)
        n += snprintf(text + n, sizeof text - (size_t)n, " %.17g", cfg->aug_ratio.v[i]);
    return XXH3_64bits_withSeed(text, strlen(text), h);
}

int zp_cachedb_lock(const char *path, int exclusive, const char *who, char *err, size_t len)
{
    char file[PATH_MAX];
    int rc = zp_files_mkdirs(path, 0755);
    snprintf(file, sizeof file, "%s/writer.lock", path);
    int fd = rc ? rc : open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = rc ? rc : -errno;
        snprintf(err, len, "%s: cannot open: %s", file, strerror(-rc));
        return rc;
    }
    for (int tries = 0; flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB); tries++) {
        if (errno != EWOULDBLOCK || tries == 20) { /* 2 s: another run's check ends in less */
            char holder[400] = "";
            ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
            holder[n > 0 ? n : 0] = 0;
            holder[strcspn(holder, "\n")] = 0;
            rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
            snprintf(err, len, "%s is in use by another run (%s)", path,
                     holder[0] ? holder : "its writer did not say who it is");
            close(fd);
            return rc;
        }
        struct timespec ts = {0, 100 * 1000000};
        nanosleep(&ts, NULL);
    }
    char line[512];
    int n = snprintf(line, sizeof line, "%s\n", who);
    /* the holder's name, a courtesy to the next one: nothing fails without it */
    int named = ftruncate(fd, 0) == 0 && pwrite(fd, line, (size_t)n, 0) == n;
    (void)named;
    return fd;
}

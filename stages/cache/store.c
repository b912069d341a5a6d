/* store.c — the cache stage's LMDB writer: samples put in batched write
 * transactions, and a full map turned into a warning and no more writes. */
#define _GNU_SOURCE
#include "stages/cache/store.h"
#include "schemas/msg.h"
#include "pipeline/cachedb/cachedb.h"
#include "pipeline/image/augment.h"
#include "pipeline/stage/event.h"
#include "pipeline/base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/statvfs.h>
#include <unistd.h>

struct zp_store {
    zp_stage_t *st;
    zp_cachedb_t db;
    MDB_txn *txn;
    int64_t txn_start, pending, pending_bytes;
    int on; /* caching; off after the map filled or an LMDB error */
    int64_t written;
    int64_t next_reader_check; /* ns */
    zp_dataset_meta_t kept[ZP_SPLITS]; /* what each split's values hold (zp_dataset_cached_meta) */
    uint64_t fp[ZP_SPLITS]; /* each split's value fingerprint (zp_cachedb_value_fp) */
    int lock;               /* the writers' lock, shared (zp_cachedb_lock); -1: none */
};

static void turn_off(zp_store_t *s, const char *why);

int zp_store_create(zp_store_t **out, zp_stage_t *st)
{
    *out = NULL;
    zp_store_t *s = calloc(1, sizeof *s);
    if (!s)
        return ZP_ENOMEM;
    s->st = st;
    for (int split = 0; split < ZP_SPLITS; split++)
        s->kept[split] = zp_dataset_cached_meta(&st->meta, split);
    for (int split = 0; split < ZP_SPLITS; split++)
        s->fp[split] = zp_cachedb_value_fp(&st->cfg, &st->meta, split);
    char err[512], who[400];
    int rc = zp_cachedb_open(&s->db, &st->cfg, &st->meta, 0, err, sizeof err);
    if (rc) {
        zp_error("%s", err);
        free(s);
        return ZP_EDATA;
    }
    *out = s;
    /* a writer among those of this fingerprint, for its life: no run rebuilds
     * the cache for another dataset under it (zp_cachedb_lock) */
    snprintf(who, sizeof who, "zeus-pipe pid %d, run %.300s", (int)getpid(), st->run_dir);
    s->lock = zp_cachedb_lock(s->db.path, 0, who, err, sizeof err);
    s->on = 1;
    if (s->lock < 0)
        turn_off(s, err);
    else if (!zp_cachedb_holds(&s->db, &st->cfg, &st->meta))
        turn_off(s, "another run rebuilt it for another dataset or transform since this run "
                    "checked it");
    else
        zp_info("caching to %s (map %zu MiB, at most %zu MiB)", s->db.path, s->db.map_bytes >> 20,
                s->db.max_bytes >> 20);
    return 0;
}

static void turn_off(zp_store_t *s, const char *why)
{
    if (!s->on)
        return;
    s->on = 0;
    char msg[640];
    snprintf(msg, sizeof msg, "%.200s: %.300s; caching stops and the run goes on uncached", s->db.path,
             why);
    zp_warn("%s", msg);
    zp_event_t ev;
    zp_event_record(s->st, &ev, ZP_REC_WARNING);
    zp_event_str(&ev, ZP_KEY(WARNING, message), msg);
    zp_event_send(s->st, &ev);
}

/* Why a write of the cache failed with `rc`, and what to do: a full disk
 * (ENOSPC, or EIO with no room left on it, as a full tmpfs says) is not a
 * full map. */
static void write_failure(const zp_store_t *s, const char *what, int rc, char *why, size_t len)
{
    struct statvfs fs;
    double free_mib = statvfs(s->db.path, &fs) ? -1 : (double)fs.f_bavail * fs.f_frsize / 1048576.0;
    if (rc == ENOSPC || (rc == EIO && free_mib >= 0 && free_mib < 2 + s->pending_bytes / 1048576.0))
        snprintf(why, len, "%s failed: the disk of cache.path is full (%.1f MiB free): free space "
                 "there, or give cache.path a disk with room for the cache", what,
                 free_mib < 0 ? 0 : free_mib);
    else if (rc == MDB_MAP_FULL)
        snprintf(why, len, "cache full at cache.max_bytes = %zu bytes: raise cache.max_bytes",
                 s->db.max_bytes);
    else
        snprintf(why, len, "%s failed: %s", what, mdb_strerror(rc));
}

static void commit(zp_store_t *s)
{
    if (!s->txn)
        return;
    ZP_TIME_BEGIN(&s->st->timers, ZP_R_LMDB_PUT); /* the commit writes the pages */
    int rc = mdb_txn_commit(s->txn);
    ZP_TIME_END(&s->st->timers, ZP_R_LMDB_PUT);
    s->txn = NULL;
    if (rc) {
        char why[300];
        write_failure(s, "commit", rc, why, sizeof why);
        turn_off(s, why);
        return;
    }
    s->written += s->pending;
    s->pending = s->pending_bytes = 0;
}

/* Commits and grows the map when the next `need` bytes might not fit. */
static void make_room(zp_store_t *s, size_t need)
{
    MDB_envinfo info;
    MDB_stat stat;
    mdb_env_info(s->db.env, &info);
    mdb_env_stat(s->db.env, &stat);
    size_t used = (info.me_last_pgno + 1) * (size_t)stat.ms_psize;
    size_t want = used + (size_t)(s->pending_bytes + (int64_t)need) * 5 / 4 + (1u << 20);
    if (want <= s->db.map_bytes)
        return;
    commit(s); /* keep what fits; at the limit, the next put finds out whether it does */
    if (s->db.map_bytes >= s->db.max_bytes)
        return;
    size_t grown = s->db.map_bytes * 2 > want * 2 ? s->db.map_bytes * 2 : want * 2;
    if (grown > s->db.max_bytes)
        grown = s->db.max_bytes;
    int rc = mdb_env_set_mapsize(s->db.env, grown);
    if (rc) {
        zp_warn("%s: cannot grow the map to %zu bytes: %s", s->db.path, grown, mdb_strerror(rc));
        return;
    }
    zp_info("%s: map grown from %zu to %zu MiB", s->db.path, s->db.map_bytes >> 20, grown >> 20);
    s->db.map_bytes = grown;
}

/* Opens the write transaction when none is. 0, or -1 with caching off. */
static int begin(zp_store_t *s)
{
    if (s->txn)
        return 0;
    int rc = zp_cachedb_write_begin(&s->db, &s->txn); /* adopts a map another process grew */
    if (rc) {
        s->txn = NULL;
        char why[128];
        snprintf(why, sizeof why, "cannot begin a write transaction: %s", mdb_strerror(rc));
        turn_off(s, why);
        return -1;
    }
    s->txn_start = zp_now_ns();
    return 0;
}

/* Room for the value of `index`, `size` bytes, in v->mv_data. Overwrites:
 * only misses reach the cache stage, and a value the reader found corrupt
 * comes back this way, so the cache heals. 0, or -1 with caching off. */
static int reserve(zp_store_t *s, int split, uint32_t index, size_t size, MDB_val *v)
{
    uint8_t kb[4];
    zp_cachedb_key(index, kb);
    MDB_val k = {4, kb};
    *v = (MDB_val){size, NULL};
    int rc = mdb_put(s->txn, s->db.dbi[split], &k, v, MDB_RESERVE);
    if (!rc) {
        s->pending++;
        s->pending_bytes += (int64_t)size;
        return 0;
    }
    mdb_txn_abort(s->txn);
    s->txn = NULL;
    char why[300];
    write_failure(s, "put", rc, why, sizeof why);
    turn_off(s, why);
    return -1;
}

/* 1 when a split's cache values come in VALUES, not as the samples sent on:
 * whole images (the crop at assembly), or records of __getitem__ before a
 * Python augment step. */
static int kept_apart(const zp_store_t *s, int split)
{
    return (split == ZP_SPLIT_TRAIN && zp_augment_whole(&s->st->cfg)) || s->st->meta.augment[split];
}

void zp_store_put(zp_store_t *s, int split, uint64_t n, const uint8_t *indices,
                  const uint8_t *labels, const uint8_t *data)
{
    if (!s || !s->on || kept_apart(s, split))
        return;
    size_t bytes = s->st->meta.sample_bytes;
    make_room(s, n * (bytes + ZP_CACHE_HDR + 64));
    if (begin(s))
        return;
    ZP_TIME_BEGIN(&s->st->timers, ZP_R_LMDB_PUT);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t index;
        int32_t label;
        MDB_val v;
        memcpy(&index, indices + 4 * i, 4);
        memcpy(&label, labels + 4 * i, 4);
        if (label == ZP_LABEL_SKIPPED)
            continue; /* not loaded: nothing to keep; the next epoch tries again */
        if (reserve(s, split, index, ZP_CACHE_HDR + bytes, &v))
            break;
        const uint8_t *payload = data + i * bytes;
        zp_cachedb_header(v.mv_data, &s->st->meta, s->fp[split], index, label, payload, bytes);
        memcpy((uint8_t *)v.mv_data + ZP_CACHE_HDR, payload, bytes);
    }
    ZP_TIME_END(&s->st->timers, ZP_R_LMDB_PUT);
    if (s->txn && s->pending >= s->st->cfg.commit_every)
        commit(s);
}

/* The values of a VALUES frame, each checked; -1 at the first bad one. */
static int walk_values(zp_store_t *s, int split, uint64_t n, const uint8_t *frame, size_t size,
                       int put)
{
    size_t at = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t len, index;
        if (size - at < ZP_CACHE_HDR)
            return -1;
        memcpy(&len, frame + at + 28, 4);
        memcpy(&index, frame + at + 24, 4);
        if (len > size - at - ZP_CACHE_HDR)
            return -1;
        MDB_val v = {ZP_CACHE_HDR + (size_t)len, (void *)(frame + at)}, w;
        int32_t label;
        zp_cache_whole_t img;
        const uint8_t *payload;
        const char *why;
        if (!put && (index >= s->st->meta.n[split] ||
                     (s->st->meta.augment[split]
                          ? zp_cachedb_check_value(&v, &s->kept[split], s->fp[split], index,
                                                   &label, &payload, &why)
                          : zp_cachedb_check_whole(&v, &s->st->meta, s->fp[split],
                                                   s->st->cfg.image_cache_side, index, &label,
                                                   &img, &why))))
            return -1;
        if (put && (reserve(s, split, index, v.mv_size, &w) == 0))
            memcpy(w.mv_data, v.mv_data, v.mv_size);
        else if (put)
            return 0; /* caching is off now */
        at += v.mv_size;
    }
    return at == size ? 0 : -1;
}

int zp_store_put_values(zp_store_t *s, int split, uint64_t n, const uint8_t *frame, size_t size)
{
    if (!s || !s->on || !kept_apart(s, split))
        return 0;
    if (walk_values(s, split, n, frame, size, 0))
        return ZP_EDATA;
    make_room(s, size + n * 64);
    if (begin(s))
        return 0;
    ZP_TIME_BEGIN(&s->st->timers, ZP_R_LMDB_PUT);
    walk_values(s, split, n, frame, size, 1);
    ZP_TIME_END(&s->st->timers, ZP_R_LMDB_PUT);
    if (s->txn && s->pending >= s->st->cfg.commit_every)
        commit(s);
    return 0;
}

int zp_store_get(zp_store_t *s, int split, uint64_t n, const uint8_t *indices, int32_t *labels,
                 uint8_t *data)
{
    if (!s || !s->on || kept_apart(s, split))
        return 0; /* whole images or records before an augment step: loaders finish them */
    MDB_txn *txn = s->txn; /* one transaction a thread: the pending one, if any */
    if (!txn && zp_cachedb_read_begin(&s->db, &txn))
        return 0;
    ZP_TIME_BEGIN(&s->st->timers, ZP_R_LMDB_GET);
    size_t bytes = s->st->meta.sample_bytes;
    uint64_t i = 0;
    for (; i < n; i++) {
        uint32_t index;
        memcpy(&index, indices + 4 * i, 4);
        uint8_t kb[4];
        zp_cachedb_key(index, kb);
        MDB_val k = {4, kb}, v;
        const uint8_t *payload;
        const char *why;
        if (mdb_get(txn, s->db.dbi[split], &k, &v) ||
            zp_cachedb_check_value(&v, &s->st->meta, s->fp[split], index, &labels[i], &payload,
                                   &why))
            break;
        memcpy(data + i * bytes, payload, bytes);
    }
    ZP_TIME_END(&s->st->timers, ZP_R_LMDB_GET);
    if (txn != s->txn)
        mdb_txn_abort(txn);
    return i == n;
}

void zp_store_commit(zp_store_t *s)
{
    if (s)
        commit(s);
}

int zp_store_tick(zp_store_t *s)
{
    int64_t now = zp_now_ns();
    if (s && now >= s->next_reader_check) { /* readers SIGKILLed while the writer lives on */
        zp_cachedb_reader_check(&s->db);
        s->next_reader_check = now + 5000000000ll;
    }
    if (!s || !s->txn)
        return 100;
    int64_t age = now - s->txn_start;
    if (age >= 100000000) {
        commit(s);
        return 100;
    }
    return (int)((100000000 - age) / 1000000) + 1;
}

void zp_store_destroy(zp_store_t **sp)
{
    if (!sp || !*sp)
        return;
    zp_store_t *s = *sp;
    commit(s);
    zp_info("%s: %lld samples written", s->db.path, (long long)s->written);
    zp_cachedb_close(&s->db);
    if (s->lock >= 0)
        close(s->lock); /* after the last commit */
    free(s);
    *sp = NULL;
}

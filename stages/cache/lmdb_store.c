#define _GNU_SOURCE
#include "stages/cache/lmdb_store.h"
#include "schemas/msg.h"
#include "pipeline/cachedb.h"
#include "pipeline/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct zp_store {
    zp_stage_t *st;
    zp_cachedb_t db;
    MDB_txn *txn;
    int64_t txn_start, pending, pending_bytes;
    int on; /* caching; off after the map filled or an LMDB error */
    int64_t written;
    int64_t next_reader_check; /* ns */
};

int zp_store_open(zp_store_t **out, zp_stage_t *st)
{
    *out = NULL;
    zp_store_t *s = calloc(1, sizeof *s);
    if (!s)
        return ZP_ENOMEM;
    s->st = st;
    char err[512];
    int rc = zp_cachedb_open(&s->db, &st->cfg, &st->meta, 0, err, sizeof err);
    if (rc) {
        zp_error("%s", err);
        free(s);
        return ZP_EDATA;
    }
    s->on = 1;
    *out = s;
    zp_info("caching to %s (map %zu MiB, at most %zu MiB)", s->db.path, s->db.map_bytes >> 20,
            s->db.max_bytes >> 20);
    return 0;
}

static void turn_off(zp_store_t *s, const char *why)
{
    s->on = 0;
    char msg[512];
    snprintf(msg, sizeof msg, "%.200s: %.160s; caching stops and the run goes on uncached", s->db.path, why);
    zp_warn("%s", msg);
    zp_event_t ev;
    zp_ev_record(s->st, &ev, ZP_REC_WARNING, 1);
    zp_ev_str(&ev, ZP_KEY(WARNING, message), msg);
    zp_ev_send(s->st, &ev);
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
        char why[128];
        snprintf(why, sizeof why, "commit failed: %s", mdb_strerror(rc));
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

void zp_store_put(zp_store_t *s, int split, uint64_t n, const uint8_t *indices,
                  const uint8_t *labels, const uint8_t *data)
{
    if (!s || !s->on)
        return;
    size_t bytes = s->st->meta.sample_bytes;
    make_room(s, n * (bytes + ZP_CACHE_HDR + 64));
    if (!s->txn) {
        int rc = zp_cachedb_write_begin(&s->db, &s->txn); /* adopts a map another process grew */
        if (rc) {
            s->txn = NULL;
            char why[128];
            snprintf(why, sizeof why, "cannot begin a write transaction: %s", mdb_strerror(rc));
            turn_off(s, why);
            return;
        }
        s->txn_start = zp_now_ns();
    }
    ZP_TIME_BEGIN(&s->st->timers, ZP_R_LMDB_PUT);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t index;
        int32_t label;
        memcpy(&index, indices + 4 * i, 4);
        memcpy(&label, labels + 4 * i, 4);
        if (label == ZP_LABEL_SKIPPED)
            continue; /* not loaded: nothing to keep; the next epoch tries again */
        uint8_t kb[4];
        zp_cache_key(index, kb);
        MDB_val k = {4, kb}, v = {ZP_CACHE_HDR + bytes, NULL};
        /* Overwrite: only misses reach the cache stage, and a value the reader found
         * corrupt comes back this way, so the cache heals. */
        int rc = mdb_put(s->txn, s->db.dbi[split], &k, &v, MDB_RESERVE);
        if (rc) {
            ZP_TIME_END(&s->st->timers, ZP_R_LMDB_PUT);
            mdb_txn_abort(s->txn);
            s->txn = NULL;
            char why[160];
            if (rc == MDB_MAP_FULL)
                snprintf(why, sizeof why, "cache full at cache.max_bytes = %zu bytes",
                         s->db.max_bytes);
            else
                snprintf(why, sizeof why, "put failed: %s", mdb_strerror(rc));
            turn_off(s, why);
            return;
        }
        const uint8_t *payload = data + i * bytes;
        zp_cache_header(v.mv_data, &s->st->meta, index, label, payload, bytes);
        memcpy((uint8_t *)v.mv_data + ZP_CACHE_HDR, payload, bytes);
        s->pending++;
        s->pending_bytes += (int64_t)v.mv_size;
    }
    ZP_TIME_END(&s->st->timers, ZP_R_LMDB_PUT);
    if (s->pending >= s->st->cfg.commit_every)
        commit(s);
}

int zp_store_get(zp_store_t *s, int split, uint64_t n, const uint8_t *indices, int32_t *labels,
                 uint8_t *data)
{
    if (!s || !s->on)
        return 0;
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
        zp_cache_key(index, kb);
        MDB_val k = {4, kb}, v;
        const uint8_t *payload;
        const char *why;
        if (mdb_get(txn, s->db.dbi[split], &k, &v) ||
            zp_cache_check(&v, &s->st->meta, index, &labels[i], &payload, &why))
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
    free(s);
    *sp = NULL;
}

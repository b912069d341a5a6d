/* zap.c — the ZAP handler of a stage's tcp endpoints: a thread that answers
 * libzmq's authentication requests, letting in the CURVE keys of its domain. */
#define _GNU_SOURCE
#include "pipeline/stage/zap.h"
#include "pipeline/net/keys.h"
#include "pipeline/base/log.h"
#include "pipeline/net/sock.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEYS_MAX 1024

#define ZP_ZAP_ROW(e, name, keys) {name, keys},
static const struct {
    const char *name, *keys;
} DOMAINS[] = {ZP_ZAP_DOMAINS(ZP_ZAP_ROW)};
#undef ZP_ZAP_ROW

typedef struct {
    uint8_t key[32];
    unsigned domains; /* bit d: let in on domain d */
    char user[48];    /* the ZAP User-Id of its connections: "rank R", or "key NAME" (NAME.pub) */
} entry_t;

struct zp_zap {
    void *ctx, *rep; /* rep: owned by the thread once it runs */
    pthread_t thread;
    volatile int stop;
    entry_t keys[KEYS_MAX]; /* written before the thread starts, read-only after */
    int nkeys;
    int64_t refused;
};

static void add_key(zp_zap_t *z, const char *pub, unsigned domains, const char *user)
{
    entry_t *e = &z->keys[z->nkeys++];
    zmq_z85_decode(e->key, pub);
    e->domains = domains;
    snprintf(e->user, sizeof e->user, "%s", user);
}

static int load_keys(zp_zap_t *z, const char *dir, int optional)
{
    DIR *d = opendir(dir);
    if (!d && optional && errno == ENOENT)
        return 0;
    if (!d) {
        zp_error("transport.allowed_keys %s: %s", dir, strerror(errno));
        return -errno;
    }
    for (struct dirent *e; (e = readdir(d)) && z->nkeys < KEYS_MAX - 1;) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".pub"))
            continue;
        char path[PATH_MAX + 300], pub[ZP_Z85_KEY], err[PATH_MAX + 400], user[48];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (zp_keys_read_public(path, pub, err, sizeof err)) {
            zp_warn("ignoring %s", err);
            continue;
        }
        snprintf(user, sizeof user, "key %.*s", (int)(n - 4 < 40 ? n - 4 : 40), e->d_name);
        add_key(z, pub, 1u << ZP_ZAP_LOADERS, user);
    }
    closedir(d);
    zp_info("tcp: %d allowed key(s) from %s", z->nkeys, dir);
    return 0;
}

/* Under Slurm: rank r's key lets its stages in, as rank r, on every socket:
 * its loaders come to the loaders' one. */
static int load_ranks(zp_zap_t *z, const zp_stage_t *st)
{
    char path[PATH_MAX + 16], pub[ZP_Z85_KEY], err[PATH_MAX + 200], user[48];
    snprintf(path, sizeof path, "%s/ranks.pub", st->run0);
    for (int r = 1; r < st->slurm.world; r++) {
        if (z->nkeys >= KEYS_MAX) {
            zp_error("%s: more than %d keys in all", path, KEYS_MAX);
            return ZP_EINVAL;
        }
        int rc = zp_keys_read_rank_public(path, r, pub, err, sizeof err);
        if (rc) {
            zp_error("%s", err);
            return rc;
        }
        snprintf(user, sizeof user, "rank %d", r);
        add_key(z, pub, 1u << ZP_ZAP_LOADERS | 1u << ZP_ZAP_RANKS, user);
    }
    return 0;
}

/* The domain a request names, or -1. */
static int domain_of(zmq_msg_t *m)
{
    for (int d = 0; d < ZP_ZAP_COUNT; d++)
        if (zmq_msg_size(m) == strlen(DOMAINS[d].name) &&
            !memcmp(zmq_msg_data(m), DOMAINS[d].name, zmq_msg_size(m)))
            return d;
    return -1;
}

/* The entry that lets `key` in on domain d, or NULL. */
static const entry_t *allowed(const zp_zap_t *z, int d, zmq_msg_t *key)
{
    for (int i = 0; d >= 0 && zmq_msg_size(key) == 32 && i < z->nkeys; i++)
        if ((z->keys[i].domains & 1u << d) && !memcmp(z->keys[i].key, zmq_msg_data(key), 32))
            return &z->keys[i];
    return NULL;
}

static void refused(zp_zap_t *z, int d, zmq_msg_t *part)
{
    if (z->refused++ >= 20 && z->refused % 1000)
        return;
    char addr[64], key[ZP_Z85_KEY] = "(no CURVE key)";
    snprintf(addr, sizeof addr, "%.*s", (int)zmq_msg_size(&part[3]), (const char *)zmq_msg_data(&part[3]));
    if (zmq_msg_size(&part[6]) == 32)
        zmq_z85_encode(key, zmq_msg_data(&part[6]), 32);
    if (d < 0)
        zp_warn("tcp: refused a peer from %s with key %s: a socket of no known ZAP domain "
                "(%lld refused)", addr, key, (long long)z->refused);
    else
        zp_warn("tcp %s: refused a peer from %s with key %s: not in %s (%lld refused)",
                DOMAINS[d].name, addr, key, DOMAINS[d].keys, (long long)z->refused);
}

/* One request: version, id, domain, address, identity, mechanism, credentials. */
static void answer(zp_zap_t *z)
{
    zmq_msg_t part[8];
    int n = 0, more = 1;
    while (more && n < 8) {
        zmq_msg_init(&part[n]);
        if (zmq_msg_recv(&part[n], z->rep, 0) < 0) {
            zmq_msg_close(&part[n]);
            break;
        }
        more = zmq_msg_more(&part[n++]);
    }
    int d = n >= 7 ? domain_of(&part[2]) : -1;
    const entry_t *e = n >= 7 && zmq_msg_size(&part[5]) == 5 &&
                               !memcmp(zmq_msg_data(&part[5]), "CURVE", 5)
                           ? allowed(z, d, &part[6])
                           : NULL;
    if (n >= 2) {
        zmq_send(z->rep, "1.0", 3, ZMQ_SNDMORE);
        zmq_send(z->rep, zmq_msg_data(&part[1]), zmq_msg_size(&part[1]), ZMQ_SNDMORE);
        zmq_send(z->rep, e ? "200" : "400", 3, ZMQ_SNDMORE);
        zmq_send(z->rep, e ? "OK" : "key not allowed", e ? 2 : 15, ZMQ_SNDMORE);
        zmq_send(z->rep, e ? e->user : "", e ? strlen(e->user) : 0, ZMQ_SNDMORE);
        zmq_send(z->rep, "", 0, 0);
    }
    if (!e && n >= 7)
        refused(z, d, part);
    for (int i = 0; i < n; i++)
        zmq_msg_close(&part[i]);
}

static void *run(void *arg)
{
    zp_zap_t *z = arg;
    while (!z->stop) {
        zmq_pollitem_t it = {z->rep, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) > 0)
            answer(z);
    }
    zmq_close(z->rep);
    return NULL;
}

/* Loads the key lists and starts the handler thread on st->zctx. Under
 * Slurm a missing transport.allowed_keys folder is no error: the ranks bring
 * their own keys. */
static int start(zp_zap_t **out, zp_stage_t *st)
{
    zp_zap_t *z = calloc(1, sizeof *z);
    if (!z)
        return ZP_ENOMEM;
    int slurm = st->slurm.world > 1, rc = load_keys(z, st->cfg.allowed_keys, slurm);
    if (!rc && slurm)
        rc = load_ranks(z, st);
    if (!rc && zp_sock_create(&z->rep, st->zctx, ZMQ_REP, "inproc://zeromq.zap.01", 1, 0))
        rc = ZP_EZMQ;
    if (!rc && pthread_create(&z->thread, NULL, run, z)) {
        zmq_close(z->rep);
        rc = ZP_ENOMEM;
    }
    if (rc) {
        free(z);
        return rc;
    }
    *out = z;
    return 0;
}

int zp_zap_serve(zp_stage_t *st, void *sock, zp_zap_domain_t domain)
{
    char path[PATH_MAX + 16], pub[ZP_Z85_KEY], sec[ZP_Z85_KEY], err[PATH_MAX + 200];
    int one = 1, rc;
    snprintf(path, sizeof path, "%s/server.key", st->run_dir);
    if ((rc = zp_keys_read_pair(path, pub, sec, err, sizeof err))) {
        zp_error("%s", err);
        return rc;
    }
    if (!st->zap && (rc = start(&st->zap, st)))
        return rc;
    const char *name = DOMAINS[domain].name;
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec, 40) ||
        zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, name, strlen(name))) {
        zp_error("tcp %s: CURVE server: %s", name, zmq_strerror(errno));
        rc = ZP_EZMQ;
    }
    explicit_bzero(sec, sizeof sec);
    return rc;
}

int zp_zap_rank(zmq_msg_t *msg, int world)
{
    const char *user = zmq_msg_gets(msg, "User-Id");
    int r, end = 0;
    if (!user || sscanf(user, "rank %d%n", &r, &end) != 1 || user[end] || r < 1 || r >= world)
        return -1;
    return r;
}

void zp_zap_destroy(zp_zap_t **zap)
{
    if (!zap || !*zap)
        return;
    (*zap)->stop = 1;
    pthread_join((*zap)->thread, NULL);
    free(*zap);
    *zap = NULL;
}

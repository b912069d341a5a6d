#define _GNU_SOURCE
#include "pipeline/zap.h"
#include "pipeline/keys.h"
#include "pipeline/log.h"
#include "pipeline/sock.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEYS_MAX 1024

struct zp_zap {
    void *ctx, *rep; /* rep: owned by the thread once it runs */
    pthread_t thread;
    volatile int stop;
    uint8_t keys[KEYS_MAX][32];
    int nkeys;
    int64_t refused;
};

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
        char path[PATH_MAX + 300], pub[ZP_Z85_KEY], err[PATH_MAX + 400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (zp_keys_read_public(path, pub, err, sizeof err)) {
            zp_warn("ignoring %s", err);
            continue;
        }
        zmq_z85_decode(z->keys[z->nkeys++], pub);
    }
    closedir(d);
    zp_info("tcp: %d allowed key(s) from %s", z->nkeys, dir);
    return 0;
}

static int allowed(const zp_zap_t *z, const uint8_t *key, size_t len)
{
    for (int i = 0; len == 32 && i < z->nkeys; i++)
        if (!memcmp(z->keys[i], key, 32))
            return 1;
    return 0;
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
    int ok = n >= 7 && zmq_msg_size(&part[5]) == 5 && !memcmp(zmq_msg_data(&part[5]), "CURVE", 5) &&
             allowed(z, zmq_msg_data(&part[6]), zmq_msg_size(&part[6]));
    if (n >= 2) {
        zmq_send(z->rep, "1.0", 3, ZMQ_SNDMORE);
        zmq_send(z->rep, zmq_msg_data(&part[1]), zmq_msg_size(&part[1]), ZMQ_SNDMORE);
        zmq_send(z->rep, ok ? "200" : "400", 3, ZMQ_SNDMORE);
        zmq_send(z->rep, ok ? "OK" : "key not allowed", ok ? 2 : 15, ZMQ_SNDMORE);
        zmq_send(z->rep, "", 0, ZMQ_SNDMORE);
        zmq_send(z->rep, "", 0, 0);
    }
    if (!ok && n >= 7 && (z->refused++ < 20 || z->refused % 1000 == 0)) {
        char addr[64] = "?", key[ZP_Z85_KEY] = "(no CURVE key)";
        snprintf(addr, sizeof addr, "%.*s", (int)zmq_msg_size(&part[3]),
                 (const char *)zmq_msg_data(&part[3]));
        if (zmq_msg_size(&part[6]) == 32)
            zmq_z85_encode(key, zmq_msg_data(&part[6]), 32);
        zp_warn("tcp: refused a peer from %s with key %s: not in transport.allowed_keys "
                "(%lld refused)", addr, key, (long long)z->refused);
    }
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

int zp_zap_start(zp_zap_t **out, zp_stage_t *st)
{
    zp_zap_t *z = calloc(1, sizeof *z);
    if (!z)
        return ZP_ENOMEM;
    int slurm = st->slurm.world > 1, rc = load_keys(z, st->cfg.allowed_keys, slurm);
    if (!rc && slurm) { /* the job's own ranks */
        char path[PATH_MAX + 16], pub[ZP_Z85_KEY], err[PATH_MAX + 200];
        snprintf(path, sizeof path, "%s/ranks.pub", st->run0);
        rc = zp_keys_read_public(path, pub, err, sizeof err);
        if (rc)
            zp_error("%s", err);
        else
            zmq_z85_decode(z->keys[z->nkeys++], pub);
    }
    if (!rc && !(z->rep = zp_sock_open(st->zctx, ZMQ_REP, "inproc://zeromq.zap.01", 1, 0)))
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

void zp_zap_stop(zp_zap_t **zap)
{
    if (!zap || !*zap)
        return;
    (*zap)->stop = 1;
    pthread_join((*zap)->thread, NULL);
    free(*zap);
    *zap = NULL;
}

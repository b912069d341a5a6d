#define _GNU_SOURCE
#include "pipeline/keys.h"
#include "pipeline/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

static int valid(const char *z85)
{
    uint8_t raw[32];
    return strlen(z85) == 40 && zmq_z85_decode(raw, z85) != NULL;
}

static int write_new(const char *path, int mode, const char *text, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -errno;
    }
    size_t n = strlen(text);
    int rc = write(fd, text, n) == (ssize_t)n && fsync(fd) == 0 ? 0 : -errno;
    if (close(fd) && !rc)
        rc = -errno;
    if (rc)
        snprintf(err, errlen, "%s: %s", path, strerror(-rc));
    return rc;
}

int zp_keys_generate(const char *base, char *err, size_t errlen)
{
    char pub[ZP_Z85_KEY], sec[ZP_Z85_KEY], path[4096], text[128];
    if (zmq_curve_keypair(pub, sec)) {
        snprintf(err, errlen, "cannot make a CURVE key pair: %s (is libzmq built with libsodium?)",
                 zmq_strerror(errno));
        return ZP_EZMQ;
    }
    snprintf(path, sizeof path, "%s.key", base);
    snprintf(text, sizeof text, "public %s\nsecret %s\n", pub, sec);
    int rc = write_new(path, 0600, text, err, errlen);
    if (rc)
        return rc;
    snprintf(path, sizeof path, "%s.pub", base);
    snprintf(text, sizeof text, "%s\n", pub);
    return write_new(path, 0644, text, err, errlen);
}

static int read_text(const char *path, char *buf, size_t len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -errno;
    }
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = 0;
    fclose(f);
    return 0;
}

int zp_keys_read_pair(const char *path, char pub[ZP_Z85_KEY], char sec[ZP_Z85_KEY], char *err,
                      size_t errlen)
{
    char text[256];
    int rc = read_text(path, text, sizeof text, err, errlen);
    if (rc)
        return rc;
    if (sscanf(text, "public %40s secret %40s", pub, sec) != 2 || !valid(pub) || !valid(sec)) {
        snprintf(err, errlen, "%s: not a key pair written by `zeus-pipe keygen` "
                              "(\"public <40 Z85 chars>\" and \"secret <40 Z85 chars>\")", path);
        return ZP_EINVAL;
    }
    return 0;
}

int zp_keys_read_public(const char *path, char pub[ZP_Z85_KEY], char *err, size_t errlen)
{
    char text[256];
    int rc = read_text(path, text, sizeof text, err, errlen);
    if (rc)
        return rc;
    if (sscanf(text, "%40s", pub) != 1 || !valid(pub)) {
        snprintf(err, errlen, "%s: not a public key (40 Z85 characters)", path);
        return ZP_EINVAL;
    }
    return 0;
}

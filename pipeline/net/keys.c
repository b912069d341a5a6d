/* keys.c — CURVE key pairs in files (`zeus-pipe keygen`), read and checked for
 * the tcp sockets of loaders on other hosts. */
#define _GNU_SOURCE
#include "pipeline/net/keys.h"
#include "pipeline/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* Opens a key file; a secret one only when no one but its owner may read or
 * write it (checked on the open file: what is checked is what is read). */
static int open_key(FILE **out, const char *path, int secret, char *err, size_t errlen)
{
    struct stat sb;
    FILE *f = fopen(path, "r");
    int rc = !f || (secret && fstat(fileno(f), &sb)) ? -errno : 0;
    if (rc)
        snprintf(err, errlen, "%s: %s", path, strerror(-rc));
    else if (secret && (sb.st_mode & 077)) {
        snprintf(err, errlen, "%s: a secret key that others may read (mode %04o); run: chmod 600 %s",
                 path, (unsigned)(sb.st_mode & 07777), path);
        rc = -EACCES;
    }
    if (rc && f)
        fclose(f);
    *out = rc ? NULL : f;
    return rc;
}

static int read_text(const char *path, int secret, char *buf, size_t len, char *err, size_t errlen)
{
    FILE *f;
    int rc = open_key(&f, path, secret, err, errlen);
    if (rc)
        return rc;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = 0;
    fclose(f);
    return 0;
}

static int parse_pair(const char *text, const char *path, char pub[ZP_Z85_KEY], char sec[ZP_Z85_KEY],
                      char *err, size_t errlen)
{
    if (sscanf(text, "public %40s secret %40s", pub, sec) != 2 || !valid(pub) || !valid(sec)) {
        snprintf(err, errlen, "%s: not a key pair written by zeus-pipe "
                              "(\"public <40 Z85 chars>\" and \"secret <40 Z85 chars>\")", path);
        return ZP_EINVAL;
    }
    return 0;
}

static int parse_public(const char *text, const char *path, char pub[ZP_Z85_KEY], char *err,
                        size_t errlen)
{
    if (sscanf(text, "%40s", pub) != 1 || !valid(pub)) {
        snprintf(err, errlen, "%s: not a public key (40 Z85 characters)", path);
        return ZP_EINVAL;
    }
    return 0;
}

int zp_keys_read_pair(const char *path, char pub[ZP_Z85_KEY], char sec[ZP_Z85_KEY], char *err,
                      size_t errlen)
{
    char text[256];
    int rc = read_text(path, 1, text, sizeof text, err, errlen);
    return rc ? rc : parse_pair(text, path, pub, sec, err, errlen);
}

int zp_keys_read_public(const char *path, char pub[ZP_Z85_KEY], char *err, size_t errlen)
{
    char text[256];
    int rc = read_text(path, 0, text, sizeof text, err, errlen);
    return rc ? rc : parse_public(text, path, pub, err, errlen);
}

/* ---- the Slurm job's rank keys -------------------------------------------------------------- */

int zp_keys_generate_ranks(const char *base, int world, char *err, size_t errlen)
{
    size_t cap = (size_t)(world > 0 ? world : 1) * 128, kn = 0, pn = 0;
    char *key = calloc(1, cap), *pub = calloc(1, cap), path[4096];
    int rc = key && pub ? 0 : ZP_ENOMEM;
    for (int r = 1; !rc && r < world; r++) {
        char p[ZP_Z85_KEY], s[ZP_Z85_KEY];
        if (zmq_curve_keypair(p, s)) {
            snprintf(err, errlen, "cannot make a CURVE key pair: %s (is libzmq built with "
                                  "libsodium?)", zmq_strerror(errno));
            rc = ZP_EZMQ;
            break;
        }
        kn += (size_t)snprintf(key + kn, cap - kn, "rank %d public %s secret %s\n", r, p, s);
        pn += (size_t)snprintf(pub + pn, cap - pn, "rank %d %s\n", r, p);
    }
    if (rc == ZP_ENOMEM)
        snprintf(err, errlen, "%s: out of memory", base);
    snprintf(path, sizeof path, "%s.key", base);
    if (!rc)
        rc = write_new(path, 0600, key, err, errlen);
    snprintf(path, sizeof path, "%s.pub", base);
    if (!rc)
        rc = write_new(path, 0644, pub, err, errlen);
    if (key)
        explicit_bzero(key, cap);
    free(key);
    free(pub);
    return rc;
}

/* Rank `rank`'s line of a rank key file, after its "rank R ". */
static int rank_line(const char *path, int secret, int rank, char *line, size_t len, char *err,
                     size_t errlen)
{
    FILE *f;
    int rc = open_key(&f, path, secret, err, errlen);
    if (rc)
        return rc;
    char want[32];
    size_t n = (size_t)snprintf(want, sizeof want, "rank %d ", rank);
    rc = ZP_EINVAL;
    while (rc && fgets(line, (int)len, f))
        if (!strncmp(line, want, n)) {
            memmove(line, line + n, strlen(line + n) + 1);
            rc = 0;
        }
    fclose(f);
    if (rc)
        snprintf(err, errlen, "%s: no key for rank %d (the job's rank 0 wrote fewer)", path, rank);
    return rc;
}

int zp_keys_read_rank(const char *path, int rank, char pub[ZP_Z85_KEY], char sec[ZP_Z85_KEY],
                      char *err, size_t errlen)
{
    char line[256];
    int rc = rank_line(path, 1, rank, line, sizeof line, err, errlen);
    rc = rc ? rc : parse_pair(line, path, pub, sec, err, errlen);
    explicit_bzero(line, sizeof line);
    return rc;
}

int zp_keys_read_rank_public(const char *path, int rank, char pub[ZP_Z85_KEY], char *err,
                             size_t errlen)
{
    char line[256];
    int rc = rank_line(path, 0, rank, line, sizeof line, err, errlen);
    return rc ? rc : parse_public(line, path, pub, err, errlen);
}

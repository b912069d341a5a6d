#define _GNU_SOURCE
#include "pipeline/events.h"
#include "schemas/errors.h"
#include "schemas/msg.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The bytes every EVENT record starts with, as the encoder writes them
 * ({"v": version, "t": "event", ...}); 0 when they do not fit `len`. */
static size_t record_start(char *buf, size_t len)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    zp_msg_pack_begin(&pk, ZP_MSG_EVENT, 1);
    size_t n = sb.size <= len ? sb.size : 0;
    memcpy(buf, sb.data, n);
    msgpack_sbuffer_destroy(&sb);
    return n;
}

int zp_events_scan(const char *data, size_t size, zp_events_fn *fn, void *ctx,
                   zp_events_count_t *count)
{
    char start[64];
    size_t slen = record_start(start, sizeof start);
    const char *end = data + size, *at = slen && size ? memmem(data, size, start, slen) : NULL;
    if (!at)
        at = end;
    if (at > data)
        count->skipped_bytes += at - data, count->skipped_records++;
    msgpack_unpacked one;
    msgpack_unpacked_init(&one);
    int rc = 0;
    while (!rc && at < end) {
        const char *next = memmem(at + 1, (size_t)(end - at - 1), start, slen);
        next = next ? next : end;
        size_t off = (size_t)(at - data), stop = (size_t)(next - data);
        msgpack_unpack_return ur = msgpack_unpack_next(&one, data, stop, &off);
        if (ur == MSGPACK_UNPACK_NOMEM_ERROR) {
            rc = ZP_ENOMEM;
        } else if (ur == MSGPACK_UNPACK_SUCCESS && off == stop) {
            count->records++;
            rc = fn(ctx, &one.data);
        } else {
            count->skipped_bytes += next - at, count->skipped_records++;
        }
        at = next;
    }
    msgpack_unpacked_destroy(&one);
    return rc;
}

int zp_events_map(const char *run_dir, const char **data, size_t *size, char *err, size_t errlen)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/events.msgpack", run_dir);
    *data = NULL;
    *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
    struct stat st;
    if (fd < 0 || fstat(fd, &st)) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return rc;
    }
    size_t n = (size_t)st.st_size;
    void *map = n ? mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (n && map == MAP_FAILED) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return rc;
    }
    *data = map;
    *size = n;
    return 0;
}

void zp_events_unmap(const char **data, size_t size)
{
    if (*data && size)
        munmap((void *)*data, size);
    *data = NULL;
}

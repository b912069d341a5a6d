/* eventlog.c — a run's events.msgpack mapped and split into its records,
 * skipping torn or garbled spans in bounded memory (eventlog.h). */
#define _GNU_SOURCE
#include "pipeline/report/eventlog.h"
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

/* The bytes after a type byte `c` that say a length, and the bytes every
 * value of that type has besides (ext's type byte, a number's bytes); kind
 * 1 for an array, 2 for a map. 0 for a byte that starts no object (0xc1). */
static int header_of(uint8_t c, size_t *lenbytes, uint64_t *fixed, int *kind)
{
    static const uint8_t fixed_of[] = {/* 0xca..0xd8 */ 4, 8, 1, 2, 4, 8, 1, 2, 4, 8, 2, 3, 5, 9, 17};
    *lenbytes = 0, *fixed = 0, *kind = 0;
    if (c >= 0xca && c <= 0xd8)
        *fixed = fixed_of[c - 0xca];
    else if (c == 0xc4 || c == 0xd9 || c == 0xc7)
        *lenbytes = 1, *fixed = c == 0xc7;
    else if (c == 0xc5 || c == 0xda || c == 0xc8)
        *lenbytes = 2, *fixed = c == 0xc8;
    else if (c == 0xc6 || c == 0xdb || c == 0xc9)
        *lenbytes = 4, *fixed = c == 0xc9;
    else if (c >= 0xdc && c <= 0xdf)
        *lenbytes = c & 1 ? 4 : 2, *kind = c >= 0xde ? 2 : 1;
    else
        return 0;
    return 1;
}

/* 1 when p[0..n) is exactly one msgpack object that msgpack-c unpacks in
 * memory bounded by n: containers nested ZP_EVENTS_DEPTH deep at most
 * (msgpack-c's limit; it answers "no memory" past it) and no length or
 * element count beyond the bytes left (every element takes one at least),
 * so a garbled header of 2^32 elements allocates nothing. */
static int well_formed(const uint8_t *p, size_t n)
{
    uint64_t left[ZP_EVENTS_DEPTH + 1] = {1}; /* objects still to read, by depth */
    int depth = 0;
    size_t i = 0;
    while (depth >= 0) {
        if (!left[depth]) {
            depth--;
            continue;
        }
        if (i >= n)
            return 0;
        left[depth]--;
        uint8_t c = p[i++];
        if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3)
            continue; /* a fixint, nil or a bool: the byte alone */
        uint64_t v = 0, fixed = 0;
        size_t lenbytes = 0;
        int kind = 0;
        if (c <= 0x8f)
            v = c & 15, kind = 2;
        else if (c <= 0x9f)
            v = c & 15, kind = 1;
        else if (c <= 0xbf)
            v = c & 31;
        else if (!header_of(c, &lenbytes, &fixed, &kind) || lenbytes > n - i)
            return 0;
        for (size_t k = 0; k < lenbytes; k++)
            v = v << 8 | p[i++];
        if (!kind) { /* bytes: a str, bin, ext or number */
            if (v > n - i || fixed > n - i - v)
                return 0;
            i += v + fixed;
            continue;
        }
        uint64_t items = kind == 2 ? 2 * v : v;
        if (!items)
            continue;
        if (items > n - i || depth == ZP_EVENTS_DEPTH)
            return 0;
        left[++depth] = items;
    }
    return i == n;
}

int zp_eventlog_scan(const char *data, size_t size, zp_eventlog_fn *fn, void *ctx,
                   zp_eventlog_count_t *count)
{
    if (!size)
        return 0; /* an empty file, maybe not mapped (data NULL) */
    char start[64];
    size_t slen = record_start(start, sizeof start);
    const char *end = data + size, *at = slen ? memmem(data, size, start, slen) : NULL;
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
        msgpack_unpack_return ur = MSGPACK_UNPACK_PARSE_ERROR;
        if (well_formed((const uint8_t *)at, (size_t)(next - at)))
            ur = msgpack_unpack_next(&one, data, stop, &off);
        if (ur == MSGPACK_UNPACK_SUCCESS && off == stop) {
            count->records++;
            rc = fn(ctx, &one.data);
        } else { /* torn, garbled, or "no memory": skipped, the next record read */
            count->skipped_bytes += next - at, count->skipped_records++;
        }
        at = next;
    }
    msgpack_unpacked_destroy(&one);
    return rc;
}

int zp_eventlog_map(const char *run_dir, const char **data, size_t *size, char *err, size_t errlen)
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

void zp_eventlog_unmap(const char **data, size_t size)
{
    if (*data && size)
        munmap((void *)*data, size);
    *data = NULL;
}

/* resources.c — RUN/resources (what a run created, for cleanup after a crash)
 * and the loaders' delivery marks (for the supervisor's restart policy): the
 * writing side, used by the stages. The supervisor reads them and cleans up
 * (pipeline/supervisor/rundir.c). */
#define _GNU_SOURCE
#include "pipeline/base/resources.h"
#include "pipeline/base/files.h"
#include "pipeline/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>


void zp_resources_path(char *buf, size_t len, const char *run_dir)
{
    snprintf(buf, len, "%s/resources", run_dir);
}

/* One line, one write(2): appends from several processes do not interleave. */
static int append_line(const char *run_dir, const char *line, size_t n)
{
    char path[PATH_MAX + 16];
    zp_resources_path(path, sizeof path, run_dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int rc = fd < 0 ? -errno : 0;
    if (!rc) {
        ssize_t w = write(fd, line, n);
        rc = w < 0 ? -errno : (size_t)w != n ? -EIO : 0;
    }
    if (fd >= 0 && close(fd) && !rc)
        rc = -errno;
    if (rc)
        zp_error("%s: cannot record a resource of the run: %s", path, zp_strerror(rc));
    return rc;
}

int zp_resources_add(const char *run_dir, const char *kind, const char *name)
{
    char line[ZP_RESOURCES_LINE_MAX + 8];
    int n = snprintf(line, sizeof line, "%s %s\n", kind, name);
    if (n < 0 || (size_t)n >= ZP_RESOURCES_LINE_MAX || strchr(name, '\n')) {
        zp_error("%s/resources: cannot record %s %.100s...: name too long", run_dir, kind, name);
        return ZP_EINVAL;
    }
    return append_line(run_dir, line, (size_t)n);
}

int zp_resources_start(const char *run_dir)
{
    char host[256] = "";
    if (gethostname(host, sizeof host - 1))
        return -errno;
    return zp_resources_add(run_dir, "host", host);
}

int zp_resources_add_endpoint(const char *endpoint)
{
    if (strncmp(endpoint, "ipc://", 6))
        return 0;
    const char *path = endpoint + 6, *sock = NULL;
    for (const char *p = strstr(path, "/sock/"); p; p = strstr(p + 1, "/sock/"))
        sock = p;
    if (!sock || sock == path || (size_t)(sock - path) >= PATH_MAX)
        return 0; /* not a run's endpoint */
    char run_dir[PATH_MAX];
    snprintf(run_dir, sizeof run_dir, "%.*s", (int)(sock - path), path);
    return zp_resources_add(run_dir, "sock", path);
}

/* ---- loaders' delivery marks ---------------------------------------------------------------- */

void zp_resources_mark_path(char *buf, size_t len, const char *run_dir, int instance)
{
    snprintf(buf, len, "%s/logs/loader-%d.delivered", run_dir, instance);
}

int zp_resources_mark_delivered(const char *run_dir, int instance)
{
    char path[PATH_MAX + 64], pid[24];
    zp_resources_mark_path(path, sizeof path, run_dir, instance);
    int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = fd < 0 ? -errno : write(fd, pid, (size_t)n) == n ? 0 : -EIO;
    if (fd >= 0)
        close(fd);
    if (rc)
        zp_warn("%s: %s (the supervisor will count this loader's death as a crash)", path,
                zp_strerror(rc));
    return rc;
}

void zp_resources_attach_path(char *buf, size_t len, const char *run_dir, int rank)
{
    snprintf(buf, len, "%s/logs/trainer-%d.attached", run_dir, rank);
}

int zp_resources_attach_hold(const char *run_dir, int rank, long *holder)
{
    char path[PATH_MAX + 64];
    zp_resources_attach_path(path, sizeof path, run_dir, rank);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    /* a supervisor's test holds it for microseconds: a few tries tell that
     * from another program attached as this rank */
    int tries = 0, rc;
    while ((rc = flock(fd, LOCK_EX | LOCK_NB)) != 0 &&
           (errno == EINTR || (errno == EWOULDBLOCK && ++tries < 200)))
        usleep(errno == EINTR ? 0 : 1000);
    if (rc) {
        int e = errno == EWOULDBLOCK ? EBUSY : errno;
        char text[32] = "";
        ssize_t n = pread(fd, text, sizeof text - 1, 0);
        if (holder)
            *holder = n > 0 ? strtol(text, NULL, 10) : 0;
        close(fd);
        return -e;
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n)
        zp_warn("%s: cannot write this program's pid (%s): another program that attaches as "
                "rank %d is refused without its holder's pid", path, strerror(errno), rank);
    return fd;
}

int zp_resources_attached(const char *run_dir, int rank)
{
    char path[PATH_MAX + 64];
    zp_resources_attach_path(path, sizeof path, run_dir, rank);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int held = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd); /* releases the test's own lock, when it got one */
    return held;
}

int zp_resources_attach_end(int fd)
{
    return ftruncate(fd, 0) != 0 || pwrite(fd, "end\n", 4, 0) != 4 ? -errno : 0;
}

int zp_resources_attach_ended(const char *run_dir, int rank)
{
    char path[PATH_MAX + 64], text[8] = "";
    zp_resources_attach_path(path, sizeof path, run_dir, rank);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = pread(fd, text, 4, 0);
    close(fd);
    return n == 4 && !memcmp(text, "end\n", 4) && !zp_resources_attached(run_dir, rank);
}

int zp_resources_attach_leave(int fd, int64_t epochs)
{
    char text[40];
    int n = snprintf(text, sizeof text, "left %lld\n", (long long)epochs);
    return ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)n, 0) != n ? -errno : 0;
}

int zp_resources_attach_left(const char *run_dir, int rank, int64_t *epochs)
{
    char path[PATH_MAX + 64], text[40] = "";
    zp_resources_attach_path(path, sizeof path, run_dir, rank);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    long long e;
    if (n < 6 || sscanf(text, "left %lld", &e) != 1 || e < 0 || zp_resources_attached(run_dir, rank))
        return 0;
    *epochs = e;
    return 1;
}

/* ---- the stop mark ------------------------------------------------------------------------- */

static void stopped_path(char *buf, size_t len, const char *run_dir)
{
    snprintf(buf, len, "%s/stopped", run_dir);
}

static int write_why(FILE *out, void *ctx, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    return fprintf(out, "%s\n", (const char *)ctx) < 0 ? -EIO : 0;
}

int zp_resources_mark_stopped(const char *run_dir, const char *why)
{
    char path[PATH_MAX + 16], err[256];
    stopped_path(path, sizeof path, run_dir);
    return zp_files_write_aside(path, write_why, (void *)why, err, sizeof err);
}

int zp_resources_stopped(const char *run_dir, char *buf, size_t len)
{
    char path[PATH_MAX + 16];
    stopped_path(path, sizeof path, run_dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    if (!fgets(buf, (int)len, f))
        snprintf(buf, len, "the run was stopped");
    buf[strcspn(buf, "\n")] = 0;
    fclose(f);
    return 1;
}

void zp_resources_clear_stopped(const char *run_dir)
{
    char path[PATH_MAX + 16];
    stopped_path(path, sizeof path, run_dir);
    unlink(path);
}

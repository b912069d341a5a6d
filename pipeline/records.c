/* records.c — RUN/resources (what a run created, for cleanup after a crash)
 * and the loaders' delivery marks (for the supervisor's restart policy). */
#define _GNU_SOURCE
#include "pipeline/records.h"
#include "pipeline/log.h"
#include "pipeline/rundir.h"
#include "pipeline/stage.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define LINE_MAX_BYTES (PATH_MAX + 16)
#define NEST_MAX 2 /* RUN/rank-<r>, and one more level */

static void record_path(char *buf, size_t len, const char *run_dir)
{
    snprintf(buf, len, "%s/resources", run_dir);
}

/* One line, one write(2): appends from several processes do not interleave. */
static int append_line(const char *run_dir, const char *line, size_t n)
{
    char path[PATH_MAX + 16];
    record_path(path, sizeof path, run_dir);
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

int zp_records_add(const char *run_dir, const char *kind, const char *name)
{
    char line[LINE_MAX_BYTES + 8];
    int n = snprintf(line, sizeof line, "%s %s\n", kind, name);
    if (n < 0 || (size_t)n >= LINE_MAX_BYTES || strchr(name, '\n')) {
        zp_error("%s/resources: cannot record %s %.100s...: name too long", run_dir, kind, name);
        return ZP_EINVAL;
    }
    return append_line(run_dir, line, (size_t)n);
}

int zp_records_start(const char *run_dir)
{
    char host[256] = "";
    if (gethostname(host, sizeof host - 1))
        return -errno;
    return zp_records_add(run_dir, "host", host);
}

int zp_records_add_endpoint(const char *endpoint)
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
    return zp_records_add(run_dir, "sock", path);
}

/* "/zp-<hash of the run directory>-": the start of every segment name of the run. */
static void shm_prefix(char *buf, size_t len, const char *run_dir)
{
    zp_ring_name(buf, len, run_dir, 0);
    char *dash = strchr(buf + 4, '-');
    if (dash)
        dash[1] = 0;
}

/* NAME is one plain file name: not empty, no slash, not . or .. */
static int plain_name(const char *s)
{
    return *s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

static int starts_with(const char *s, const char *prefix, const char **rest)
{
    size_t n = strlen(prefix);
    if (strncmp(s, prefix, n))
        return 0;
    *rest = s + n;
    return 1;
}

typedef struct {
    char host[256];
    int foreign, removed, refused;
} sweep_t;

static int sweep_run(const char *run_dir, int depth, sweep_t *sw);

/* Removes what one line names when it belongs to run_dir; counts the rest. */
static void sweep_line(const char *run_dir, int depth, char *line, sweep_t *sw)
{
    char prefix[160], under[PATH_MAX + 16];
    const char *rest;
    char *name = strchr(line, ' ');
    if (!name) {
        sw->refused++;
        return;
    }
    *name++ = 0;
    if (!strcmp(line, "host"))
        return;
    if (!strcmp(line, "shm")) {
        shm_prefix(prefix, sizeof prefix, run_dir);
        if (starts_with(name, prefix, &rest) && plain_name(rest)) {
            sw->removed += shm_unlink(name) == 0;
            return;
        }
    } else if (!strcmp(line, "sock")) {
        snprintf(under, sizeof under, "%s/sock/", run_dir);
        if (starts_with(name, under, &rest) && plain_name(rest)) {
            sw->removed += unlink(name) == 0;
            return;
        }
    } else if (!strcmp(line, "run")) {
        snprintf(under, sizeof under, "%s/", run_dir);
        if (starts_with(name, under, &rest) && plain_name(rest) && depth < NEST_MAX) {
            if (!zp_rundir_live_pid(name) && !sweep_run(name, depth + 1, sw)) {
                snprintf(under, sizeof under, "%s/supervisor.pid", name); /* dead: its record says so */
                unlink(under);
            }
            return;
        }
    }
    sw->refused++;
}

/* The run's record, or NULL; *foreign set when it names another host. */
static FILE *open_record(const char *run_dir, const char *me, int *foreign)
{
    char path[PATH_MAX + 16], line[LINE_MAX_BYTES];
    record_path(path, sizeof path, run_dir);
    *foreign = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "host ", 5) && strcmp(line + 5, me))
            *foreign = 1;
    }
    rewind(f);
    return f;
}

/* Sweeps one run's record; 0, or -1 when it has none or is another host's. */
static int sweep_run(const char *run_dir, int depth, sweep_t *sw)
{
    int foreign;
    FILE *f = open_record(run_dir, sw->host, &foreign);
    if (!f || foreign) {
        sw->foreign += foreign;
        if (f)
            fclose(f);
        return -1;
    }
    char line[LINE_MAX_BYTES], path[PATH_MAX + 16];
    while (fgets(line, sizeof line, f)) {
        size_t n = strcspn(line, "\n");
        if (!line[n] && !feof(f)) { /* longer than any name we write: skip the rest of it */
            int c;
            while ((c = fgetc(f)) != EOF && c != '\n')
                ;
            sw->refused++;
            continue;
        }
        line[n] = 0;
        if (n)
            sweep_line(run_dir, depth, line, sw);
    }
    fclose(f);
    record_path(path, sizeof path, run_dir);
    unlink(path);
    return 0;
}

static void my_host(char *buf, size_t len)
{
    buf[0] = 0;
    if (gethostname(buf, len - 1))
        buf[0] = 0;
    buf[len - 1] = 0;
}

int zp_records_foreign(const char *run_dir)
{
    char me[256];
    int foreign;
    my_host(me, sizeof me);
    FILE *f = open_record(run_dir, me, &foreign);
    if (f)
        fclose(f);
    return foreign;
}

void zp_records_cleanup(const char *run_dir)
{
    sweep_t sw = {.foreign = 0};
    my_host(sw.host, sizeof sw.host);
    sweep_run(run_dir, 0, &sw);
    if (sw.refused)
        fprintf(stderr, "zeus-pipe: %s/resources: left alone %d line(s) that name nothing of this "
                        "run (a segment or file of another run, or a malformed line)\n",
                run_dir, sw.refused);
    if (sw.foreign)
        fprintf(stderr, "zeus-pipe: %s: left alone %d run folder(s) of another host: only a "
                        "process there can remove their shared memory\n", run_dir, sw.foreign);
}

/* ---- loaders' delivery marks ---------------------------------------------------------------- */

static void mark_path(char *buf, size_t len, const char *run_dir, int instance)
{
    snprintf(buf, len, "%s/logs/loader-%d.delivered", run_dir, instance);
}

int zp_records_mark_delivered(const char *run_dir, int instance)
{
    char path[PATH_MAX + 64], pid[24];
    mark_path(path, sizeof path, run_dir, instance);
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

int zp_records_delivered(const char *run_dir, int instance, pid_t pid)
{
    char path[PATH_MAX + 64], buf[24] = "";
    mark_path(path, sizeof path, run_dir, instance);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    char *end;
    long v = strtol(buf, &end, 10);
    if (end == buf || v != (long)pid)
        return 0; /* another process's mark, or half written */
    unlink(path);
    return 1;
}

/* rundir.c — run directories: made (runs/NAME, NAME-2, ...), found by name or
 * as the latest, and swept of what a dead run left (RUN/resources). */
#define _GNU_SOURCE
#include "pipeline/base/files.h"
#include "pipeline/base/log.h"
#include "pipeline/base/resources.h"
#include "pipeline/ring/ring.h"
#include "pipeline/supervisor/supervisor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int zp_rundir_create(const char *dir, const char *name, char *out, size_t len)
{
    int rc = zp_files_mkdirs(dir, 0755);
    if (rc)
        return rc;
    char path[PATH_MAX], real[PATH_MAX];
    for (int i = 1; i < 10000; i++) {
        if (i == 1)
            snprintf(path, sizeof path, "%s/%s", dir, name);
        else
            snprintf(path, sizeof path, "%s/%s-%d", dir, name, i);
        if (mkdir(path, 0755) == 0)
            break;
        if (errno != EEXIST)
            return -errno;
    }
    if (!realpath(path, real))
        return -errno;
    if ((rc = zp_rundir_subdirs(real)))
        return rc;
    snprintf(out, len, "%s", real);
    return 0;
}

int zp_rundir_subdirs(const char *run_dir)
{
    char sub[PATH_MAX + 8];
    snprintf(sub, sizeof sub, "%s/sock", run_dir);
    if (mkdir(sub, 0700) && errno != EEXIST)
        return -errno;
    snprintf(sub, sizeof sub, "%s/logs", run_dir);
    if (mkdir(sub, 0755) && errno != EEXIST)
        return -errno;
    return 0;
}

int zp_rundir_start(const zp_config_t *cfg, const char *name, char *out, size_t len)
{
    zp_rundir_cleanup_stale(cfg->run_dir);
    return zp_rundir_make(cfg, cfg->run_dir, name, out, len);
}

int zp_rundir_make(const zp_config_t *cfg, const char *dir, const char *name, char *out, size_t len)
{
    int rc = zp_rundir_create(dir, name, out, len);
    if (rc) {
        fprintf(stderr, "zeus-pipe: %s/%s: cannot create the run directory: %s\n", dir, name,
                zp_strerror(rc));
        return 1;
    }
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/config.yaml", out);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "zeus-pipe: %s: %s\n", path, strerror(errno));
        return 1;
    }
    zp_config_print(cfg, f);
    fclose(f);
    if ((rc = zp_resources_start(out))) {
        fprintf(stderr, "zeus-pipe: %s/resources: %s\n", out, zp_strerror(rc));
        return 1;
    }
    snprintf(path, sizeof path, "%s/supervisor.pid", out);
    if ((f = fopen(path, "w"))) {
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
    }
    return 0;
}

pid_t zp_rundir_live_pid(const char *run)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/supervisor.pid", run);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    long pid = 0;
    if (fscanf(f, "%ld", &pid) != 1)
        pid = 0;
    fclose(f);
    if (pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH))
        return 0;
    return (pid_t)pid;
}

/* The newest folder under runs/ that holds a config.yaml, into dir. */
static int newest_run(char *dir, size_t len)
{
    DIR *d = opendir("runs");
    char path[PATH_MAX], best[PATH_MAX] = "";
    time_t newest = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        struct stat st;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "runs/%s/config.yaml", e->d_name);
        if (stat(path, &st) == 0 && (!best[0] || st.st_mtime > newest)) {
            newest = st.st_mtime;
            snprintf(best, sizeof best, "runs/%s", e->d_name);
        }
    }
    if (d)
        closedir(d);
    if (!best[0] || !realpath(best, dir)) {
        fprintf(stderr, "zeus-pipe: no run under runs/ (from here); name one: RUN is a run "
                        "directory or a name under runs/\n");
        return 2;
    }
    fprintf(stderr, "zeus-pipe: no run is running; the latest: %s\n", best);
    (void)len;
    return 0;
}

static int find_run(const char *run, char *dir, size_t len, int latest)
{
    char path[PATH_MAX];
    struct stat st;
    if (run) {
        if (stat(run, &st) == 0 && S_ISDIR(st.st_mode))
            snprintf(path, sizeof path, "%s", run);
        else
            snprintf(path, sizeof path, "runs/%s", run);
        if (!realpath(path, dir)) {
            fprintf(stderr, "zeus-pipe: no run '%s' (neither a directory nor runs/%s)\n", run, run);
            return 2;
        }
        return 0;
    }
    DIR *d = opendir("runs");
    int found = 0;
    char names[2048] = "";
    if (d) {
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.')
                continue;
            snprintf(path, sizeof path, "runs/%s", e->d_name);
            if (!zp_rundir_live_pid(path))
                continue;
            if (found++ == 0 && !realpath(path, dir))
                found--;
            size_t n = strlen(names);
            snprintf(names + n, sizeof names - n, " %s", e->d_name);
        }
        closedir(d);
    }
    if (found == 1)
        return 0;
    if (found == 0 && latest)
        return newest_run(dir, len);
    if (found == 0)
        fprintf(stderr, "zeus-pipe: no running run under runs/; name one: RUN is a run directory or a name under runs/\n");
    else
        fprintf(stderr, "zeus-pipe: %d runs are running (%s ); name one\n", found, names);
    (void)len;
    return 2;
}

int zp_rundir_find(const char *run, char *dir, size_t len)
{
    return find_run(run, dir, len, 0);
}

int zp_rundir_find_or_latest(const char *run, char *dir, size_t len)
{
    return find_run(run, dir, len, 1);
}

/* ---- after a run: what RUN/resources lists (pipeline/base/resources.h) ------------------------------ */

#define NEST_MAX 2 /* RUN/rank-<r>, and one more level */

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
    char path[PATH_MAX + 16], line[ZP_RESOURCES_LINE_MAX];
    zp_resources_path(path, sizeof path, run_dir);
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
    char line[ZP_RESOURCES_LINE_MAX], path[PATH_MAX + 16];
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
    zp_resources_path(path, sizeof path, run_dir);
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

int zp_rundir_foreign(const char *run_dir)
{
    char me[256];
    int foreign;
    my_host(me, sizeof me);
    FILE *f = open_record(run_dir, me, &foreign);
    if (f)
        fclose(f);
    return foreign;
}

void zp_rundir_remove_resources(const char *run_dir)
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

int zp_rundir_delivered(const char *run_dir, int instance, pid_t pid)
{
    char path[PATH_MAX + 64], buf[24] = "";
    zp_resources_mark_path(path, sizeof path, run_dir, instance);
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

/* Removes what the run recorded that it created (pipeline/base/resources.h):
 * every rank's ring, the socket files, nested Slurm ranks; then its pid file. */
void zp_rundir_cleanup(const char *run_dir)
{
    char path[PATH_MAX + 64];
    if (zp_rundir_foreign(run_dir))
        return; /* its supervisor's host cleans up after it */
    zp_rundir_remove_resources(run_dir);
    snprintf(path, sizeof path, "%s/supervisor.pid", run_dir);
    unlink(path);
}

/* A supervisor killed with SIGKILL cannot clean up; its stages die with it
 * (PR_SET_PDEATHSIG), and the next `up` removes what it left behind. */
void zp_rundir_cleanup_stale(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char run[PATH_MAX], pidfile[PATH_MAX + 32];
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(run, sizeof run, "%s/%s", dir, e->d_name);
        snprintf(pidfile, sizeof pidfile, "%s/supervisor.pid", run);
        char real[PATH_MAX];
        if (access(pidfile, F_OK) || zp_rundir_live_pid(run) || !realpath(run, real) ||
            zp_rundir_foreign(real))
            continue;
        fprintf(stderr, "zeus-pipe: cleaning up after %s, whose supervisor died\n", real);
        zp_rundir_cleanup(real);
    }
    closedir(d);
}


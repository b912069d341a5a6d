#define _GNU_SOURCE
#include "pipeline/rundir.h"
#include "pipeline/cmd.h"
#include "pipeline/log.h"
#include "pipeline/proc.h"
#include "pipeline/records.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int mkdir_p(const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0755) && errno != EEXIST)
                return -errno;
            *p = '/';
        }
    if (mkdir(buf, mode) && errno != EEXIST)
        return -errno;
    return 0;
}

int zp_rundir_create(const char *dir, const char *name, char *out, size_t len)
{
    int rc = mkdir_p(dir, 0755);
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
    char sub[PATH_MAX + 8];
    snprintf(sub, sizeof sub, "%s/sock", real);
    if (mkdir(sub, 0700) && errno != EEXIST)
        return -errno;
    snprintf(sub, sizeof sub, "%s/logs", real);
    if (mkdir(sub, 0755) && errno != EEXIST)
        return -errno;
    snprintf(out, len, "%s", real);
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
    if ((rc = zp_records_start(out))) {
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

int zp_find_run(const char *run, char *dir, size_t len)
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
    if (found == 0)
        fprintf(stderr, "zeus-pipe: no running run under runs/; name one: RUN is a run directory or a name under runs/\n");
    else
        fprintf(stderr, "zeus-pipe: %d runs are running (%s ); name one\n", found, names);
    (void)len;
    return 2;
}

/* fuzz_rundir.h — what the run-file fuzz targets share: one run directory
 * a process (made on first use under /tmp, removed at exit) into which an
 * input is written as a run's file, and a sink for what a reader writes.
 * A refusal must say why: a reader that fails with an empty err aborts. */
#ifndef ZP_FUZZ_RUNDIR_H
#define ZP_FUZZ_RUNDIR_H

#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char fuzz_dir[64];

static void fuzz_rundir_remove(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir);
    if (system(cmd))
        fprintf(stderr, "fuzz: cannot remove %s\n", fuzz_dir);
}

/* The run directory (with dataset/ and checkpoints/), made once. */
static const char *fuzz_rundir(void)
{
    if (!fuzz_dir[0]) {
        char sub[96];
        snprintf(fuzz_dir, sizeof fuzz_dir, "/tmp/zp-fuzz-XXXXXX");
        if (!mkdtemp(fuzz_dir))
            abort();
        snprintf(sub, sizeof sub, "%s/dataset", fuzz_dir);
        mkdir(sub, 0755);
        snprintf(sub, sizeof sub, "%s/checkpoints", fuzz_dir);
        mkdir(sub, 0755);
        atexit(fuzz_rundir_remove);
    }
    return fuzz_dir;
}

/* <run>/name holds exactly data[0..n); NULL data removes it. */
static void fuzz_put(const char *name, const void *data, size_t n)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%s", fuzz_rundir(), name);
    if (!data) {
        unlink(path);
        return;
    }
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n)
        abort();
    fclose(f);
}

/* A stream that keeps nothing: the readers' output is not the point. */
static FILE *fuzz_sink(void)
{
    static FILE *f;
    if (!f && !(f = fopen("/dev/null", "w")))
        abort();
    return f;
}

/* rc non-zero with nothing in err: a refusal that does not say why. */
static void fuzz_said_why(int rc, const char *err)
{
    if (rc && !err[0]) {
        fprintf(stderr, "fuzz: refused (%d) without saying why\n", rc);
        abort();
    }
}

#endif

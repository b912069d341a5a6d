/* slurm.c — the Slurm environment of `srun zeus-pipe up`: rank, world, node
 * and job, the first host of a node list, and the rendezvous file's path. */
#define _GNU_SOURCE
#include "pipeline/base/slurm.h"
#include "pipeline/base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

/* A whole decimal in [lo, hi] from the environment variable `name`. */
static int env_int(const char *name, long lo, long hi, int *out, char *why, size_t len)
{
    const char *v = getenv(name);
    char *end = NULL;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || end == v || *end || x < lo || x > hi) {
        snprintf(why, len, "%s=%.40s: expected a whole number in %ld..%ld", name, v ? v : "", lo, hi);
        return ZP_EINVAL;
    }
    *out = (int)x;
    return 0;
}

int zp_slurm_hostlist_first(const char *list, char *out, size_t len)
{
    size_t n = 0;
    for (const char *p = list; *p && *p != ','; p++) {
        if (*p == '[') { /* the first name of a range list: up to ',', '-' or ']' */
            const char *q = p + 1;
            while (*q >= '0' && *q <= '9' && n + 1 < len)
                out[n++] = *q++;
            if (q == p + 1 || (*q != ',' && *q != '-' && *q != ']'))
                return ZP_EINVAL;
            p = strchr(q, ']');
            if (!p)
                return ZP_EINVAL;
            continue;
        }
        if (*p == ']' || n + 1 >= len)
            return ZP_EINVAL;
        out[n++] = *p;
    }
    out[n] = 0;
    return n ? 0 : ZP_EINVAL;
}

int zp_slurm_detect(zp_slurm_t *s, char *why, size_t len)
{
    memset(s, 0, sizeof *s);
    const char *nodes = getenv("SLURM_STEP_NODELIST");
    if (!nodes)
        nodes = getenv("SLURM_NODELIST");
    if (!getenv("SLURM_PROCID") || !getenv("SLURM_NTASKS") || !getenv("SLURM_LOCALID") || !nodes)
        return 0;
    if (env_int("SLURM_NTASKS", 1, 4096, &s->world, why, len) ||
        env_int("SLURM_PROCID", 0, s->world - 1, &s->rank, why, len) ||
        env_int("SLURM_LOCALID", 0, 4095, &s->local, why, len))
        return ZP_EINVAL;
    if (s->world == 1)
        return 0;
    const char *here = s->rank == 0 ? getenv("SLURMD_NODENAME") : NULL;
    if (here && *here && strlen(here) < sizeof s->host)
        snprintf(s->host, sizeof s->host, "%s", here);
    else if (zp_slurm_hostlist_first(nodes, s->host, sizeof s->host)) {
        snprintf(why, len, "SLURM_NODELIST=%.200s: not a host list", nodes);
        return ZP_EINVAL;
    }
    const char *node = getenv("SLURMD_NODENAME");
    if (node && *node && strlen(node) < sizeof s->node)
        snprintf(s->node, sizeof s->node, "%s", node);
    else if (gethostname(s->node, sizeof s->node - 1) || !s->node[0])
        snprintf(s->node, sizeof s->node, "localhost");
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
    const char *restart = getenv("SLURM_RESTART_COUNT"); /* a requeued job's steps have the same ids */
    snprintf(s->job, sizeof s->job, "%.30s.%.30s%s%.10s", job ? job : "0", step ? step : "0",
             restart && atoi(restart) > 0 ? ".r" : "", restart && atoi(restart) > 0 ? restart : "");
    for (char *p = s->job; *p; p++)
        if (*p == '/')
            *p = '_';
    return 1;
}

void zp_slurm_meet_path(char *buf, size_t len, const char *run_dir, const zp_slurm_t *s)
{
    snprintf(buf, len, "%s/.slurm-%s", run_dir, s->job);
}

void zp_slurm_node_path(char *buf, size_t len, const char *run0, const char *node)
{
    int n = snprintf(buf, len, "%s/node-", run0);
    for (const char *p = node; n >= 0 && (size_t)n + 1 < len && *p; p++)
        buf[n++] = *p == '/' ? '_' : *p;
    if (n >= 0 && (size_t)n < len)
        buf[n] = 0;
}

int zp_slurm_nodes(void)
{
    const char *names[] = {"SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES"};
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(names[i]);
        char *end = NULL;
        long n = v ? strtol(v, &end, 10) : 0;
        if (v && end != v && !*end && n > 0 && n < 1000000)
            return (int)n;
    }
    return 1;
}

int zp_slurm_local_fs(const char *path, char *fs, size_t len)
{
    static const struct {
        unsigned long magic;
        const char *name;
    } NET[] = {{0x6969, "NFS"},          {0x0BD00BD0, "Lustre"}, {0x47504653, "GPFS"},
               {0xFF534D42, "CIFS"},     {0xFE534D42, "SMB2"},   {0x517B, "SMB"},
               {0x19830326, "BeeGFS"},   {0x00C36400, "CephFS"}, {0x5346414F, "AFS"}};
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    struct statfs sf;
    while (statfs(dir, &sf)) { /* not made yet: its nearest folder that is */
        char *slash = strrchr(dir, '/');
        if (!slash)
            snprintf(dir, sizeof dir, ".");
        else if (slash == dir)
            dir[1] = 0;
        else
            *slash = 0;
        if ((!slash || slash == dir) && statfs(dir, &sf))
            return 0; /* nothing to say */
        if (!slash || slash == dir)
            break;
    }
    for (size_t i = 0; i < sizeof NET / sizeof *NET; i++)
        if ((unsigned long)sf.f_type == NET[i].magic) {
            snprintf(fs, len, "%s", NET[i].name);
            return ZP_EINVAL;
        }
    return 0;
}

int zp_slurm_cache_local(const char *path, char *why, size_t len)
{
    char fs[16];
    int nodes = zp_slurm_nodes();
    if (nodes < 2 || !zp_slurm_local_fs(path, fs, sizeof fs))
        return 0;
    snprintf(why, len, "cache.path %.300s is on %s, a filesystem the %d nodes share: each node keeps "
             "its own cache, and LMDB does not work over a network filesystem; set cache.path to a "
             "local disk (e.g. /tmp/zp-cache, or the job's local scratch)", path, fs, nodes);
    return ZP_EINVAL;
}

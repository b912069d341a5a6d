#define _GNU_SOURCE
#include "pipeline/slurm.h"
#include "pipeline/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int zp_hostlist_first(const char *list, char *out, size_t len)
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
    else if (zp_hostlist_first(nodes, s->host, sizeof s->host)) {
        snprintf(why, len, "SLURM_NODELIST=%.200s: not a host list", nodes);
        return ZP_EINVAL;
    }
    const char *node = getenv("SLURMD_NODENAME");
    if (node && *node && strlen(node) < sizeof s->node)
        snprintf(s->node, sizeof s->node, "%s", node);
    else if (gethostname(s->node, sizeof s->node - 1) || !s->node[0])
        snprintf(s->node, sizeof s->node, "localhost");
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
    snprintf(s->job, sizeof s->job, "%.30s.%.30s", job ? job : "0", step ? step : "0");
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

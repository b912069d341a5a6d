/* meet.c — `srun zeus-pipe up CONFIG`: every Slurm task is one rank
 * (pipeline/slurm.h). Rank 0 creates the run and announces it in a
 * rendezvous file on the shared run.dir; rank r > 0 waits for it, checks
 * that its config is rank 0's word for word and runs in RUN/rank-<r>. */
#define _GNU_SOURCE
#include "pipeline/log.h"
#include "pipeline/resources.h"
#include "pipeline/slurm.h"
#include "pipeline/supervisor/supervisor.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Rank 0: the ranks' keys (a CURVE pair each; rank 0's stages let a rank's
 * key in as that rank, pipeline/zap.h) and the rendezvous, written whole
 * and then renamed. */
int zp_sup_announce(zp_sup_t *s)
{
    char path[PATH_MAX + 80];
    if (zp_sup_run_key(s, "ranks", s->slurm.world))
        return 2;
    zp_slurm_meet_path(s->meet, sizeof s->meet, s->cfg.run_dir, &s->slurm);
    snprintf(path, sizeof path, "%s.tmp", s->meet);
    FILE *f = fopen(path, "w");
    int ok = f && fprintf(f, "run %s\nhost %s\nbind %s\n", s->run_dir, s->slurm.host, s->cfg.bind) > 0;
    if (f && fclose(f))
        ok = 0;
    if (!ok || rename(path, s->meet)) {
        fprintf(stderr, "zeus-pipe: %s: %s\n", s->meet, strerror(errno));
        s->meet[0] = 0;
        return 2;
    }
    fprintf(stderr, "zeus-pipe: Slurm rank 0 of %d on %s: the other ranks connect to ports %s+0..3\n",
            s->slurm.world, s->slurm.host, s->cfg.bind);
    return 0;
}

/* 0 when rank 0's resolved config (RUN/config.yaml) is ours, word for word:
 * ranks that trained different models would sum nonsense. */
static int same_config(const zp_sup_t *s, const char *run0)
{
    char path[PATH_MAX + 32], *mine = NULL, *theirs = NULL;
    size_t n = 0, m = 0;
    FILE *ms = open_memstream(&mine, &n);
    if (!ms)
        return 1;
    zp_config_print(&s->cfg, ms);
    fclose(ms);
    snprintf(path, sizeof path, "%s/config.yaml", run0);
    FILE *f = fopen(path, "r");
    int rc = !f || getdelim(&theirs, &m, 0, f) < 0;
    if (f)
        fclose(f);
    if (rc)
        fprintf(stderr, "zeus-pipe: %s: %s\n", path, strerror(errno ? errno : EIO));
    const char *a = mine, *b = theirs;
    while (!rc && (*a || *b)) {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        if (la != lb || memcmp(a, b, la)) {
            fprintf(stderr, "zeus-pipe: Slurm rank %d: its config differs from rank 0's (%s):\n"
                    "  rank 0:    %.*s\n  this rank: %.*s\n", s->slurm.rank, path, (int)lb, b, (int)la, a);
            rc = 1;
        }
        a += la + !!a[la], b += lb + !!b[lb];
    }
    free(mine);
    free(theirs);
    return rc;
}

/* Rank r > 0: waits up to trainer.comm_timeout_s for rank 0's rendezvous,
 * then makes RUN/rank-<r> its run directory, with the same resolved config. */
static int slurm_join(zp_sup_t *s)
{
    char path[PATH_MAX + 64], line[PATH_MAX + 32], run0[PATH_MAX] = "", host[256] = "", bind[256] = "";
    zp_slurm_meet_path(path, sizeof path, s->cfg.run_dir, &s->slurm);
    fprintf(stderr, "zeus-pipe: Slurm rank %d of %d: waiting for rank 0 to announce itself in %s\n",
            s->slurm.rank, s->slurm.world, path);
    int64_t deadline = zp_now_ns() + s->cfg.comm_timeout_s * 1000000000ll;
    FILE *f;
    while (!(f = fopen(path, "r"))) {
        if (zp_now_ns() > deadline) {
            fprintf(stderr, "zeus-pipe: Slurm rank %d: no word from rank 0 within trainer.comm_timeout_s "
                    "(%lld s): did rank 0 start, and is run.dir (%s) on a filesystem every node sees?\n",
                    s->slurm.rank, (long long)s->cfg.comm_timeout_s, s->cfg.run_dir);
            return 1;
        }
        usleep(100000);
    }
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "run ", 4))
            snprintf(run0, sizeof run0, "%.4000s", line + 4);
        else if (!strncmp(line, "host ", 5))
            snprintf(host, sizeof host, "%.250s", line + 5);
        else if (!strncmp(line, "bind ", 5))
            snprintf(bind, sizeof bind, "%.250s", line + 5);
    }
    fclose(f);
    if (!run0[0] || !host[0] || strcmp(bind, s->cfg.bind)) {
        fprintf(stderr, "zeus-pipe: %s: expected run, host and bind %s (got run '%s', host '%s', bind '%s')\n",
                path, s->cfg.bind, run0, host, bind);
        return 2;
    }
    if (same_config(s, run0))
        return 2;
    snprintf(s->slurm.host, sizeof s->slurm.host, "%s", host);
    snprintf(s->watch, sizeof s->watch, "%s", path);
    char name[32];
    snprintf(name, sizeof name, "rank-%d", s->slurm.rank);
    int rc = zp_rundir_make(&s->cfg, run0, name, s->run_dir, sizeof s->run_dir);
    /* in rank 0's record: a cleanup of the run reaches this rank's leftovers */
    return rc ? rc : zp_resources_add(run0, "run", s->run_dir) ? 1 : 0;
}

/* `srun zeus-pipe up CONFIG`: this task's part of the run. */
int zp_sup_prepare_slurm(zp_sup_t *s)
{
    s->cfg.transport = ZP_TRANSPORT_TCP; /* rank 0 takes the other hosts' loaders */
    const char *colon = strrchr(s->cfg.bind, ':');
    long port = colon ? strtol(colon + 1, NULL, 10) : 0;
    if (port < 1 || port > 65532) {
        fprintf(stderr, "zeus-pipe: transport.bind: under Slurm rank 0 listens on its port and the "
                        "next three; expected HOST:PORT with PORT 1..65532 (got %s)\n", s->cfg.bind);
        return 2;
    }
    if (s->cfg.gpus != 1 && s->slurm.rank == 0)
        fprintf(stderr, "zeus-pipe: note: trainer.gpus is %lld, but under Slurm each of the %d tasks is "
                        "one rank (ask Slurm for the tasks: srun --ntasks-per-node=GPUS)\n",
                (long long)s->cfg.gpus, s->slurm.world);
    if (s->slurm.rank > 0)
        return slurm_join(s); /* no cache of its own: rank 0's host holds it */
    if (s->cfg.cache_enabled && zp_cache_prepare(&s->cfg, &s->ds->meta))
        return 2;
    return zp_rundir_start(&s->cfg, s->cfg.run_name, s->run_dir, sizeof s->run_dir);
}

/* Rank r > 0: 1 when rank 0's run ended (its rendezvous file is gone) more
 * than 10 s ago while this rank still trains: stopped by `zeus-pipe down` or
 * a signal, rank 0 no longer answers the sums. Looked at once a second. */
int zp_sup_rank0_gone(zp_sup_t *s)
{
    int64_t now = zp_now_ns();
    if (!s->watch[0] || now < s->watch_next)
        return 0;
    s->watch_next = now + 1000000000ll;
    if (access(s->watch, F_OK) == 0)
        s->gone_since = 0;
    else if (!s->gone_since)
        s->gone_since = now;
    return s->gone_since && now - s->gone_since > 10000000000ll;
}

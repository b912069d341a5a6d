/* meet.c — `srun zeus-pipe up CONFIG`: every Slurm task is one rank
 * (pipeline/base/slurm.h). Rank 0 creates the run and announces it in a
 * rendezvous file on the shared run.dir; rank r > 0 waits for it, checks
 * that its config is rank 0's word for word and runs in RUN/rank-<r>. Each
 * node's first task prepares the node's cache and announces its data plane
 * in RUN/node-<node>; the node's other tasks wait for that and use it. */
#define _GNU_SOURCE
#include "pipeline/base/log.h"
#include "pipeline/base/resources.h"
#include "pipeline/base/slurm.h"
#include "pipeline/supervisor/supervisor.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* This host's IPv4 addresses on interfaces that are up, comma-separated,
 * no loopback: where the other ranks reach rank 0 when its node's name does
 * not resolve there (a rank on rank 0's node reaches these too). */
static void own_addresses(char *buf, size_t len)
{
    struct ifaddrs *all = NULL;
    size_t n = 0;
    buf[0] = 0;
    if (getifaddrs(&all))
        return;
    for (struct ifaddrs *i = all; i; i = i->ifa_next) {
        char a[INET_ADDRSTRLEN];
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK) ||
            !(i->ifa_flags & IFF_UP) ||
            !inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, a, sizeof a))
            continue;
        if (n + strlen(a) + 2 > len)
            break;
        n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "," : "", a);
    }
    freeifaddrs(all);
}

/* Rank 0: the ranks' keys (a CURVE pair each; rank 0's stages let a rank's
 * key in as that rank, pipeline/stage/zap.h) and the rendezvous, written whole
 * and then renamed: the run, rank 0's host and addresses, the port. */
int zp_sup_announce(zp_sup_t *s)
{
    char path[PATH_MAX + 80], addr[512];
    if (s->resuming && s->resume_world != s->slurm.world) { /* other ranks: their keys anew */
        snprintf(path, sizeof path, "%s/ranks.key", s->run_dir);
        unlink(path);
        snprintf(path, sizeof path, "%s/ranks.pub", s->run_dir);
        unlink(path);
    }
    if (zp_sup_run_key(s, "ranks", s->slurm.world))
        return 2;
    zp_slurm_meet_path(s->meet, sizeof s->meet, s->cfg.run_dir, &s->slurm);
    snprintf(path, sizeof path, "%s.tmp", s->meet);
    own_addresses(addr, sizeof addr);
    FILE *f = fopen(path, "w");
    int ok = f && fprintf(f, "run %s\nhost %s\nbind %s\naddr %s\n", s->run_dir, s->slurm.host,
                          s->cfg.bind, addr) > 0;
    if (ok && s->resuming) /* where every rank must find itself going on */
        ok = fprintf(f, "resume %llu %llu %llu\n", (unsigned long long)s->resume.epoch,
                     (unsigned long long)s->resume.batch, (unsigned long long)s->resume.step) > 0;
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

/* 1 for the line of cache.path in a printed config (its section "cache:"
 * seen last): each node keeps its cache on its own disk, where it likes. */
static int node_local_line(const char *line, size_t len, int *in_cache)
{
    if (len && line[0] != ' ')
        *in_cache = len == 6 && !memcmp(line, "cache:", 6);
    return *in_cache && len > 7 && !memcmp(line, "  path:", 7);
}

/* 0 when rank 0's resolved config (RUN/config.yaml) is ours, word for word
 * but for cache.path: ranks that trained different models would sum nonsense. */
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
    int in_a = 0, in_b = 0;
    while (!rc && (*a || *b)) {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        int local = node_local_line(a, la, &in_a) & node_local_line(b, lb, &in_b);
        if (!local && (la != lb || memcmp(a, b, la))) {
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

/* Waits up to trainer.comm_timeout_s for the file `path`, saying what for;
 * NULL after printing why (`whose` names who writes it). */
static FILE *wait_for(const zp_sup_t *s, const char *path, const char *whose, const char *advice)
{
    fprintf(stderr, "zeus-pipe: Slurm rank %d of %d: waiting for %s in %s\n", s->slurm.rank,
            s->slurm.world, whose, path);
    int64_t deadline = zp_now_ns() + s->cfg.comm_timeout_s * 1000000000ll;
    FILE *f;
    while (!(f = fopen(path, "r"))) {
        if (zp_now_ns() > deadline) {
            fprintf(stderr, "zeus-pipe: Slurm rank %d: no word from %s within trainer.comm_timeout_s "
                    "(%lld s): %s\n", s->slurm.rank, whose, (long long)s->cfg.comm_timeout_s, advice);
            return NULL;
        }
        usleep(100000);
    }
    return f;
}

/* The value of "key VALUE" lines of f into out (len[i] bytes each, the
 * terminating zero included), for each of the n keys; closes f. A value that
 * does not fit its field is never cut: returns -1 with *bad set to its key
 * (reading stops there), else 0. A line longer than any field counts as too
 * long for the key it starts with, and is skipped whole when it starts with
 * none. */
static int read_fields(FILE *f, const char *const *keys, char *const *out, const size_t *len, int n,
                       const char **bad)
{
    char line[PATH_MAX + 512];
    int rc = 0, skipping = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        size_t m = strcspn(line, "\n");
        int whole = line[m] == '\n' || feof(f);
        line[m] = 0;
        if (skipping) { /* the rest of a line too long for any field */
            skipping = !whole;
            continue;
        }
        for (int i = 0; i < n; i++) {
            size_t k = strlen(keys[i]);
            if (strncmp(line, keys[i], k) || line[k] != ' ')
                continue;
            if (!whole || m - k - 1 >= len[i]) {
                *bad = keys[i];
                rc = -1;
                break;
            }
            memcpy(out[i], line + k + 1, m - k); /* the value and its zero */
        }
        skipping = !whole;
    }
    fclose(f);
    return rc;
}

/* read_fields() on the rendezvous `path`, saying which value was too long. */
static int read_rendezvous(FILE *f, const char *path, const char *const *keys, char *const *out,
                           const size_t *len, int n)
{
    const char *bad = NULL;
    if (!read_fields(f, keys, out, len, n, &bad))
        return 0;
    for (int i = 0; i < n; i++)
        if (keys[i] == bad)
            fprintf(stderr, "zeus-pipe: %s: the value of '%s' is longer than this supervisor's field "
                    "for it (%zu bytes at most)\n", path, bad, len[i] - 1);
    return -1;
}

/* One TCP connection to host:port within `ms`: 0, or an errno (a
 * resolver's failure as -1 with its words in why). */
static int try_connect(const char *host, int port, int ms, char *why, size_t len)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    int g = getaddrinfo(host, service, &hints, &res);
    if (g) {
        snprintf(why, len, "%s does not resolve here (%s)", host, gai_strerror(g));
        return -1;
    }
    int rc = ETIMEDOUT;
    for (struct addrinfo *a = res; a && rc; a = a->ai_next) {
        int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            rc = errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
            rc = 0;
        } else if (errno == EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            socklen_t el = sizeof rc;
            if (poll(&p, 1, ms) != 1)
                rc = ETIMEDOUT;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &rc, &el))
                rc = errno;
        } else {
            rc = errno;
        }
        close(fd);
    }
    freeaddrinfo(res);
    if (rc)
        snprintf(why, len, "%s:%d: %s", host, port, strerror(rc));
    return rc;
}

/* Rank r > 0: rank 0's events port (bind's P+2, where every rank's stages
 * connect) reached by its host's name, else — only where the name does not
 * resolve here, or leads nowhere (no route, no answer) — by one of the
 * addresses it announced; the one that answers goes into s->slurm.host, for
 * this rank's stages and a program's MASTER_ADDR. A refused connection is
 * rank 0's logger still starting: tried again, for ZP_REACH_S seconds in all,
 * then said, with why each way failed. 0, or 1. */
#define ZP_REACH_S 20
static int reach_rank0(zp_sup_t *s, const char *host, const char *addrs, int port)
{
    char why[2][300] = {"", ""}, pick[64] = "";
    int64_t deadline = zp_now_ns() + ZP_REACH_S * 1000000000ll;
    for (;;) {
        int named = try_connect(host, port, 1000, why[0], sizeof why[0]);
        if (named == 0)
            return 0;
        why[1][0] = 0;
        int lost = named == -1 || named == ETIMEDOUT || named == ENETUNREACH || named == EHOSTUNREACH;
        for (const char *a = lost ? addrs : ""; *a && !pick[0];) { /* "10.0.0.1,192.0.2.2" */
            size_t n = strcspn(a, ",");
            char one[64];
            snprintf(one, sizeof one, "%.*s", (int)(n < sizeof one ? n : sizeof one - 1), a);
            if (!try_connect(one, port, 1000, why[1], sizeof why[1]))
                snprintf(pick, sizeof pick, "%s", one);
            a += n + (a[n] == ',');
        }
        if (pick[0]) {
            fprintf(stderr, "zeus-pipe: Slurm rank %d: rank 0 by its host's name: %s; reached at "
                            "the address it announced, %s\n", s->slurm.rank, why[0], pick);
            snprintf(s->slurm.host, sizeof s->slurm.host, "%s", pick);
            return 0;
        }
        if (zp_now_ns() > deadline)
            break;
        usleep(200000);
    }
    fprintf(stderr, "zeus-pipe: Slurm rank %d: cannot reach rank 0 on %s port %d within %d s: %s%s%s%s; "
                    "every rank connects to rank 0's ports %d..%d (transport.bind %s): check that "
                    "rank 0's node name resolves on every node and that those ports are open "
                    "between the nodes\n",
            s->slurm.rank, host, port, ZP_REACH_S, why[0], why[1][0] ? "; by its address " : "",
            why[1], addrs[0] ? "" : " (it announced no address)", port - 2, port + 1, s->cfg.bind);
    return 1;
}

/* A resumed run: this rank goes on where rank 0 does (both read the same
 * checkpoint, unless it changed between their reads, or rank 0 resumes
 * another run); a new run: rank 0 is not resuming either. 0, or 2 naming
 * this rank. */
static int same_position(const zp_sup_t *s, const char *resume, const char *path)
{
    unsigned long long e, b, st;
    int theirs = sscanf(resume, "%llu %llu %llu", &e, &b, &st) == 3;
    if (!s->resuming && !theirs)
        return 0;
    if (s->resuming && theirs && e == s->resume.epoch && b == s->resume.batch && st == s->resume.step)
        return 0;
    if (!theirs)
        fprintf(stderr, "zeus-pipe: Slurm rank %d resumes %s, and rank 0 starts a new run (%s): run "
                        "every task with the same command\n", s->slurm.rank, s->run_dir, path);
    else if (!s->resuming)
        fprintf(stderr, "zeus-pipe: Slurm rank %d starts a new run, and rank 0 resumes one (%s): run "
                        "every task with the same command\n", s->slurm.rank, path);
    else
        fprintf(stderr, "zeus-pipe: Slurm rank %d would go on at epoch %llu, batch %llu (step %llu), "
                        "rank 0 at epoch %llu, batch %llu (step %llu) (%s): its checkpoints/last.ckpt "
                        "changed between their reads; stopping\n", s->slurm.rank,
                (unsigned long long)s->resume.epoch + 1, (unsigned long long)s->resume.batch,
                (unsigned long long)s->resume.step, e + 1, b, st, path);
    return 2;
}

/* Rank r > 0: waits for rank 0's rendezvous, checks that its config is
 * ours and that rank 0 can be reached; rank 0's run directory into s->run0. */
static int slurm_join(zp_sup_t *s)
{
    char path[PATH_MAX + 64], host[256] = "", bind[256] = "", addr[512] = "", resume[96] = "";
    zp_slurm_meet_path(path, sizeof path, s->cfg.run_dir, &s->slurm);
    FILE *f = wait_for(s, path, "rank 0", "did rank 0 start, and is run.dir on a filesystem every node sees?");
    if (!f)
        return 1;
    s->run0[0] = 0;
    if (read_rendezvous(f, path, (const char *[]){"run", "host", "bind", "addr", "resume"},
                        (char *[]){s->run0, host, bind, addr, resume},
                        (size_t[]){sizeof s->run0, sizeof host, sizeof bind, sizeof addr, sizeof resume},
                        5))
        return 2;
    if (!s->run0[0] || !host[0] || strcmp(bind, s->cfg.bind)) {
        fprintf(stderr, "zeus-pipe: %s: expected run, host and bind %s (got run '%s', host '%s', bind '%s')\n",
                path, s->cfg.bind, s->run0, host, bind);
        return 2;
    }
    if (same_config(s, s->run0) || same_position(s, resume, path))
        return 2;
    snprintf(s->slurm.host, sizeof s->slurm.host, "%s", host);
    snprintf(s->watch, sizeof s->watch, "%s", path);
    const char *colon = strrchr(s->cfg.bind, ':');
    return reach_rank0(s, host, addr, (int)strtol(colon + 1, NULL, 10) + 2);
}

/* A task that is not its node's leader: waits for the leader's node
 * rendezvous; its data plane's folder into s->plane. */
static int node_join(zp_sup_t *s)
{
    char path[PATH_MAX + 300], rank[32] = "", cache[PATH_MAX] = "", pid[32] = "", whose[300], down[400] = "";
    zp_slurm_node_path(path, sizeof path, s->run0, s->slurm.node);
    snprintf(whose, sizeof whose, "node %s's first task (SLURM_LOCALID 0)", s->slurm.node);
    FILE *f = wait_for(s, path, whose, "every node's first task runs the node's cache and loaders; "
                                       "did it start, or fail (its output says)?");
    if (!f)
        return 1;
    s->plane[0] = 0;
    if (read_rendezvous(f, path, (const char *[]){"rank", "run", "cache", "pid", "down"},
                        (char *[]){rank, s->plane, cache, pid, down},
                        (size_t[]){sizeof rank, sizeof s->plane, sizeof cache, sizeof pid, sizeof down}, 5))
        return 2;
    s->plane_pid = (pid_t)atol(pid);
    if (down[0]) {
        fprintf(stderr, "zeus-pipe: Slurm rank %d: node %s's first task (Slurm rank %s), which runs the "
                        "node's data plane, stopped: %s\n", s->slurm.rank, s->slurm.node, rank, down);
        return 1;
    }
    if (!s->plane[0] || s->plane_pid <= 0) {
        fprintf(stderr, "zeus-pipe: %s: expected rank, run, cache and pid lines\n", path);
        return 2;
    }
    if (s->cfg.cache_enabled && strcmp(cache, s->cfg.cache_path)) {
        fprintf(stderr, "zeus-pipe: node %s: this task's cache.path (%s) is not the one of the node's "
                        "first task, rank %s (%s): the tasks of a node share its cache\n",
                s->slurm.node, s->cfg.cache_path, rank, cache);
        return 2;
    }
    fprintf(stderr, "zeus-pipe: Slurm rank %d: on node %s with rank %s's data plane (%s)\n",
            s->slurm.rank, s->slurm.node, rank, s->plane);
    return 0;
}

/* The node's leader, its cache ready: the node rendezvous, written whole
 * and then renamed (removed at the end of its run). */
static int node_announce(zp_sup_t *s)
{
    char tmp[sizeof s->node_meet + 8];
    zp_slurm_node_path(s->node_meet, sizeof s->node_meet, s->run0, s->slurm.node);
    snprintf(tmp, sizeof tmp, "%s.tmp", s->node_meet);
    FILE *f = fopen(tmp, "w");
    int ok = f && fprintf(f, "rank %d\nrun %s\ncache %s\npid %d\n", s->slurm.rank, s->run_dir,
                          s->cfg.cache_path, (int)getpid()) > 0;
    if (f && fclose(f))
        ok = 0;
    if (!ok || rename(tmp, s->node_meet)) {
        fprintf(stderr, "zeus-pipe: %s: %s\n", s->node_meet, strerror(errno));
        s->node_meet[0] = 0;
        return 2;
    }
    snprintf(s->plane, sizeof s->plane, "%s", s->run_dir);
    return 0;
}

/* The node's leader: its own cache (cache.path on the node's disk), which
 * must hold this dataset; the node is named, since another node's may be
 * fine, and told the job (the node rendezvous says "down"). */
static int node_cache(zp_sup_t *s)
{
    char why[600];
    if (s->cfg.cache_enabled && zp_slurm_cache_local(s->cfg.cache_path, why, sizeof why)) {
        fprintf(stderr, "zeus-pipe: node %s (Slurm rank %d): %s\n", s->slurm.node, s->slurm.rank, why);
        zp_sup_node_down(s, "its cache.path is on a network filesystem");
        return 2;
    }
    if (!s->cfg.cache_enabled || !zp_sup_prepare_cache(&s->cfg, &s->ds->meta))
        return 0;
    fprintf(stderr, "zeus-pipe: node %s (Slurm rank %d): its cache %s cannot serve this run (above); "
                    "each node keeps its own cache at cache.path on its local disk\n",
            s->slurm.node, s->slurm.rank, s->cfg.cache_path);
    zp_sup_node_down(s, "its cache.path holds another dataset's samples or cannot be opened; its "
                        "output says which"); /* rank 0 has no run yet: the others time out */
    return 2;
}

/* Rank 0 of a resumed run, before its rendezvous: the node rendezvous files
 * (RUN/node-<node>) a job that died left, which the nodes' other tasks
 * would otherwise take for their leaders' of this job. */
static void forget_nodes(const char *run)
{
    DIR *d = opendir(run);
    for (struct dirent *e; d && (e = readdir(d));) {
        char path[PATH_MAX + 300];
        if (strncmp(e->d_name, "node-", 5))
            continue;
        snprintf(path, sizeof path, "%s/%s", run, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
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
    if (s->slurm.rank == 0 && s->slurm.local != 0) {
        fprintf(stderr, "zeus-pipe: Slurm rank 0 is task %d of its node (SLURM_LOCALID): it must be its "
                        "node's first, which runs the node's data plane (use a block distribution)\n",
                s->slurm.local);
        return 2;
    }
    if (s->cfg.gpus != 1 && s->slurm.rank == 0)
        fprintf(stderr, "zeus-pipe: note: trainer.gpus is %lld, but under Slurm each of the %d tasks is "
                        "one rank (ask Slurm for the tasks: srun --ntasks-per-node=GPUS)\n",
                (long long)s->cfg.gpus, s->slurm.world);
    int rc = s->slurm.rank > 0 ? slurm_join(s) : 0;
    if (!rc && s->slurm.local > 0)
        rc = node_join(s);
    else if (!rc)
        rc = node_cache(s);
    if (rc)
        return rc;
    if (s->slurm.rank == 0 && s->resuming)
        forget_nodes(s->run_dir);
    if (s->slurm.rank == 0) {
        rc = s->resuming ? zp_sup_reopen(s, s->run_dir) /* found by the caller */
                         : zp_rundir_start(&s->cfg, s->cfg.run_name, s->run_dir, sizeof s->run_dir);
        snprintf(s->run0, sizeof s->run0, "%s", s->run_dir);
    } else {
        char name[32], mine[PATH_MAX + 40];
        snprintf(name, sizeof name, "rank-%d", s->slurm.rank);
        snprintf(mine, sizeof mine, "%s/%s", s->run0, name);
        if (s->resuming && access(mine, F_OK) == 0 && strlen(mine) < sizeof s->run_dir) {
            memcpy(s->run_dir, mine, strlen(mine) + 1); /* it fits: checked above */
            rc = zp_sup_reopen(s, s->run_dir);
        } else {
            rc = zp_rundir_make(&s->cfg, s->run0, name, s->run_dir, sizeof s->run_dir);
        }
        /* in rank 0's record: a cleanup of the run reaches this rank's leftovers */
        rc = rc ? rc : zp_resources_add(s->run0, "run", s->run_dir) ? 1 : 0;
    }
    return rc || s->slurm.local > 0 ? rc : node_announce(s);
}

void zp_sup_node_down(zp_sup_t *s, const char *why)
{
    if (s->slurm.world < 2 || s->slurm.local > 0 || !s->run0[0])
        return;
    char path[PATH_MAX + 300], tmp[PATH_MAX + 310], was[PATH_MAX + 400] = "";
    zp_slurm_node_path(path, sizeof path, s->run0, s->slurm.node);
    FILE *f = fopen(path, "r"); /* the announcement, when there was one */
    size_t n = f ? fread(was, 1, sizeof was - 1, f) : 0;
    if (f)
        fclose(f);
    was[n] = 0;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!(f = fopen(tmp, "w")))
        return;
    int ok = (n ? fputs(was, f) >= 0 : fprintf(f, "rank %d\n", s->slurm.rank) > 0) &&
             fprintf(f, "down %s\n", why) > 0;
    ok = !fclose(f) && ok; /* closed once, whatever happened */
    if (!ok || rename(tmp, path)) {
        unlink(tmp);
        return;
    }
    s->node_meet[0] = 0; /* kept, for rank 0 and the node's other tasks to read */
}

/* The reason in the node rendezvous `path` when its leader wrote one (a
 * failed data plane): 1 with why set, else 0. */
static int down_line(const char *path, const char *node, char *why, size_t len)
{
    char rank[32] = "", down[400] = "";
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    const char *bad = NULL;
    if (read_fields(f, (const char *[]){"rank", "down"}, (char *[]){rank, down},
                    (size_t[]){sizeof rank, sizeof down}, 2, &bad)) {
        snprintf(why, len, "node %s's first task wrote a rendezvous (%s) whose '%s' value is longer than "
                 "this supervisor reads; it runs the node's data plane, and has stopped", node, path, bad);
        return 1;
    }
    if (!down[0])
        return 0;
    snprintf(why, len, "node %s's first task (Slurm rank %s), which runs the node's data plane, "
             "stopped: %s", node, rank, down);
    return 1;
}

/* Rank 0: any node's failed data plane; a node's other task: its own. */
static int node_down(const zp_sup_t *s, char *why, size_t len)
{
    char path[PATH_MAX + 300];
    if (s->slurm.local > 0) {
        zp_slurm_node_path(path, sizeof path, s->run0, s->slurm.node);
        return down_line(path, s->slurm.node, why, len);
    }
    DIR *d = s->slurm.rank == 0 ? opendir(s->run_dir) : NULL;
    struct dirent *e;
    int found = 0;
    while (d && !found && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "node-", 5) || (n > 4 && !strcmp(e->d_name + n - 4, ".tmp")))
            continue;
        snprintf(path, sizeof path, "%s/%s", s->run_dir, e->d_name);
        found = down_line(path, e->d_name + 5, why, len);
    }
    if (d)
        closedir(d);
    return found;
}

/* 1 (with the sentence in why) when what this rank depends on is gone while
 * it trains: a node's data plane failed (its leader says so in its node
 * rendezvous: rank 0 and the node's other tasks stop at once); rank 0's run
 * ended (its rendezvous file is gone; `zeus-pipe down`, a signal) more than
 * 10 s ago; or its node's leader, whose cache stage serves its fetches,
 * exited more than 10 s ago. Looked at once a second. */
int zp_sup_gone(zp_sup_t *s, char *why, size_t len)
{
    int64_t now = zp_now_ns();
    if (s->slurm.world < 2 || now < s->watch_next)
        return 0;
    s->watch_next = now + 1000000000ll;
    if (node_down(s, why, len))
        return 1;
    int rank0 = !s->watch[0] || access(s->watch, F_OK) == 0;
    int plane = !s->plane_pid || kill(s->plane_pid, 0) == 0 || errno != ESRCH;
    if (rank0 && plane)
        s->gone_since = 0;
    else if (!s->gone_since)
        s->gone_since = now;
    if (!s->gone_since || now - s->gone_since <= 10000000000ll)
        return 0;
    if (!rank0)
        snprintf(why, len, "rank 0's run has ended (%s is gone) while this rank trains", s->watch);
    else
        snprintf(why, len, "the data plane of node %s (the supervisor of its first task, pid %d) has "
                 "exited while this rank trains; its output says why", s->slurm.node, (int)s->plane_pid);
    return 1;
}

void zp_sup_wait_ranks(const zp_sup_t *s, int ms, volatile sig_atomic_t *stop)
{
    if (s->slurm.world < 2 || s->slurm.rank != 0)
        return;
    int64_t until = zp_now_ns() + (int64_t)ms * 1000000;
    char path[PATH_MAX + 64];
    for (int r = 1; r < s->slurm.world; r++) {
        snprintf(path, sizeof path, "%s/rank-%d/supervisor.pid", s->run_dir, r);
        while (access(path, F_OK) == 0 && !*stop && zp_now_ns() < until)
            usleep(20000);
        if (access(path, F_OK) == 0 && !*stop) {
            fprintf(stderr, "zeus-pipe: rank %d has not ended %d s after this rank did; the run's "
                    "logs may lack its stages' last records\n", r, ms / 1000);
            return;
        }
    }
}

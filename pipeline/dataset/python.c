/* python.c — the user's Python: the package, the library, the environment
 * and the probe of a Python Dataset (python.h). */
#define _GNU_SOURCE
#include "pipeline/dataset/python.h"
#include "pipeline/dataset/augment_field.h"
#include "pipeline/base/json.h"
#include "pipeline/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#ifndef ZP_SOURCE_PYTHON_DIR
#define ZP_SOURCE_PYTHON_DIR ""
#endif
#define PROBE_TIMEOUT_MS (600 * 1000) /* building a Dataset may read an index; not for ever */
#define OWN_PACKAGE_TIMEOUT_MS (30 * 1000) /* `import zeus_pipe` takes a second or two */

/* The running program's folder. */
static void exe_dir(char *buf, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    snprintf(buf, len, "%s", n > 0 ? dirname(exe) : ".");
}

int zp_python_package(char *buf, size_t len)
{
    char dir[PATH_MAX], probe[PATH_MAX + 64];
    exe_dir(dir, sizeof dir);
    snprintf(buf, len, "%s/python", dir);
    snprintf(probe, sizeof probe, "%s/zeus_pipe/__init__.py", buf);
    if (!access(probe, R_OK))
        return 0;
    snprintf(buf, len, "%s", ZP_SOURCE_PYTHON_DIR);
    snprintf(probe, sizeof probe, "%s/zeus_pipe/__init__.py", buf);
    return buf[0] && !access(probe, R_OK) ? 0 : -ENOENT;
}

void zp_python_library(char *buf, size_t len)
{
    char dir[PATH_MAX];
    exe_dir(dir, sizeof dir);
    snprintf(buf, len, "%s/libzeuspipe.so", dir);
    if (access(buf, F_OK))
        snprintf(buf, len, "%s/../libzeuspipe.so.1", dir);
}

/* Waits for child `pid` until `deadline` (ns, zp_now_ns), then kills it.
 * Its exit status; -1 when it was killed for time, or by a signal. */
static int wait_until(pid_t pid, int64_t deadline)
{
    int status = 0, w;
    while ((w = waitpid(pid, &status, WNOHANG)) == 0 || (w < 0 && errno == EINTR)) {
        if (zp_now_ns() >= deadline) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
            return -1;
        }
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
    }
    return w > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* 1 when `interp -c "import zeus_pipe"` succeeds in this process's own
 * environment, 0 when it fails, -1 when it did not end in
 * OWN_PACKAGE_TIMEOUT_MS (killed: not an interpreter that answers); asked
 * once for the first interpreter, then remembered. */
static int has_own_package(const char *interp)
{
    static char asked[PATH_MAX];
    static int answer;
    if (asked[0] && !strcmp(asked, interp))
        return answer;
    snprintf(asked, sizeof asked, "%s", interp);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    char *argv[] = {(char *)interp, "-c", "import zeus_pipe", NULL};
    pid_t pid;
    int status = 1;
    if (!posix_spawnp(&pid, interp, &fa, NULL, argv, environ))
        status = wait_until(pid, zp_now_ns() + OWN_PACKAGE_TIMEOUT_MS * 1000000ll);
    posix_spawn_file_actions_destroy(&fa);
    return answer = status < 0 ? -1 : status == 0;
}

int zp_python_has_module(const char *interp, const char *module)
{
    char code[256];
    snprintf(code, sizeof code, "import importlib.util, sys; "
             "sys.exit(0 if importlib.util.find_spec(%s) else 3)", module);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    char *argv[] = {(char *)interp, "-c", code, NULL};
    pid_t pid;
    int status = -1;
    if (!posix_spawnp(&pid, interp, &fa, NULL, argv, environ))
        status = wait_until(pid, zp_now_ns() + OWN_PACKAGE_TIMEOUT_MS * 1000000ll);
    posix_spawn_file_actions_destroy(&fa);
    return status == 0 ? 1 : status == 3 ? 0 : -1;
}

int zp_python_path(const char *interp, char *buf, size_t len)
{
    char pkg[PATH_MAX];
    const char *user = getenv("PYTHONPATH");
    if (zp_python_package(pkg, sizeof pkg) || (interp && has_own_package(interp) > 0))
        return -ENOENT;
    int n = snprintf(buf, len, "%s%s%s", user && *user ? user : "", user && *user ? ":" : "", pkg);
    return n < 0 || (size_t)n >= len ? ZP_EINVAL : 0;
}

char *const *zp_python_env(const char *interp)
{
    static char **env, pythonpath[PATH_MAX + 16], library[PATH_MAX + 16];
    if (env)
        return env;
    size_t n = 0;
    while (environ[n])
        n++;
    char **e = calloc(n + 3, sizeof *e);
    if (!e)
        return NULL;
    char lib[PATH_MAX];
    int set = zp_python_path(interp, pythonpath + 11, sizeof pythonpath - 11) == 0;
    memcpy(pythonpath, "PYTHONPATH=", 11);
    zp_python_library(lib, sizeof lib);
    snprintf(library, sizeof library, "ZP_LIBRARY=%s", lib);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if ((!set || strncmp(environ[i], "PYTHONPATH=", 11)) && strncmp(environ[i], "ZP_LIBRARY=", 11))
            e[k++] = environ[i];
    if (set)
        e[k++] = pythonpath;
    e[k++] = library;
    e[k] = NULL;
    return env = e;
}

char *zp_python_spec(const zp_config_t *cfg, char *err, size_t len)
{
    char *text = NULL, cwd[PATH_MAX];
    size_t bytes = 0;
    FILE *f = open_memstream(&text, &bytes);
    if (!f) {
        snprintf(err, len, "dataset.python: out of memory");
        return NULL;
    }
    fputs("{\"class\": ", f);
    zp_json_str(f, cfg->py_class);
    fputs(", \"path\": [", f);
    if (!getcwd(cwd, sizeof cwd))
        snprintf(cwd, sizeof cwd, ".");
    for (int i = 0; i < cfg->py_path.n; i++) { /* absolute: the Python processes may run elsewhere */
        const char *p = cfg->py_path.v[i];
        char dir[PATH_MAX + ZP_STR_LEN];
        snprintf(dir, sizeof dir, "%s%s%s", p[0] == '/' ? "" : cwd, p[0] == '/' ? "" : "/", p);
        fputs(i ? ", " : "", f);
        zp_json_str(f, dir);
    }
    fprintf(f, "], \"args\": %s, \"splits\": %s, \"fields\": [", cfg->py_args, cfg->py_splits);
    for (int i = 0; i < cfg->py_fields.n; i++) {
        fputs(i ? ", " : "", f);
        zp_json_str(f, cfg->py_fields.v[i]);
    }
    fputs("], \"augment\": {\"train\": ", f);
    zp_json_str(f, cfg->py_augment_train);
    fputs(", \"test\": ", f);
    zp_json_str(f, cfg->py_augment_test);
    fprintf(f, "}, \"cache\": %s, \"seed\": %lld, \"version\": ",
            cfg->cache_enabled ? "true" : "false", (long long)cfg->seed);
    zp_json_str(f, cfg->py_version);
    fputs(", \"config\": ", f);
    zp_json_str(f, cfg->file);
    fputs("}", f);
    if (fclose(f)) {
        free(text);
        snprintf(err, len, "dataset.python: out of memory");
        return NULL;
    }
    return text;
}

/* The last `lines` lines of the file at fd, into buf. */
static void tail_of(int fd, int lines, char *buf, size_t len)
{
    char all[16384];
    off_t size = lseek(fd, 0, SEEK_END);
    off_t from = size > (off_t)sizeof all - 1 ? size - (off_t)sizeof all + 1 : 0;
    ssize_t n = pread(fd, all, sizeof all - 1, from);
    all[n > 0 ? n : 0] = 0;
    size_t end = strlen(all);
    while (end && all[end - 1] == '\n')
        all[--end] = 0;
    const char *p = all + end;
    for (int seen = 0; p > all && seen < lines;)
        if (*--p == '\n')
            seen++;
    p += *p == '\n';
    if ((size_t)(all + end - p) >= len) /* the end of them, not a long line's start */
        p = all + end - (len - 1);
    snprintf(buf, len, "%s", p);
}

/* Runs the probe: its answer (a file of its own, `answer`) into out
 * (NUL-terminated); its stdout and stderr, the Dataset's prints included,
 * into the file at errfd. The exit status, or -1 when it could not run or
 * ran too long (killed), -2 when it could not start (errno set). */
static int run_probe(const zp_config_t *cfg, const char *spec, const char *answer, char *out,
                     size_t outlen, int errfd)
{
    char *const *env = zp_python_env(cfg->py_interp);
    if (!env)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, errfd, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, errfd, STDERR_FILENO);
    posix_spawnattr_t at; /* a group of its own: what the Dataset starts ends with the probe */
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&at, 0);
    char *argv[] = {(char *)cfg->py_interp, "-m", "zeus_pipe.probe", (char *)spec, (char *)answer,
                    NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, cfg->py_interp, &fa, &at, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (rc) {
        errno = rc;
        return -2;
    }
    int status = wait_until(pid, zp_now_ns() + PROBE_TIMEOUT_MS * 1000000ll);
    kill(-pid, SIGKILL); /* the Dataset's helpers, if it started any */
    out[0] = 0;
    FILE *f = status == 0 ? fopen(answer, "r") : NULL;
    if (f) {
        size_t got = fread(out, 1, outlen - 1, f);
        out[got] = 0;
        fclose(f);
    }
    return status;
}

/* The probe's answer into ds: split sizes, fields, the source's hash. */
static int read_answer(const zp_config_t *cfg, const char *text, zp_dataset_t *ds, char *err,
                       size_t len)
{
    zp_dataset_meta_t *m = &ds->meta;
    long long n[2];
    const char *at = strstr(text, "zeus-pipe probe 1\n");
    char why[200];
    if (!at || sscanf(at, "zeus-pipe probe 1\nn %lld %lld\nsource_hash %71s", &n[0], &n[1],
                      m->source_hash) != 3 || n[0] < 0 || n[1] < 0 || n[0] > UINT32_MAX ||
        n[1] > UINT32_MAX) {
        snprintf(err, len, "%s: dataset.python: the probe (%s -m zeus_pipe.probe) answered "
                 "something else than a description: is its zeus_pipe package this zeus-pipe's?",
                 cfg->file, cfg->py_interp);
        return ZP_EINVAL;
    }
    int rc = zp_fields_parse(&m->fields, at, ZP_MAX_ELEMS, why, sizeof why);
    if (rc) {
        snprintf(err, len, "%s: dataset.python.class %s: %s", cfg->file, cfg->py_class,
                 rc == -ENOENT ? "no fields in the probe's answer" : why);
        return ZP_ECONFIG;
    }
    const char *a = strstr(at, "\naugment "), *c = strstr(at, "\ncached\n");
    if (a && (sscanf(a, "\naugment %d %d", &m->augment[0], &m->augment[1]) != 2 || !c ||
              (rc = zp_fields_parse(&m->cached, c + 7, ZP_MAX_ELEMS, why, sizeof why)))) {
        snprintf(err, len, "%s: dataset.python.augment: %s", cfg->file,
                 rc ? why : "the probe's answer has no cached fields");
        return ZP_ECONFIG;
    }
    if (zp_augment_field_wanted(cfg)) { /* the built-in ops on a field, at assembly */
        zp_augment_field_t fa;
        if (zp_augment_field_init(&fa, cfg, &m->fields, why, sizeof why)) {
            snprintf(err, len, "%s: %s", cfg->file, why);
            return ZP_ECONFIG;
        }
        m->cached = m->fields;
        m->fields = fa.out;
        for (int s = 0; s < ZP_SPLITS; s++)
            m->augment[s] = fa.on[s] ? ZP_AUG_STEP_FIELD : 0;
    }
    const char *t = strstr(at, "\nitem_types ");
    if (t)
        snprintf(m->item_types, sizeof m->item_types, "%.*s", (int)strcspn(t + 12, "\n"), t + 12);
    m->n[0] = n[0], m->n[1] = n[1];
    m->dtype = ZP_DTYPE_U8;
    m->shape[0] = m->shape[1] = 1;
    m->shape[2] = (int64_t)m->fields.record_bytes;
    m->elems = m->shape[2];
    m->sample_bytes = m->fields.record_bytes;
    m->classes = 1;
    return 0;
}

/* A __getitem__ that draws random numbers, with the cache on: refused
 * (ZP_ECONFIG), unless dataset.python.random says to keep the first draw. */
static int refuse_random(const zp_config_t *cfg, const char *text, char *err, size_t len)
{
    const char *r = strstr(text, "\nrandom ");
    int differ = 0, tried = 0;
    if (!r || sscanf(r, "\nrandom %d %d", &differ, &tried) != 2 || !differ ||
        !cfg->cache_enabled || cfg->py_random == ZP_PY_RANDOM_CACHE_FIRST_DRAW)
        return 0;
    snprintf(err, len, "%s: dataset.python.class %s: __getitem__ draws random numbers (%d of %d "
             "items differed under two epochs' seeds), and the cache would keep each sample's "
             "first draw for every later epoch: move the random part into "
             "dataset.python.augment.train (module:callable, run after the cache on every "
             "sample of every epoch), or set cache.enabled: false (dataset.python.random: "
             "cache_first_draw keeps the first draw on purpose)",
             cfg->file, cfg->py_class, differ, tried);
    return ZP_ECONFIG;
}

int zp_python_probe(const zp_config_t *cfg, zp_dataset_t *ds, char *err, size_t len)
{
    for (int i = 0; i < cfg->py_path.n; i++) { /* else the module imports from elsewhere, by luck */
        struct stat st;
        if (stat(cfg->py_path.v[i], &st)) {
            int e = errno;
            snprintf(err, len, "%s: dataset.python.path: '%s': %s; a relative path in the config "
                     "file starts from the file's folder: fix the path, or remove it", cfg->file,
                     cfg->py_path.v[i], strerror(e));
            return ZP_ECONFIG;
        }
    }
    if (has_own_package(cfg->py_interp) < 0) {
        snprintf(err, len, "%s: dataset.python.interpreter: '%s -c \"import zeus_pipe\"' did not end "
                 "in %d s (killed): give the path of a Python 3 interpreter, one whose packages "
                 "your Dataset imports", cfg->file, cfg->py_interp, OWN_PACKAGE_TIMEOUT_MS / 1000);
        return ZP_EINVAL;
    }
    char *spec = zp_python_spec(cfg, err, len);
    if (!spec)
        return ZP_ENOMEM;
    char errpath[] = "/tmp/zp-probe.XXXXXX", answer[] = "/tmp/zp-answer.XXXXXX", out[16384];
    char tail[1200];
    int errfd = mkstemp(errpath), ansfd = errfd < 0 ? -1 : mkstemp(answer);
    if (errfd < 0 || ansfd < 0) {
        snprintf(err, len, "dataset.python: cannot make a file in /tmp: %s", strerror(errno));
        if (errfd >= 0)
            close(errfd), unlink(errpath);
        free(spec);
        return ZP_EINVAL;
    }
    unlink(errpath);
    close(ansfd);
    zp_info("probing the Python Dataset %s with %s", cfg->py_class, cfg->py_interp);
    int status = run_probe(cfg, spec, answer, out, sizeof out, errfd), rc = 0;
    unlink(answer);
    tail_of(errfd, 8, tail, sizeof tail);
    close(errfd);
    if (status == 0 && tail[0]) /* what the Dataset printed: the log's, not the answer's */
        zp_info("the Dataset printed, last lines:\n%s", tail);
    if (status == -2) {
        snprintf(err, len, "%s: dataset.python.interpreter: cannot start '%s': %s (give a Python "
                 "3 on PATH, or its path)", cfg->file, cfg->py_interp, strerror(errno));
        rc = ZP_EINVAL;
    } else if (status != 0) {
        snprintf(err, len, "%s: dataset.python.class %s: %s:\n%s", cfg->file, cfg->py_class,
                 status < 0 ? "the probe was killed or ran over 10 minutes"
                            : "the Dataset could not be imported, built or read",
                 tail[0] ? tail : "(the probe printed nothing)");
        rc = ZP_ECONFIG;
    } else {
        rc = read_answer(cfg, out, ds, err, len);
        if (!rc)
            rc = refuse_random(cfg, out, err, len);
    }
    if (rc)
        free(spec);
    else
        ds->python = spec;
    return rc;
}

/* log.c — one line per event on stderr (time, stage[instance], level), the
 * rate-limited warning, and the names of the error codes. */
#define _GNU_SOURCE
#include "pipeline/base/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static char g_stage[32] = "zeus-pipe";
static int g_instance = -1;
static int g_level = ZP_LOG_INFO;

const char *zp_strerror(int code)
{
    switch (code) {
    case ZP_OK: return "ZP_OK: success";
    case ZP_EINVAL: return "ZP_EINVAL: invalid argument or malformed input";
    case ZP_ECONFIG: return "ZP_ECONFIG: configuration rejected";
    case ZP_EPROTO: return "ZP_EPROTO: malformed or foreign message";
    case ZP_EDATA: return "ZP_EDATA: a sample or dataset file could not be read";
    case ZP_ESTALE: return "ZP_ESTALE: stale slot generation or request id";
    case ZP_EFULL: return "ZP_EFULL: no free slot or credit";
    case ZP_ENOMEM: return "ZP_ENOMEM: out of memory";
    case ZP_EZMQ: return "ZP_EZMQ: ZeroMQ call failed";
    case ZP_ESTOP: return "ZP_ESTOP: stopped by a signal";
    case ZP_ETIMEOUT: return "ZP_ETIMEOUT: peer did not answer in time";
    case ZP_EGPU: return "ZP_EGPU: a CUDA, cuBLAS or NCCL call failed";
    }
    if (code < 0 && code > -4096)
        return strerror(-code);
    return "unknown error";
}

void zp_log_init(const char *stage, int instance)
{
    snprintf(g_stage, sizeof g_stage, "%s", stage);
    g_instance = instance;
}

void zp_log_set_level(int level) { g_level = level; }
int zp_log_enabled(int level) { return level >= g_level; }
const char *zp_log_stage(void) { return g_stage; }
int zp_log_instance(void) { return g_instance < 0 ? 0 : g_instance; }

void zp_log(int level, const char *fmt, ...)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    if (level < g_level)
        return;
    int saved = errno;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    char line[2048];
    int n = (int)strftime(line, sizeof line, "%H:%M:%S", &tm);
    if (g_instance >= 0)
        n += snprintf(line + n, sizeof line - n, ".%03ld %s[%d] %s ", ts.tv_nsec / 1000000, g_stage,
                      g_instance, names[level]);
    else
        n += snprintf(line + n, sizeof line - n, ".%03ld %s %s ", ts.tv_nsec / 1000000, g_stage,
                      names[level]);
    va_list ap;
    va_start(ap, fmt);
    if (n < (int)sizeof line)
        n += vsnprintf(line + n, sizeof line - n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    fwrite(line, 1, (size_t)n, stderr);
    errno = saved;
}

void zp_warn_limited(int64_t *count, const char *fmt, ...)
{
    int64_t n = ++*count;
    if ((n > 10 && n % 1000) || !zp_log_enabled(ZP_LOG_WARN))
        return;
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    zp_log(ZP_LOG_WARN, "%s (%lld so far%s)", msg, (long long)n,
           n == 10 ? "; from now on every 1000th is logged" : "");
}

int64_t zp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double zp_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

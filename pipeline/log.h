/* log.h — error codes and one-line-per-event logging shared by every stage.
 *
 * Every function in zeus-pipe returns 0 or a negative ZP_E* code (or a
 * negative errno where the OS said so); zp_strerror() names either.
 * Log lines go to stderr as `time stage[instance] level message`; the
 * supervisor points each stage's stderr at runs/<name>/logs/<stage>-<i>.log.
 */
#ifndef ZP_LOG_H
#define ZP_LOG_H

#include <stdarg.h>
#include <stdint.h>

enum {
    ZP_OK = 0,
    ZP_EINVAL = -10001,  /* invalid argument or malformed input */
    ZP_ECONFIG = -10002, /* configuration rejected; message already reported */
    ZP_EPROTO = -10003,  /* malformed or foreign message on a socket */
    ZP_EDATA = -10004,   /* corrupt or truncated dataset file */
    ZP_ESTALE = -10005,  /* stale slot generation or request id */
    ZP_EFULL = -10006,   /* no free slot / no credit */
    ZP_ENOMEM = -10007,  /* out of memory */
    ZP_EZMQ = -10008,    /* libzmq call failed; see errno */
    ZP_ESTOP = -10009,   /* interrupted by a stop request (signal) */
    ZP_ETIMEOUT = -10010, /* peer did not answer in time */
    ZP_EGPU = -10011      /* a CUDA, cuBLAS or NCCL call failed */
};

/* Name and one sentence for a ZP_E* code or a negative errno. Static storage. */
const char *zp_strerror(int code);

enum { ZP_LOG_DEBUG, ZP_LOG_INFO, ZP_LOG_WARN, ZP_LOG_ERROR };

/* Names this process in every line it logs: "loader", 3 -> "loader[3]". */
void zp_log_init(const char *stage, int instance);
void zp_log_set_level(int level);
int zp_log_enabled(int level);
const char *zp_log_stage(void);
int zp_log_instance(void);
void zp_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define zp_debug(...) do { if (zp_log_enabled(ZP_LOG_DEBUG)) zp_log(ZP_LOG_DEBUG, __VA_ARGS__); } while (0)
#define zp_info(...) zp_log(ZP_LOG_INFO, __VA_ARGS__)
#define zp_warn(...) zp_log(ZP_LOG_WARN, __VA_ARGS__)
#define zp_error(...) zp_log(ZP_LOG_ERROR, __VA_ARGS__)

/* Monotonic clock in nanoseconds, and wall clock in seconds (UNIX epoch). */
int64_t zp_now_ns(void);
double zp_wall_s(void);

#endif

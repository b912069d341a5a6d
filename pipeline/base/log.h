/* log.h — one-line-per-event logging shared by every stage, and the names of
 * the error codes (schemas/errors.h).
 *
 * Log lines go to stderr as `time stage[instance] level message`; the
 * supervisor points each stage's stderr at runs/<name>/logs/<stage>-<i>.log.
 */
#ifndef ZP_LOG_H
#define ZP_LOG_H

#include "schemas/errors.h"

#include <stdarg.h>
#include <stdint.h>


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

/* A warning that may repeat without bound (a malformed message, a skipped
 * sample): counts it in *count and logs the first 10 and then every 1000th,
 * each with the count so far. The one policy for every repeated warning. */
void zp_warn_limited(int64_t *count, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Monotonic clock in nanoseconds, and wall clock in seconds (UNIX epoch). */
int64_t zp_now_ns(void);
double zp_wall_s(void);

#endif

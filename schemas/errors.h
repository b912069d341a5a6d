/* errors.h — the error codes every function of zeus-pipe returns.
 *
 * 0, or a negative ZP_E* code, or a negative errno where the OS said so;
 * zp_strerror() (pipeline/base/log.h) names either. They live here, with the
 * messages, because the decoders of schemas/ return them too. */
#ifndef ZP_ERRORS_H
#define ZP_ERRORS_H

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

#endif

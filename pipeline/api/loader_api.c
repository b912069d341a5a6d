/* loader_api.c — zeus_pipe_loader.h: the loader stage over a caller's `get`,
 * for libzeuspipe.so (the Python loaders of `dataset.source: python`). */
#define _GNU_SOURCE
#include "pipeline/include/zeus_pipe_loader.h"
#include "pipeline/base/log.h"
#include "pipeline/source/source.h"
#include "stages/loader/loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct {
    zp_source_t base;
    zp_loader_get_fn get;   /* one of the two */
    zp_loader_get2_fn get2;
    void *ctx;
    size_t bytes;
    pid_t pid; /* the loader's: a process forked inside `get` is not */
} callback_source_t;

static int callback_get(zp_source_t *src, int split, uint32_t index, uint8_t *record,
                        int32_t *label, char *err, size_t errlen)
{
    callback_source_t *s = (callback_source_t *)src;
    err[0] = 0;
    int rc = s->get2 ? s->get2(s->ctx, split, index, src->epoch, src->cached, src->keep, record,
                               s->bytes, err, errlen)
                     : s->get(s->ctx, split, index, src->epoch, record, s->bytes, err, errlen);
    if (getpid() != s->pid) /* a child the Dataset forked, back here: it shares the loader's */
        _exit(rc == 0 ? 0 : 1); /* sockets and ZeroMQ threads it does not have; never go on */
    *label = 0; /* the record holds the targets; the label column marks skipped samples only */
    if (rc == 0) {
        src->kept = src->keep && !src->cached;
        return 0;
    }
    if (!err[0])
        snprintf(err, errlen, "%s sample %u could not be loaded", zp_dataset_split_name(split), index);
    return rc > 0 ? ZP_EDATA : ZP_EINVAL;
}

static void callback_destroy(zp_source_t *src) { (void)src; }

int zp_loader_api_version(void) { return ZP_LOADER_API_VERSION; }

static int serve(int argc, char **argv, zp_loader_get_fn get, zp_loader_get2_fn get2, void *ctx)
{
    static zp_stage_t st;
    int status = zp_stage_start(&st, "loader", argc, argv);
    if (status)
        return status;
    if (!zp_source_ops(st.cfg.dataset_source)->python || (!get && !get2)) {
        zp_error("this loader serves dataset.source: python; the run's is %s (its loaders are "
                 "`zeus-pipe stage loader`)", zp_source_ops(st.cfg.dataset_source)->name);
        zp_stage_close(&st);
        return 2;
    }
    if (!get2 && (st.meta.augment[0] || st.meta.augment[1])) {
        zp_error("the run's Dataset has an augment step (dataset.python.augment.*): its loaders "
                 "need zp_loader_serve2 (loader API version 2): update this loader's zeus_pipe");
        zp_stage_close(&st);
        return 2;
    }
    callback_source_t src = {.base = {.get = callback_get, .destroy = callback_destroy},
                             .get = get, .get2 = get2, .ctx = ctx, .bytes = st.meta.sample_bytes,
                             .pid = getpid()};
    status = zp_loader_run(&st, &src.base);
    return status == 0 && zp_stop ? 128 + zp_stop : status;
}

int zp_loader_serve(int argc, char **argv, zp_loader_get_fn get, void *ctx)
{
    return serve(argc, argv, get, NULL, ctx);
}

int zp_loader_serve2(int argc, char **argv, zp_loader_get2_fn get, void *ctx)
{
    return serve(argc, argv, NULL, get, ctx);
}

/* inbox.c — receive, decode, drop-and-count, dispatch: the one way every
 * stage reads a socket. */
#include "pipeline/net/inbox.h"
#include "pipeline/base/log.h"

#include <errno.h>

void zp_inbox_drop(const zp_inbox_t *in, const char *why)
{
    if (in->errors)
        ++*in->errors;
    zp_warn_limited(in->dropped, "dropped a message from %s: %s", in->from, why);
}

/* A message zp_inbox_recv could not route: counted, warned, and told to the owner. */
static void dropped(const zp_inbox_t *in, void *ctx, const char *why)
{
    zp_inbox_drop(in, why);
    if (in->on_drop)
        in->on_drop(ctx, why);
}

int zp_inbox_recv(const zp_inbox_t *in, void *sock, int flags, zp_frames_t *f, void *ctx)
{
    int rc = zp_frames_recv(f, sock, flags);
    if (rc)
        return rc == -EAGAIN ? 0 : rc;
    zp_msg_t m;
    char why[256];
    if (f->n <= in->first) {
        dropped(in, ctx, "no header frame");
        return 0;
    }
    if (zp_frames_decode(f, in->first, &m, why, sizeof why)) {
        dropped(in, ctx, why);
        zp_msg_release(&m);
        return 0;
    }
    rc = 0;
    int i = 0;
    while (i < in->nroutes && in->routes[i].type != (int)m.type)
        i++;
    if (i < in->nroutes)
        rc = in->routes[i].on(ctx, &m, f);
    else
        dropped(in, ctx, zp_msg_name(m.type));
    zp_msg_release(&m);
    return rc;
}

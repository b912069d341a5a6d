/* names.c — the names of the stages and sockets (names.h). */
#include "pipeline/base/names.h"

#include <stdio.h>
#include <string.h>

static const char *const STAGE_NAME[] = {
#define ZP_STAGE_NAME(id, name, doc) name,
    ZP_STAGES(ZP_STAGE_NAME)
#undef ZP_STAGE_NAME
};

static const struct {
    const char *name;
    int port;
} SOCK[] = {
#define ZP_SOCK_ROW(id, name, port, doc) {name, port},
    ZP_SOCKETS(ZP_SOCK_ROW)
#undef ZP_SOCK_ROW
};

const char *zp_names_stage(int stage)
{
    return stage >= 0 && stage < ZP_STAGE_COUNT ? STAGE_NAME[stage] : "?";
}

int zp_names_stage_of(const char *name)
{
    for (int s = 0; name && s < ZP_STAGE_COUNT; s++)
        if (!strcmp(STAGE_NAME[s], name))
            return s;
    return -1;
}

const char *zp_names_sock(int sock)
{
    return sock >= 0 && sock < ZP_SOCK_COUNT ? SOCK[sock].name : "?";
}

int zp_names_slurm_port(int sock)
{
    return sock >= 0 && sock < ZP_SOCK_COUNT ? SOCK[sock].port : 0;
}

void zp_names_ring_sock(char *buf, size_t len, int rank)
{
    snprintf(buf, len, "%s-%d", SOCK[ZP_SOCK_RING].name, rank);
}

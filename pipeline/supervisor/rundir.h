/* rundir.h — moved into supervisor.h (the supervisor's one header). This
 * shim only keeps cmd_stat.c building until its include names supervisor.h;
 * include supervisor.h, then delete this file. */
#ifndef ZP_RUNDIR_H
#define ZP_RUNDIR_H
#include "pipeline/supervisor/supervisor.h"
#endif

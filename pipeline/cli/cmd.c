/* cmd.c — what every command shares (cmd.h). */
#include "pipeline/cli/cmd.h"

#include <string.h>

int zp_cmd_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return 1;
    return 0;
}

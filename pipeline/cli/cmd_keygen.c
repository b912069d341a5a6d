/* cmd_keygen.c — `zeus-pipe keygen NAME`: a CURVE key pair for a loader host. */
#include "pipeline/cli/cmd.h"
#include "pipeline/net/keys.h"

#include <stdio.h>

int cmd_keygen(int argc, char **argv)
{
    if (zp_cmd_wants_help(argc, argv) || argc != 2) {
        fprintf(argc != 2 ? stderr : stdout,
                "usage: zeus-pipe keygen NAME\n\n"
                "Writes a new CURVE key pair: NAME.key (keep it; mode 0600) and NAME.pub.\n"
                "Put NAME.pub into the run's transport.allowed_keys folder, and start\n"
                "loaders with `zeus-pipe loader --key NAME.key ...` on the other host.\n");
        return argc != 2 ? 2 : 0;
    }
    char err[4200];
    if (zp_keys_generate(argv[1], err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: keygen: %s\n", err);
        return 1;
    }
    printf("wrote %s.key (secret; keep it) and %s.pub\n", argv[1], argv[1]);
    return 0;
}

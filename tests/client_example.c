/* client_example.c — a user's training program on libzeuspipe.so, with
 * nothing but <zeus_pipe.h>: attaches to rank R of a run, consumes every
 * batch, and prints per epoch its split, samples and an index checksum.
 *
 *     zp-client-example [RUN_DIR [RANK]]
 *
 * Without arguments it takes them from ZP_RUN and ZP_RANK, which `zeus-pipe
 * up` sets for a trainer.command: `trainer: {command: [zp-client-example]}`.
 * ZP_EXAMPLE_BATCH_US=N makes it sleep N microseconds on each batch, as a
 * model's step would take without using a CPU (tests of the loaders' pace).
 *
 * Exit: 0 at the run's end, 1 on an error, 2 on usage. */
#include <zeus_pipe.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    const char *run = argc > 1 ? argv[1] : getenv("ZP_RUN");
    const char *rank = argc > 2 ? argv[2] : getenv("ZP_RANK");
    if (!run || argc > 3) {
        fprintf(stderr, "usage: zp-client-example [RUN_DIR [RANK]] (default: $ZP_RUN, $ZP_RANK)\n");
        return 2;
    }
    if (zp_client_api_version() < ZP_CLIENT_API_VERSION) {
        fprintf(stderr, "zp-client-example: libzeuspipe.so is older than its header\n");
        return 1;
    }
    char err[1024];
    zp_client_t *c = zp_client_attach(run, rank ? atoi(rank) : 0, 60000, err, sizeof err);
    if (!c) {
        fprintf(stderr, "zp-client-example: %s\n", err);
        return 1;
    }
    const char *pace = getenv("ZP_EXAMPLE_BATCH_US");
    long step_us = pace ? atol(pace) : 0;
    struct timespec step = {step_us / 1000000, step_us % 1000000 * 1000};
    zp_client_batch_t b;
    uint64_t sum = 0; /* of the indices, this rank's, mod 2^64 */
    int k;
    while ((k = zp_client_next(c, &b, -1)) > 0 && k != ZP_CLIENT_END) {
        if (k == ZP_CLIENT_BATCH) {
            for (int64_t i = 0; i < b.n; i++)
                sum += b.indices[i];
            if (step_us > 0)
                nanosleep(&step, NULL);
            zp_client_release(c, &b);
        } else {
            printf("%s epoch %llu: %lld samples, index sum %llu\n",
                   b.split == ZP_CLIENT_TRAIN ? "train" : "test", (unsigned long long)b.epoch,
                   (long long)b.samples, (unsigned long long)sum);
            fflush(stdout);
            sum = 0;
        }
    }
    if (k < 0) { /* ZP_CLIENT_ESTOP: the run stopped under the program; the library says by what */
        const char *why = zp_client_error(c);
        fprintf(stderr, "zp-client-example: %s\n",
                k == ZP_CLIENT_ESTOP && *why ? why : zp_client_strerror(k));
    }
    zp_client_destroy(&c);
    return k < 0;
}

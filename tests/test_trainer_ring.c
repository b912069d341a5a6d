/* The trainer side of the ring against a real trainer process (`zeus-pipe
 * stage trainer`) and a prefetch played by this test: a BATCH the trainer
 * cannot use (samples of another size) is dropped and its slot FREEd with the
 * BATCH's generation, so the ring does not lose a slot; a good BATCH after it
 * is trained on and freed too.
 * Usage: test_trainer_ring PATH-TO-zeus-pipe (ctest passes it). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "pipeline/ring/ring.h"
#include "pipeline/net/sock.h"
#include "pipeline/stage/stage.h"
#include "schemas/msg.h"

static const char *exe;
static pid_t trainer; /* killed by the teardown also when an assertion failed */

static int stop_trainer(void **state)
{
    (void)state;
    if (trainer > 0) {
        kill(trainer, SIGKILL);
        waitpid(trainer, NULL, 0);
        trainer = 0;
    }
    return 0;
}

#define BATCH 8
#define ELEMS 16

static const char CONFIG[] =
    "dataset:\n  source: synthetic\n"
    "  synthetic: {train_samples: 64, test_samples: 0, shape: [1, 4, 4], classes: 4}\n"
    "prefetch: {batch_size: 8, depth: 2}\n"
    "trainer: {backend: cpu, model: {hidden: [8]}, epochs: 1}\n";

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int send_msg(void *sock, const zp_msg_t *m)
{
    return zp_sock_send(sock, NULL, m, NULL, NULL, 0, 0);
}

/* The next message from the trainer within 30 s (a guard against a hang). */
static void recv_msg(void *sock, zp_frames_t *f, zp_msg_t *m)
{
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    assert_int_equal(zmq_poll(&it, 1, 30000), 1);
    assert_int_equal(zp_frames_recv(f, sock, 0), 0);
    char why[256];
    assert_int_equal(zp_frames_decode(f, 0, m, why, sizeof why), 0);
}

static zp_msg_t batch(const zp_ring_t *r, uint32_t slot, uint32_t gen, uint64_t elems)
{
    return (zp_msg_t){.type = ZP_MSG_BATCH, .slot = slot, .gen = gen, .nonce = r->nonce,
                      .split = ZP_SPLIT_TRAIN,
                      .epoch = 0, .index = 0, .batches = 8, .n = BATCH, .elems = elems,
                      .dtype = ZP_DTYPE_F32, .present = ZP_B(dtype)};
}

static void a_dropped_batch_is_freed_and_the_ring_keeps_its_slots(void **state)
{
    (void)state;
    char run[] = "/tmp/zp-trainer-ring-XXXXXX", path[PATH_MAX], name[128], ep[PATH_MAX + 32];
    assert_non_null(mkdtemp(run));
    snprintf(path, sizeof path, "%s/sock", run);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/config.yaml", run);
    write_file(path, CONFIG);

    zp_ring_layout_t lay;
    assert_int_equal(zp_ring_layout(&lay, BATCH, ELEMS * 4), 0);
    zp_ring_t *ring;
    zp_ring_name(name, sizeof name, run, 0);
    assert_int_equal(zp_ring_create(&ring, name, 2, lay.bytes), 0);
    void *ctx = zmq_ctx_new();
    assert_int_equal(zp_sock_endpoint(ep, sizeof ep, run, "ring-0"), 0);
    void *sock;
    assert_int_equal(zp_sock_create(&sock, ctx, ZMQ_PAIR, ep, 1, 0), 0);

    pid_t pid = trainer = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl(exe, exe, "stage", "trainer", "--run", run, "--instance", "0", "--mode", "0",
              "--ckpts", "", (char *)NULL);
        _exit(127);
    }
    zp_frames_t f;
    zp_frames_init(&f);
    zp_msg_t m;

    /* a BATCH of 17-value samples into a ring of 16-value ones: dropped, freed */
    uint32_t slot, gen;
    assert_int_equal(zp_ring_acquire(ring, &slot, &gen), 0);
    assert_int_equal(zp_ring_publish(ring, slot), 0);
    zp_msg_t bad = batch(ring, slot, gen, ELEMS + 1);
    assert_int_equal(send_msg(sock, &bad), 0);
    recv_msg(sock, &f, &m);
    assert_int_equal(m.type, ZP_MSG_FREE);
    assert_int_equal(m.slot, slot);
    assert_int_equal(m.gen, gen);
    zp_msg_release(&m);
    assert_int_equal(zp_ring_release(ring, slot, gen), 0);
    assert_int_equal(zp_ring_free_count(ring), 2);

    /* a good BATCH in the same slot: trained on, and freed with its generation */
    assert_int_equal(zp_ring_acquire(ring, &slot, &gen), 0);
    uint8_t *base = zp_ring_slot(ring, slot);
    for (uint32_t i = 0; i < BATCH; i++) {
        int32_t label = (int32_t)(i % 4);
        memcpy(base + lay.indices + 4 * i, &i, 4);
        memcpy(base + lay.labels + 4 * i, &label, 4);
    }
    memset(base + lay.data, 0, (size_t)BATCH * ELEMS * 4);
    assert_int_equal(zp_ring_publish(ring, slot), 0);
    zp_msg_t good = batch(ring, slot, gen, ELEMS);
    assert_int_equal(send_msg(sock, &good), 0);
    recv_msg(sock, &f, &m);
    assert_int_equal(m.type, ZP_MSG_FREE);
    assert_int_equal(m.gen, gen);
    zp_msg_release(&m);
    assert_int_equal(zp_ring_release(ring, slot, gen), 0);

    kill(pid, SIGTERM);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    trainer = 0;
    zp_frames_free(&f);
    zp_sock_destroy(&sock);
    zmq_ctx_term(ctx);
    zp_ring_destroy(&ring);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", run);
    assert_int_equal(system(cmd), 0);
}

int main(int argc, char **argv)
{
    exe = argc > 1 ? argv[1] : "../build/zeus-pipe";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(a_dropped_batch_is_freed_and_the_ring_keeps_its_slots, stop_trainer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

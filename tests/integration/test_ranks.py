"""Data-parallel ranks (trainer.gpus > 1) on the cpu backend: N ranks with
batches of B train exactly as one trainer with batches of N x B (the ranks'
batches together are its batch, and their gradients are summed weighted by
samples), with every sample of an epoch seen once across the shards — also
when one shard has a batch more, and when samples are skipped. A rank that
dies stops the run; a stranger on the ranks' socket is dropped and counted."""
import json
import os
import signal
import time
import zp

CONFIG = """
run: {{name: {name}}}
seed: 5
dataset:
  source: synthetic
  synthetic: {{train_samples: {train}, test_samples: 200, shape: [1, 12, 16], classes: 4,
              corrupt_every: {corrupt}, cost_us: {cost}}}
loader: {{workers: 2, task_size: 16, on_error: skip}}
prefetch: {{batch_size: {batch}}}
trainer:
  backend: cpu
  gpus: {gpus}
  model: {{hidden: [16]}}
  epochs: {epochs}
  log_every_steps: 4
  # plain momentum SGD with a small step: the loss stays near 1 for the whole
  # run (1.5 -> 0.9), so a loss compared at every step still measures the sum
  # (on a vanishing loss, AdamW's g/sqrt(v) magnifies float32 rounding)
  optimizer: {{name: sgd, lr: 0.002}}
  debug: {{log_batches: true}}
"""


def up(w, name, gpus, batch, train=1025, corrupt=0, epochs=2, cost=0):
    cfg = w.write(name + ".yaml", CONFIG.format(name=name, gpus=gpus, batch=batch, train=train,
                                                corrupt=corrupt, epochs=epochs, cost=cost))
    rc, out, err = w.run("up", cfg)
    zp.check(rc == 0, err)
    return w.run_dir(name)


def records(run_dir):
    return [m for m in zp.metrics(run_dir) if m.get("event") in ("step", "epoch_end")]


def same_training(one, many, what):
    a, b = records(one), records(many)
    zp.check(len(a) == len(b) and len(a) > 8, "%s: %d records vs %d" % (what, len(a), len(b)))
    for x, y in zip(a, b):
        for k in ("event", "split", "epoch", "step", "samples", "distinct", "index_checksum", "skipped"):
            zp.check(x.get(k) == y.get(k), "%s: %s differs: %r vs %r" % (what, k, x, y))
        # float32 sums in another order (one GEMM over N x B rows against N
        # sums of B rows in double) differ by ~1e-8 here; a rank's gradient
        # weighted wrongly or left out moves the loss by 1e-4 or more
        zp.check(x["loss"] > 0.5, "%s: the loss vanished (%r): nothing left to compare" % (what, x))
        rel = abs(x["loss"] - y["loss"]) / x["loss"]
        zp.check(rel < 1e-5, "%s: step %d loss %.9g vs %.9g" % (what, x["step"], x["loss"], y["loss"]))


def report_count(run_dir, stage, region):
    report = json.load(open(os.path.join(run_dir, "report.json")))
    return sum(r["count"] for r in report["regions"] if r["stage"] == stage and r["region"] == region)


def n_ranks_of_b_train_as_one_of_n_times_b():
    with zp.Workdir() as w:
        # 1025 samples: rank 0's shard has 17 batches of 32, rank 1's 16
        one = up(w, "one", 1, 64)
        two = up(w, "two", 2, 32)
        same_training(one, two, "2 ranks")
        ends = zp.epoch_ends(two, "train")
        zp.check(all(e["samples"] == e["distinct"] == e["expected_samples"] == 1025 for e in ends), ends)
        # each rank logged its own batches: 17 and 16 a train epoch
        for name, want in (("batches.log", 34), ("batches-rank1.log", 32)):
            n = sum(1 for _ in open(os.path.join(two, name)))
            zp.check(n == want, "%s: %d batches, expected %d" % (name, n, want))
        # a sum per step on every rank (17 an epoch, rank 1 joining rank 0's last) and one
        # per epoch end of each split: 19 an epoch a rank
        comm = report_count(two, "trainer", "comm")
        zp.check(comm == 2 * 2 * (17 + 2), "comm region count %d" % comm)
        zp.check(not os.path.exists(os.path.join(one, "batches-rank1.log")), "a rank 1 in a 1-rank run")
        # three ranks, and samples that fail to load (skipped the same way in both runs)
        one = up(w, "one-skip", 1, 63, 1000, 7)
        three = up(w, "three-skip", 3, 21, 1000, 7)
        same_training(one, three, "3 ranks with skips")
        e = zp.epoch_ends(three, "train")[-1]
        zp.check(e["skipped"] == 1000 // 7 and e["samples"] + e["skipped"] == 1000, e)
        # the best checkpoint is rank 0's, and eval reads it back
        rc, out, err = w.run("eval", two)
        zp.check(rc == 0, err)


def a_dead_rank_stops_the_run():
    with zp.Workdir() as w:
        cfg = w.write("d.yaml", CONFIG.format(name="d", gpus=2, batch=32, train=4000, corrupt=0,
                                              epochs=50, cost=300))
        p = w.start("up", cfg)
        run = w.run_dir("d")
        zp.wait_for(lambda: os.path.exists(os.path.join(run, "metrics.jsonl")) and
                    zp.epoch_ends(run, "train"), 60, "a first epoch")
        victim = [pid for pid in zp.stage_pids(run)
                  if b"trainer\0" in open("/proc/%d/cmdline" % pid, "rb").read() and
                  b"--instance\x001" in open("/proc/%d/cmdline" % pid, "rb").read()]
        zp.check(len(victim) == 1, "trainer[1] pids: %r" % victim)
        os.kill(victim[0], signal.SIGKILL)
        out, err = p.communicate(timeout=60)  # far inside trainer.comm_timeout_s (300 s)
        zp.check(p.returncode == 1, "exit %d: %s" % (p.returncode, err))
        # the supervisor sees it die, or rank 0 first finds it gone: either way it is named
        zp.check("trainer[1] was killed by signal 9" in err or "rank 1 has gone away" in err, err)


def zmtp_dealer_sends(path, identity, frames):
    """Connects to a ZeroMQ ipc endpoint as a DEALER with `identity` and sends
    one message of `frames`."""
    peer = zp.Zmtp(path, identity)
    peer.send(frames)
    time.sleep(0.3)
    peer.close()


def a_stranger_on_the_ranks_socket_is_dropped():
    with zp.Workdir() as w:
        cfg = w.write("s.yaml", CONFIG.format(name="s", gpus=2, batch=32, train=2000, corrupt=0,
                                              epochs=4, cost=200))
        p = w.start("up", cfg)
        run = w.run_dir("s")
        sock = os.path.join(run, "sock", "comm.ipc")
        zp.wait_for(lambda: os.path.exists(sock), 60, "the ranks' socket")
        # not a rank (9 of 2, and a name), with a REDUCE header and with garbage
        zmtp_dealer_sends(sock, b"9", [b"\x84\xa1v\x01\xa1t\xa6reduce\xa2id\x00\xa1n\x00", b"", b""])
        zmtp_dealer_sends(sock, b"stranger", [b"junk"])
        out, err = p.communicate(timeout=120)
        zp.check(p.returncode == 0, err)
        ends = zp.epoch_ends(run, "train")
        zp.check(len(ends) == 4 and all(e["distinct"] == 2000 for e in ends), ends)
        log = open(os.path.join(run, "logs", "trainer-0.log")).read()
        n = log.count("dropped a message from a peer that is no rank of this run")
        zp.check(n == 2, "%d drops logged:\n%s" % (n, log[-2000:]))


if __name__ == "__main__":
    zp.main([n_ranks_of_b_train_as_one_of_n_times_b,
             a_dead_rank_stops_the_run,
             a_stranger_on_the_ranks_socket_is_dropped])

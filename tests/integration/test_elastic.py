"""Resume with another number of ranks: a run of 2 ranks (trainer.gpus: 2, the
built-in trainer) killed with SIGKILL mid-epoch goes on with
`zeus-pipe up --resume RUN trainer.gpus=N`, N = 1 and 3. The rest of the cut
epoch is sharded over the N ranks from where every rank's shard had got to;
the epoch is recorded once, over both runs, with every sample exactly once,
and so is every later one; the later epochs are sharded over N from their
start, batch for batch those of an uninterrupted run of N ranks (with
another number of loaders too); the run's config.yaml says N from then on.
With 1 rank the batch size doubles to 64 (prefetch.batch_size=64: the same
global batch); one that would change the global batch is refused, and so
is any other key, naming it."""
import os
import shutil
import signal
import zp

CONFIG = """
run: {{name: {name}}}
seed: 11
dataset:
  source: synthetic
  synthetic: {{train_samples: 1025, test_samples: 200, shape: [1, 12, 16], classes: 4, cost_us: 3000}}
loader: {{workers: 2, task_size: 16}}
prefetch: {{batch_size: {batch}}}
cache: {{enabled: false}}
trainer:
  backend: cpu
  gpus: {gpus}
  model: {{hidden: [16]}}
  optimizer: {{name: sgd, lr: 0.002}}
  epochs: 3
  checkpoint: {{every_steps: 3}}
  debug: {{log_batches: true}}
"""
TRAIN, TEST = 1025, 200


def batch_lines(run, epoch, rank):
    """(epoch, batch, index digest, pixel digest) of a rank's batches of `epoch`."""
    name = "batches.log" if rank == 0 else "batches-rank%d.log" % rank
    with open(os.path.join(run, name)) as f:
        rows = [line.split() for line in f]
    return [(r[0], r[1], r[3], r[4]) for r in rows if int(r[0]) == epoch]


def killed_mid_epoch(w):
    """A run of 2 ranks, SIGKILLed (all of it) in train epoch 1 after a
    checkpoint there."""
    cfg = w.write("two.yaml", CONFIG.format(name="two", gpus=2, batch=32))
    p = w.start("up", cfg)
    run = w.run_dir("two")
    log = os.path.join(run, "batches.log")
    zp.wait_for(lambda: os.path.exists(log) and sum(1 for _ in open(log)) >= 26, 120,
                "train epoch 1, batch 9 of 17")
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    zp.wait_for(lambda: not zp.stage_pids(run), 10, "the stages to die")
    return run


def every_epoch_once(run):
    for split, n in (("train", TRAIN), ("test", TEST)):
        ends = zp.epoch_ends(run, split)
        zp.check([e["epoch"] for e in ends] == [0, 1, 2] and
                 all(e["samples"] == e["distinct"] == e["expected_samples"] == n and
                     e["index_checksum"] == zp.index_checksum(range(n)) for e in ends),
                 "%s: %s" % (split, [(e["epoch"], e["samples"], e["distinct"]) for e in ends]))


def a_run_of_2_ranks_goes_on_with_1_and_with_3():
    with zp.Workdir() as w:
        killed = killed_mid_epoch(w)
        for n in (1, 3):
            run = w.run_dir("as-%d" % n)
            shutil.copytree(killed, run, symlinks=True, ignore=shutil.ignore_patterns("sock"))
            # loaders do not shape the order: their number may change too
            batch = 64 if n == 1 else 32  # 1 rank: the batch size may double (2 x 32 a step)
            rc, out, err = w.run("up", "--resume", run, "trainer.gpus=%d" % n, "loader.workers=%d" % n,
                                 "prefetch.batch_size=%d" % batch)
            zp.check(rc == 0, "resume with %d: exit %d\n%s" % (n, rc, err[-3000:]))
            zp.check("at epoch 2, batch 0" in err and "with %d ranks where it had 2" % n in err and
                     (n != 1 or "with batch size 64 where it had 32 (the same 64 samples a step)"
                      in err), err[-2000:])
            every_epoch_once(run)
            # the rest of the cut epoch is a fresh run of n ranks' from the offset:
            # rank r's batches are the permutation's entries offset + r, + n, ...
            offset = int(err.split("sharded anew from entry ")[1].split()[0])
            perm = zp.permutation(11, 0, 1, TRAIN)
            for rank in range(n):
                mine = perm[offset + rank::n]
                want = [zp.order_digest(mine[i:i + batch]) for i in range(0, len(mine), batch)]
                got = [line[2] for line in batch_lines(run, 1, rank)][-len(want):]
                zp.check(got == want, "rank %d of %d, the rest of epoch 2 from entry %d: %d "
                         "batches differ from the sampler's" % (
                             rank, n, offset, sum(a != b for a, b in zip(got, want))))
            config = zp.text(os.path.join(run, "config.yaml"))
            zp.check("gpus: %d" % n in config and "batch_size: %d" % batch in config, config)
            # epoch 2 (index 2) is sharded over n from its start: an uninterrupted
            # run of n ranks has the same batches on every rank
            fresh = w.write("fresh-%d.yaml" % n, CONFIG.format(name="fresh-%d" % n, gpus=n,
                                                               batch=batch))
            rc, out, err = w.run("up", fresh)
            zp.check(rc == 0, err[-2000:])
            for rank in range(n):
                a, b = batch_lines(w.run_dir("fresh-%d" % n), 2, rank), batch_lines(run, 2, rank)
                zp.check(a == b and len(a) > 5, "rank %d of %d, epoch 3: %d batches uninterrupted, "
                         "%d resumed, first %s vs %s" % (rank, n, len(a), len(b), a[:1], b[:1]))


def another_key_than_trainer_gpus_is_refused():
    with zp.Workdir() as w:
        cfg = w.write("one.yaml", CONFIG.format(name="one", gpus=1, batch=32))
        rc, out, err = w.run("up", cfg, "trainer.epochs=1")
        zp.check(rc == 0, err)
        rc, out, err = w.run("up", "--resume", w.run_dir("one"), "seed=3")
        zp.check(rc == 2 and "'seed=3'" in err and "only trainer.gpus=N" in err, err)
        rc, out, err = w.run("up", "--resume", w.run_dir("one"), "prefetch.batch_size=16",
                             "trainer.gpus=3")
        zp.check(rc == 2 and "global batch was 32 x 1 = 32 samples a step" in err and
                 "prefetch.batch_size" in err, err)
        rc, out, err = w.run("up", "--resume", w.run_dir("one"), "prefetch.batch_size=64")
        zp.check(rc == 2 and "(with 1 rank: prefetch.batch_size=32)" in err, err)
        rc, out, err = w.run("up", "--resume", w.run_dir("one"), "loader.workers=0")
        zp.check(rc == 2 and "loader.workers" in err, err)
        # a run whose ranks' batches are limited cannot change its number of ranks
        rc, out, err = w.run("up", cfg, "trainer.epochs=1", "trainer.limit_train_batches=5",
                             "run.name=limited")
        zp.check(rc == 0, err)
        rc, out, err = w.run("up", "--resume", w.run_dir("limited"), "trainer.gpus=2")
        zp.check(rc == 2 and "trainer.limit_train_batches limits each rank's batches" in err, err)
        rc, out, err = w.run("up", "--resume", w.run_dir("one"), "trainer.gpus=0")
        zp.check(rc == 2 and "trainer.gpus" in err, err)


if __name__ == "__main__":
    zp.main([a_run_of_2_ranks_goes_on_with_1_and_with_3, another_key_than_trainer_gpus_is_refused])

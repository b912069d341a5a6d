"""The training runtime on real processes: a run killed with SIGKILL mid-epoch
and resumed trains on exactly the batches an uninterrupted run trains on, and
ends with the same loss; a damaged checkpoint is refused."""
import os
import signal
import time
import zp

CONFIG = """
run: {{name: {name}}}
seed: 7
dataset:
  source: synthetic
  synthetic: {{train_samples: 6000, test_samples: 500, shape: [1, 8, 8], classes: 4, cost_us: 300}}
loader: {{workers: 2, task_size: 50}}
prefetch: {{batch_size: 100}}
trainer:
  backend: cpu
  model: {{hidden: [16]}}
  epochs: 3
  checkpoint: {{every_steps: 7}}
  debug: {{log_batches: true}}
"""


def batch_sequence(run_dir):
    """(epoch, index, digest) by step; a step trained again after a resume counts once."""
    by_step = {}
    with open(os.path.join(run_dir, "batches.log")) as f:
        for line in f:
            epoch, index, step, digest = line.split()
            by_step[int(step)] = (int(epoch), int(index), digest)
    return [by_step[s] for s in sorted(by_step)], sum(1 for _ in open(os.path.join(run_dir, "batches.log")))


def final_test_loss(run_dir):
    return zp.epoch_ends(run_dir, "test")[-1]["loss"]


def a_run_killed_mid_epoch_and_resumed_matches_an_uninterrupted_run():
    with zp.Workdir() as w:
        cfg = w.write("r.yaml", CONFIG.format(name="full"))
        rc, out, err = w.run("up", cfg)
        zp.check(rc == 0, err)
        p = w.start("up", cfg, "run.name=cut")
        log = os.path.join(w.run_dir("cut"), "batches.log")
        zp.wait_for(lambda: os.path.exists(log) and sum(1 for _ in open(log)) >= 80, 60,
                    "the run to reach the second epoch")
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        zp.wait_for(lambda: not zp.stage_pids(w.path), 5, "the stages to die")
        rc, out, err = w.run("up", "--resume", "cut")
        zp.check(rc == 0, "resume: exit %d\n%s" % (rc, err))
        zp.check("resuming " in err and "at epoch 2, batch" in err, err)
        full, n_full = batch_sequence(w.run_dir("full"))
        cut, n_cut = batch_sequence(w.run_dir("cut"))
        zp.check(n_full == 180 and full == cut, "batch sequences differ (%d vs %d steps)" % (len(full), len(cut)))
        zp.check(n_cut > 180, "the resume retrained the steps after the last checkpoint (%d lines)" % n_cut)
        a, b = final_test_loss(w.run_dir("full")), final_test_loss(w.run_dir("cut"))
        zp.check(abs(a - b) <= 1e-5, "final test loss %r uninterrupted, %r resumed" % (a, b))


def a_damaged_checkpoint_is_refused():
    with zp.Workdir() as w:
        cfg = w.write("r.yaml", CONFIG.format(name="d"))
        rc, out, err = w.run("up", cfg, "trainer.epochs=1")
        zp.check(rc == 0, err)
        last = os.path.join(w.run_dir("d"), "checkpoints", "last.ckpt")
        good = open(last, "rb").read()
        cases = [(good[:100] + bytes([good[100] ^ 1]) + good[101:], "payload checksum mismatch"),
                 (good[:-10], "truncated or extended"),
                 (b"PK\x03\x04 this is a zip file" + good[22:], "not a zeus-pipe checkpoint")]
        for data, why in cases:
            with open(last, "wb") as f:
                f.write(data)
            rc, out, err = w.run("up", "--resume", "d")
            zp.check(rc == 2 and "cannot resume" in err and why in err, "exit %d: %s" % (rc, err))
            zp.check(not zp.stage_pids(w.path), "a stage was started")


if __name__ == "__main__":
    zp.main([a_run_killed_mid_epoch_and_resumed_matches_an_uninterrupted_run,
             a_damaged_checkpoint_is_refused])

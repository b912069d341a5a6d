"""The training runtime on real processes: a run killed with SIGKILL mid-epoch
and resumed trains on exactly the batches an uninterrupted run trains on, and
ends with the same loss (AdamW with warm-up and a cosine schedule: optimizer
state and schedule position both survive); a damaged checkpoint is refused;
schedules, limits, fast_dev_run and the NaN guard."""
import json
import math
import os
import shutil
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
  optimizer: {{name: adamw, lr: 0.01}}
  schedule: {{name: cosine, warmup_steps: 20, min_lr: 0.001}}
  epochs: 3
  checkpoint: {{every_steps: 7}}
  debug: {{log_batches: true}}
"""


def batch_sequence(run_dir):
    """(epoch, index, digest) by step; a step trained again after a resume counts once."""
    by_step = {}
    with open(os.path.join(run_dir, "batches.log")) as f:
        for line in f:
            epoch, index, step, digest = line.split()[:4]
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
        # the steps after the last checkpoint are trained again (none when the kill
        # fell right after a checkpoint): never fewer lines than steps
        zp.check(n_cut >= 180, "batches.log of the resumed run has %d lines for 180 steps" % n_cut)
        a, b = final_test_loss(w.run_dir("full")), final_test_loss(w.run_dir("cut"))
        zp.check(abs(a - b) <= 1e-5, "final test loss %r uninterrupted, %r resumed" % (a, b))


def sigusr1_saves_and_the_resumed_run_trains_each_batch_once():
    """`kill -USR1` (what Slurm's --signal sends): the trainer finishes its
    step and saves there, `up` exits 4 naming the position, and the resumed
    run trains exactly the batches an uninterrupted one does, none twice
    (checkpoint.every_steps off: the save is the only checkpoint)."""
    with zp.Workdir() as w:
        cfg = w.write("r.yaml", CONFIG.format(name="full").replace("every_steps: 7", "every_steps: 0"))
        rc, out, err = w.run("up", cfg)
        zp.check(rc == 0, err)
        p = w.start("up", cfg, "run.name=cut")
        log = os.path.join(w.run_dir("cut"), "batches.log")
        zp.wait_for(lambda: os.path.exists(log) and sum(1 for _ in open(log)) >= 75, 60,
                    "the run to reach the second epoch")
        p.send_signal(signal.SIGUSR1)
        out, err = p.communicate(timeout=120)
        zp.check(p.returncode == 4, "exit %d:\n%s" % (p.returncode, err))
        zp.check("stopped by SIGUSR1 after saving (exit status 4)" in err and
                 "resume with `zeus-pipe up --resume" in err, err)
        zp.check(zp.text(os.path.join(w.run_dir("cut"), "stopped")).startswith(
            "the run was stopped by SIGUSR1 to save"), "RUN/stopped")
        zp.check(not zp.stage_pids(w.path), "a stage is left")
        rc, out, err = w.run("up", "--resume", "cut")
        zp.check(rc == 0, "resume: exit %d\n%s" % (rc, err))
        full, n_full = batch_sequence(w.run_dir("full"))
        cut, n_cut = batch_sequence(w.run_dir("cut"))
        zp.check(n_full == 180 and full == cut and n_cut == 180,
                 "batch sequences: %d steps uninterrupted, %d lines resumed" % (n_full, n_cut))
        a, b = final_test_loss(w.run_dir("full")), final_test_loss(w.run_dir("cut"))
        zp.check(abs(a - b) <= 1e-5, "final test loss %r uninterrupted, %r resumed" % (a, b))
        same_proofs(w.run_dir("full"), w.run_dir("cut"))


def same_proofs(full, cut):
    """One train epoch_end record an epoch in both runs, the same proof: the
    epoch cut by the save is recorded once, after the resume, over both parts
    (its first part counted as trained), with the uninterrupted run's counts,
    index checksum and order digest."""
    keys = ("epoch", "samples", "distinct", "index_checksum", "order_digest")
    a = [tuple(e[k] for k in keys) for e in zp.epoch_ends(full, "train")]
    b = [tuple(e[k] for k in keys) for e in zp.epoch_ends(cut, "train")]
    zp.check(a == b, "train epoch records %s uninterrupted, %s saved and resumed" % (a, b))


def save_and_resume(w, cfg, when, what):
    """Runs cfg uninterrupted ("full") and again ("cut") with SIGUSR1 once
    when(run_dir) is true, exit 4, then `up --resume`: the same batches in
    the same order, none twice, the same final loss; returns the cut run."""
    rc, out, err = w.run("up", cfg)
    zp.check(rc == 0, err)
    p = w.start("up", cfg, "run.name=cut")
    zp.wait_for(lambda: os.path.exists(os.path.join(w.run_dir("cut"), "metrics.jsonl")) and
                when(w.run_dir("cut")), 60, what)
    p.send_signal(signal.SIGUSR1)
    out, err = p.communicate(timeout=120)
    zp.check(p.returncode == 4, "exit %d:\n%s" % (p.returncode, err))
    rc, out, err = w.run("up", "--resume", "cut")
    zp.check(rc == 0, "resume: exit %d\n%s" % (rc, err))
    full, n_full = batch_sequence(w.run_dir("full"))
    cut, n_cut = batch_sequence(w.run_dir("cut"))
    zp.check(full == cut and n_cut == n_full,
             "batch sequences: %d steps uninterrupted, %d lines resumed" % (n_full, n_cut))
    a, b = final_test_loss(w.run_dir("full")), final_test_loss(w.run_dir("cut"))
    zp.check(abs(a - b) <= 1e-5, "final test loss %r uninterrupted, %r resumed" % (a, b))
    return w.run_dir("cut")


def sigusr1_during_the_test_split_and_among_checkpoint_writes_resumes_exactly():
    """The signal while the test split of epoch 1 is read (train done: the
    run goes on with that test split again), and with a checkpoint written
    at every step (the save's write among them, each atomic)."""
    with zp.Workdir() as w:
        slow_test = CONFIG.format(name="full").replace("every_steps: 7", "every_steps: 0").replace(
            "test_samples: 500", "test_samples: 12000")
        cfg = w.write("t.yaml", slow_test)
        train_done = lambda run: [e for e in zp.metrics(run) if e.get("event") == "epoch_end"] and \
            [e["split"] for e in zp.metrics(run) if e.get("event") == "epoch_end"] == ["train"]
        cut = save_and_resume(w, cfg, train_done, "epoch 1's train split done, its test split not")
        tests = zp.epoch_ends(cut, "test")
        zp.check([e["epoch"] for e in tests] == [0, 1, 2] and
                 all(e["samples"] == e["distinct"] == 12000 for e in tests), tests)
        # train epoch 1 was over (and recorded) before the save: it does not come again
        same_proofs(w.run_dir("full"), cut)
    with zp.Workdir() as w:
        cfg = w.write("c.yaml", CONFIG.format(name="full").replace("every_steps: 7", "every_steps: 1"))
        log = lambda run: os.path.exists(os.path.join(run, "batches.log")) and \
            sum(1 for _ in open(os.path.join(run, "batches.log"))) >= 75
        save_and_resume(w, cfg, log, "the second epoch")


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
        # a run directory without sock/ (copied, or cleaned by hand) resumes: it is made again
        with open(last, "wb") as f:
            f.write(good)
        shutil.rmtree(os.path.join(w.run_dir("d"), "sock"))
        rc, out, err = w.run("up", "--resume", "d")
        zp.check(rc == 0 and "No such file" not in err, "resume without sock/: exit %d: %s" % (rc, err))


def steps(run_dir):
    return [m for m in zp.metrics(run_dir) if m.get("event") == "step"]


def the_logged_learning_rate_follows_warmup_and_the_schedule():
    with zp.Workdir() as w:
        cfg = w.write("r.yaml", CONFIG.format(name="s"))
        rc, out, err = w.run("up", cfg, "trainer.log_every_steps=1", "trainer.epochs=2",
                             "trainer.schedule.name=step", "trainer.schedule.step_epochs=1",
                             "trainer.schedule.gamma=0.5", "trainer.schedule.warmup_steps=10")
        zp.check(rc == 0, err)
        got = {m["step"]: m["lr"] for m in steps(w.run_dir("s"))}
        zp.check(len(got) == 120, "%d step records" % len(got))
        for step, lr in got.items():  # step k trains with the rate after k-1 steps
            want = 0.01 * 0.5 ** ((step - 1) // 60) * min(1.0, step / 10)
            zp.check(abs(lr - want) <= 1e-7, "step %d: lr %r, expected %r" % (step, lr, want))
        rc, out, err = w.run("up", cfg, "run.name=c", "trainer.log_every_steps=1")
        zp.check(rc == 0, err)
        got = {m["step"]: m["lr"] for m in steps(w.run_dir("c"))}
        for step, lr in got.items():
            f = (step - 1) / 179
            want = (0.001 + 0.009 * 0.5 * (1 + math.cos(math.pi * f))) * min(1.0, step / 20)
            zp.check(abs(lr - want) <= 1e-7, "cosine step %d: lr %r, expected %r" % (step, lr, want))


def limits_and_fast_dev_run_shorten_the_run():
    with zp.Workdir() as w:
        cfg = w.write("r.yaml", CONFIG.format(name="l"))
        rc, out, err = w.run("up", cfg, "trainer.limit_train_batches=3",
                             "trainer.limit_test_batches=2", "trainer.epochs=2")
        zp.check(rc == 0, err)
        train, test = zp.epoch_ends(w.run_dir("l"), "train"), zp.epoch_ends(w.run_dir("l"), "test")
        zp.check([e["samples"] for e in train] == [300, 300], train)
        zp.check([e["samples"] for e in test] == [200, 200], test)
        rc, out, err = w.run("up", cfg, "run.name=f", "trainer.fast_dev_run=true")
        zp.check(rc == 0, err)
        train, test = zp.epoch_ends(w.run_dir("f"), "train"), zp.epoch_ends(w.run_dir("f"), "test")
        zp.check([e["samples"] for e in train] == [100] and [e["samples"] for e in test] == [100],
                 (train, test))
        zp.check(os.listdir(os.path.join(w.run_dir("f"), "checkpoints")) == [],
                 "fast_dev_run wrote a checkpoint")


def an_injected_nan_stops_the_run_at_its_step_and_names_the_batch():
    with zp.Workdir() as w:
        cfg = w.write("r.yaml", CONFIG.format(name="n"))
        rc, out, err = w.run("up", cfg, "trainer.debug.nan_at_step=97", "trainer.debug.log_batches=true")
        zp.check(rc == 1, "exit %d" % rc)
        log = open(os.path.join(w.run_dir("n"), "logs", "trainer-0.log")).read()
        zp.check("step 97 (epoch 2, batch 37): a gradient is not finite: layer 1 weight gradient" in log, log)
        zp.check("trainer[0] exited with status 1" in err, err)
        lines = open(os.path.join(w.run_dir("n"), "nan-batch.txt")).read().split("\n")
        zp.check(lines[0].startswith("# step 97, epoch 2, batch 37, split train"), lines[0])
        indices = [int(x) for x in lines[1:] if x]
        # the same batch as batches.log's line of step 97, by the digest of its indices
        seq, _ = batch_sequence(w.run_dir("n"))
        zp.check(len(indices) == 100 and len(set(indices)) == 100, "%d indices" % len(indices))
        zp.check(seq[96][:2] == (1, 36) and seq[96][2] == zp.order_digest(indices),
                 "nan-batch.txt does not hold the batch of step 97")


def eval_of_best_and_of_epoch_n_match_the_training_run():
    with zp.Workdir() as w:
        cfg = w.write("r.yaml", CONFIG.format(name="e"))
        rc, out, err = w.run("up", cfg, "trainer.checkpoint.keep=all", "trainer.checkpoint.every_steps=0")
        zp.check(rc == 0, err)
        d = w.run_dir("e")
        tests = zp.epoch_ends(d, "test")
        best = max(range(3), key=lambda e: tests[e]["accuracy"])
        for which, epoch, name in (("best", best, "best"), ("2", 1, "epoch-2")):
            rc, out, err = w.run("eval", "e", "--ckpt", which)
            zp.check(rc == 0, "eval %s: %s" % (which, err))
            r = json.load(open(os.path.join(d, "eval-%s.json" % name)))
            zp.check(r["checkpoint"] == name and r["epoch"] == epoch + 1 and r["samples"] == 500, r)
            zp.check(r["accuracy"] == tests[epoch]["accuracy"], "%s: accuracy %r, the run's epoch %d had %r"
                     % (which, r["accuracy"], epoch + 1, tests[epoch]["accuracy"]))
            zp.check(abs(r["loss"] - tests[epoch]["loss"]) <= 1e-6, (r["loss"], tests[epoch]["loss"]))
            conf = r["confusion"]
            zp.check(len(conf) == 4 and sum(map(sum, conf)) == 500, conf)
            zp.check(sum(conf[c][c] for c in range(4)) == round(r["accuracy"] * 500), conf)
            for c in range(4):
                zp.check(abs(r["per_class_accuracy"][c] - conf[c][c] / sum(conf[c])) < 1e-9, r)
            zp.check("checkpoint %s " % name in out and "confusion" in out, out)
        rc, out, err = w.run("eval", "e", "--ckpt", "all")
        zp.check(rc == 0, err)
        for name in ("last", "best", "epoch-1", "epoch-2", "epoch-3"):
            zp.check(os.path.exists(os.path.join(d, "eval-%s.json" % name)), name)
        rc, out, err = w.run("eval", "e", "--ckpt", "9")
        zp.check(rc == 2 and "has no checkpoint epoch-9 (it has: last best epoch-1 epoch-2 epoch-3)" in err, err)
        with open(os.path.join(d, "checkpoints", "epoch-1.ckpt"), "r+b") as f:
            f.seek(200)
            f.write(b"\xff\xff")
        rc, out, err = w.run("eval", "e", "--ckpt", "1")
        zp.check(rc == 2 and "payload checksum mismatch" in err, err)


def overfit_drives_the_loss_of_one_batch_to_zero():
    with zp.Workdir() as w:
        cfg = w.write("r.yaml", CONFIG.format(name="o"))
        rc, out, err = w.run("overfit", cfg, "--steps", "300")
        zp.check(rc == 0, "exit %d\n%s\n%s" % (rc, out, err))
        first, last = [float(x) for x in open(os.path.join(w.run_dir("o-overfit"), "overfit.txt")).read().split()[1:]]
        zp.check(first > 1.0 and last < 0.05, (first, last))
        zp.check("model and data are wired right" in out, out)
        train = zp.epoch_ends(w.run_dir("o-overfit"), "train")
        zp.check(len(train) == 1 and train[0]["samples"] == 300 * 100 and train[0]["distinct"] == 100, train)
        zp.check(zp.epoch_ends(w.run_dir("o-overfit"), "test") == [], "overfit ran the test split")
        rc, out, err = w.run("overfit", cfg, "--steps", "20", "trainer.optimizer.lr=1e-6", "run.name=slow")
        zp.check(rc == 1 and "not below 0.05" in out, "exit %d\n%s" % (rc, out))


if __name__ == "__main__":
    zp.main([a_run_killed_mid_epoch_and_resumed_matches_an_uninterrupted_run,
             sigusr1_saves_and_the_resumed_run_trains_each_batch_once,
             sigusr1_during_the_test_split_and_among_checkpoint_writes_resumes_exactly,
             a_damaged_checkpoint_is_refused,
             the_logged_learning_rate_follows_warmup_and_the_schedule,
             limits_and_fast_dev_run_shorten_the_run,
             an_injected_nan_stops_the_run_at_its_step_and_names_the_batch,
             eval_of_best_and_of_epoch_n_match_the_training_run,
             overfit_drives_the_loss_of_one_batch_to_zero])

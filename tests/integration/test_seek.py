"""The consumer decides which split comes next, and resumes where it saved:
a Python loop that reads only train gets every train epoch exactly once, and
the test split is loaded for at most one ring's worth of batches (the cache
holds no more test samples than that); a loop that reads test before train
gets each epoch's test batches, then its train batches, every epoch proved
whole; a script killed mid-epoch after saving {model, optimizer,
zp.state_dict()} and started again in a new run with load_state_dict gets
the same batches (split, epoch, batch, indices) and ends with the same loss,
to the bit, as an uninterrupted one. Exits 77 (skipped) where
/usr/bin/python3 has no torch."""
import json
import os
import subprocess
import sys
import zp
from test_python import PACKAGE, PYTHON, python_command

DEPTH, WINDOW, BATCH = 2, 2, 32

CONFIG = """
run: {{name: {name}}}
seed: 11
dataset:
  source: synthetic
  synthetic: {{train_samples: 600, test_samples: 300, shape: [1, 4, 4], classes: 4}}
loader: {{workers: 2, task_size: 16}}
prefetch: {{batch_size: %d, depth: %d, window: %d, shuffle: true}}
cache: {{enabled: true, path: cache-{name}}}
trainer:
  epochs: 3
  command: [{python}, {script}, {args}]
""" % (BATCH, DEPTH, WINDOW)

TRAIN_ONLY = """
import sys, zeus_pipe
with zeus_pipe.attach() as zp, open(sys.argv[1], "w") as out:
    for epoch in range(3):
        print(epoch, sum(len(y) for x, y in zp.train), file=out)
"""

TEST_FIRST = """
import sys, zeus_pipe
with zeus_pipe.attach() as zp, open(sys.argv[1], "w") as out:
    for epoch in range(3):
        for name, src in (("test", zp.test), ("train", zp.train)):
            for x, y in src:
                s = zp.state_dict()
                print(name, s["epoch"], s["batch"] - 1, file=out)
"""

# argv: mode (full, kill or resume), the log, the checkpoint. One line a batch
# (split, epoch, batch, indices), then the last epoch's test loss in hex.
RESUMES = """
import os, signal, sys, torch, zeus_pipe
import torch.nn.functional as F
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 12), torch.nn.ReLU(),
                            torch.nn.Linear(12, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
mode, log, ckpt = sys.argv[1:4]
out = open(log, "a")
with zeus_pipe.attach() as zp:
    first = 0
    if mode == "resume":
        saved = torch.load(ckpt)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        zp.load_state_dict(saved["data"])
        first = zp.epoch  # docs/pytorch.md's recipe: the epoch the next train loop gives
        open(log + ".resumed", "w").write("%d %d" % (first, saved["epoch"]))
    for epoch in range(first, 3):
        for x, y in zp.train:
            s = zp.state_dict()
            print("train", s["epoch"], s["batch"] - 1, ",".join(map(str, zp.indices.tolist())),
                  file=out)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if mode == "kill" and epoch == 1 and s["batch"] - 1 == 7 or \
                    mode == "evalkill" and epoch == 1 and s["batch"] == len(zp.train):
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                            "data": zp.state_dict(), "epoch": epoch}, ckpt)
                if mode == "kill":
                    out.close()
                    os.kill(os.getpid(), signal.SIGKILL)
        total, n = 0.0, 0
        with torch.no_grad():
            for x, y in zp.test:
                s = zp.state_dict()
                print("test", s["epoch"], s["batch"] - 1, ",".join(map(str, zp.indices.tolist())),
                      file=out)
                total += float(F.cross_entropy(model(x), y, reduction="sum"))
                n += len(y)
                if mode == "evalkill" and epoch == 1 and s["batch"] == 3:
                    out.close()  # killed during the evaluation after the checkpoint
                    os.kill(os.getpid(), signal.SIGKILL)
    print("loss", (total / n).hex(), file=out)
"""


def up(w, name, script, args, *overrides):
    w.write(script, {"train_only.py": TRAIN_ONLY, "test_first.py": TEST_FIRST,
                     "resumes.py": RESUMES}[script])
    cfg = w.write(name + ".yaml", CONFIG.format(name=name, python=python_command(),
                                                 script=script, args=", ".join(args)))
    env = dict(os.environ, PYTHONPATH=os.path.abspath(PACKAGE))
    p = w.start("up", cfg, *overrides, env=env)
    out, err = p.communicate(timeout=240)
    return p.returncode, err


def cache_entries(w, name):
    rc, out, err = w.run("cache", "stat", os.path.join(w.path, "cache-" + name), "--json")
    zp.check(rc == 0, "cache stat: %s" % err)
    dbs = {d["name"]: d["entries"] for d in json.loads(out)["databases"]}
    return {split: dbs.get("synthetic/" + split, 0) for split in ("train", "test")}


def check_epochs(run_dir, split, epochs, samples):
    ends = zp.epoch_ends(run_dir, split)
    zp.check([e["epoch"] for e in ends] == list(range(epochs)),
             "%s epoch_end records of epochs %s, want 0..%d" % (split, [e["epoch"] for e in ends],
                                                                 epochs - 1))
    for e in ends:
        zp.check(e["samples"] == e["expected_samples"] == e["distinct"] == samples,
                 "%s epoch %d: %s" % (split, e["epoch"], e))


def a_loop_that_reads_only_train_never_loads_the_test_split_again():
    with zp.Workdir() as w:
        rc, err = up(w, "trainonly", "train_only.py", ["train.out"])
        zp.check(rc == 0, "exit %d:\n%s" % (rc, err[-2000:]))
        with open(os.path.join(w.path, "train.out")) as f:
            zp.check(f.read().split() == ["0", "600", "1", "600", "2", "600"], "the loop's epochs")
        run = w.run_dir("trainonly")
        check_epochs(run, "train", 3, 600)
        check_epochs(run, "test", 0, 300)
        loaded = cache_entries(w, "trainonly")
        zp.check(loaded["train"] == 600, "train samples loaded: %s" % loaded)
        # the test batches prepared before the loop showed it reads none: those
        # sent into the ring (depth) and those in flight behind them (depth + window)
        most = 2 * DEPTH + WINDOW
        zp.check(loaded["test"] <= most * BATCH, "test samples loaded: %d, more than %d batches "
                 "of %d" % (loaded["test"], most, BATCH))


def a_loop_that_reads_test_before_train_gets_both_every_epoch():
    with zp.Workdir() as w:
        rc, err = up(w, "testfirst", "test_first.py", ["order.out"])
        zp.check(rc == 0, "exit %d:\n%s" % (rc, err[-2000:]))
        with open(os.path.join(w.path, "order.out")) as f:
            got = [tuple(l.split()) for l in f]
        want = [(s, str(e), str(b)) for e in range(3)
                for s, n in (("test", 10), ("train", 19)) for b in range(n)]
        zp.check(got == want, "the loop got %s..., want %s..." % (got[:3], want[:3]))
        run = w.run_dir("testfirst")
        check_epochs(run, "train", 3, 600)
        check_epochs(run, "test", 3, 300)


def a_resumed_script_gets_the_same_batches_and_ends_with_the_same_loss():
    with zp.Workdir() as w:
        rc, err = up(w, "full", "resumes.py", ["full", "full.out", "full.pt"])
        zp.check(rc == 0, "the uninterrupted run: exit %d:\n%s" % (rc, err[-2000:]))
        rc, err = up(w, "cut", "resumes.py", ["kill", "cut.out", "cut.pt"])
        zp.check(rc != 0 and "trainer[0]" in err, "the killed run: exit %d:\n%s" % (rc, err[-2000:]))
        zp.check(os.path.exists(os.path.join(w.path, "cut.pt")), "no checkpoint saved")
        # the same script and config, a new run that loads the checkpoint
        rc, err = up(w, "cut", "resumes.py", ["resume", "cut.out", "cut.pt"], "run.name=resumed")
        zp.check(rc == 0, "the resumed run: exit %d:\n%s" % (rc, err[-2000:]))
        with open(os.path.join(w.path, "full.out")) as f:
            full = f.read().splitlines()
        with open(os.path.join(w.path, "cut.out")) as f:
            cut = f.read().splitlines()
        zp.check(len(full) == 3 * (19 + 10) + 1, "the uninterrupted run logged %d lines" % len(full))
        zp.check(cut[36].startswith("train 1 7 ") and cut[37].startswith("train 1 8 "),
                 "the killed run did not stop after batch 7 of train epoch 1: %s" % cut[36:38])
        for i, (a, b) in enumerate(zip(full, cut)):
            zp.check(a == b, "line %d: uninterrupted %r, resumed %r" % (i, a[:60], b[:60]))
        zp.check(len(cut) == len(full), "%d lines, want %d" % (len(cut), len(full)))
        # the resumed run's train epoch 1 record proves the whole epoch over both
        # runs (batches 0..7 of the first counted as trained): the uninterrupted
        # run's counts, checksum and order digest
        ends = zp.epoch_ends(w.run_dir("resumed"), "train")
        zp.check([(e["epoch"], e["samples"]) for e in ends] == [(1, 600), (2, 600)]
                 and all(e["samples"] == e["expected_samples"] == e["distinct"] for e in ends),
                 "the resumed run's train records: %s" % ends)
        whole = [e for e in zp.epoch_ends(w.run_dir("full"), "train") if e["epoch"] == 1][0]
        for key in ("samples", "distinct", "index_checksum", "order_digest"):
            zp.check(ends[0][key] == whole[key], "train epoch 1's %s: %r resumed, %r uninterrupted"
                     % (key, ends[0][key], whole[key]))
        # and their steps go on from the first run's (they restarted from 0)
        full_steps = {e["epoch"]: e["step"] for e in zp.epoch_ends(w.run_dir("full"), "train")}
        zp.check([e["step"] for e in ends] == [full_steps[1], full_steps[2]],
                 "resumed steps %s, the uninterrupted run's %s" % ([e["step"] for e in ends], full_steps))


def a_script_killed_during_evaluation_resumes_with_zp_epoch_and_ends():
    # the checkpoint is taken after train epoch 1's last batch; the kill comes in
    # its evaluation. The recipe resumed at saved["epoch"] and ran one epoch too
    # many ("the run has ended"); zp.epoch says the next train epoch is 2
    with zp.Workdir() as w:
        rc, err = up(w, "evalcut", "resumes.py", ["evalkill", "evalcut.out", "evalcut.pt"])
        zp.check(rc != 0 and os.path.exists(os.path.join(w.path, "evalcut.pt")),
                 "the killed run: exit %d:\n%s" % (rc, err[-2000:]))
        rc, err = up(w, "evalcut", "resumes.py", ["resume", "evalcut.out", "evalcut.pt"],
                     "run.name=evalresumed")
        zp.check(rc == 0, "the resumed run: exit %d:\n%s" % (rc, err[-2000:]))
        with open(os.path.join(w.path, "evalcut.out")) as f:
            trained = [tuple(l.split()[1:3]) for l in f if l.startswith("train")]
        want = [(str(e), str(b)) for e in range(3) for b in range(19)]
        resumed = zp.text(os.path.join(w.path, "evalcut.out.resumed")).split()
        zp.check(resumed == ["2", "1"], "zp.epoch after the load: %s (the saved loop's epoch "
                 "was 1, its train epoch finished)" % resumed)
        zp.check(trained == want, "train batches across both runs: %d, want every one of 3 "
                 "epochs once, in order" % len(trained))
        ends = zp.epoch_ends(w.run_dir("evalresumed"), "train")
        zp.check([e["epoch"] for e in ends] == [2] and ends[0]["samples"] == 600, ends)


if __name__ == "__main__":
    if subprocess.run([PYTHON, "-c", "import torch"], capture_output=True).returncode:
        print("SKIP: %s has no torch (Debian: apt install python3-torch)" % PYTHON)
        sys.exit(77)
    zp.main([a_loop_that_reads_only_train_never_loads_the_test_split_again,
             a_loop_that_reads_test_before_train_gets_both_every_epoch,
             a_resumed_script_gets_the_same_batches_and_ends_with_the_same_loss,
             a_script_killed_during_evaluation_resumes_with_zp_epoch_and_ends])

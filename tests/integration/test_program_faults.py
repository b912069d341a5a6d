"""A user's program as the trainer (trainer.command, the zeus_pipe package)
misbehaving: one that exits early ends the run cleanly; one slower than the
pipeline holds it back without losing a sample; one that holds a batch far
longer than prefetch.fetch_timeout_s makes the pipeline wait, not give up; a
second program attaching to a rank that is already attached is refused
naming the holder's pid; one attaching to a folder that is no run, or to a
run that has ended, is refused with a sentence saying what to do. Exits 77
(skipped) where /usr/bin/python3 has no torch."""
import os
import subprocess
import sys
import zp
from test_python import PACKAGE, PYTHON, python_command

CONFIG = """
run: {{name: {name}}}
seed: 9
dataset:
  source: synthetic
  synthetic: {{train_samples: 600, test_samples: 200, shape: [1, 4, 4], classes: 3}}
loader: {{workers: 2, task_size: 16}}
prefetch: {{batch_size: 50, depth: 2, fetch_timeout_s: 4}}
trainer:
  epochs: {epochs}
  command: [{python}, program.py, {mode}]
"""

# MODE: early (one train epoch of three, then exit 0), slow (20 ms a batch),
# hold (sits on train batch 2 for 9 s, past fetch_timeout_s: 4; a shorter timeout
# trips on slow loaders of a loaded sanitizer build), second (a child attaches as rank 0
# too, and says what it was told), else reads everything.
PROGRAM = """
import os, subprocess, sys, time, zeus_pipe
mode = sys.argv[1]
with zeus_pipe.attach() as zp:
    for epoch in range(1 if mode == "early" else zp._info.epochs):
        for i, (x, y) in enumerate(zp.train):
            if mode == "slow":
                time.sleep(0.02)
            if mode == "hold" and epoch == 0 and i == 2:
                time.sleep(9)
            if mode == "second" and epoch == 0 and i == 0:
                child = ("import zeus_pipe\\ntry:\\n    zeus_pipe.attach(timeout_s=5)\\n"
                         "except zeus_pipe.ZeusPipeError as e:\\n    print(e)\\n")
                said = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
                open("second.out", "w").write("%d %s%s" % (os.getpid(), said.stdout, said.stderr))
        if mode != "early":
            for x, y in zp.test:
                pass
"""


def up(w, name, mode, epochs=2):
    w.write("program.py", PROGRAM)
    cfg = w.write(name + ".yaml", CONFIG.format(name=name, epochs=epochs, mode=mode,
                                                 python=python_command()))
    env = dict(os.environ, PYTHONPATH=os.path.abspath(PACKAGE))
    p = w.start("up", cfg, env=env)
    out, err = p.communicate(timeout=240)
    return p.returncode, err, w.run_dir(name)


def exactly_once(run, epochs):
    for split, n in (("train", 600), ("test", 200)):
        ends = [(e["epoch"], e["samples"], e["distinct"], e["index_checksum"])
                for e in zp.epoch_ends(run, split)]
        want = [(k, n, n, zp.index_checksum(range(n))) for k in range(epochs)]
        zp.check(ends == want, "%s epoch_end records %s, want %s" % (split, ends, want))


def a_program_that_exits_early_ends_the_run_cleanly():
    with zp.Workdir() as w:
        rc, err, run = up(w, "early", "early", epochs=3)
        zp.check(rc == 0, "exit %d:\n%s" % (rc, err[-2000:]))
        ends = [e["epoch"] for e in zp.epoch_ends(run, "train")]
        zp.check(ends == [0], "train epochs proved: %s" % ends)
        zp.check(not os.path.exists(zp.ring_path(run)), "the ring is left in /dev/shm")


def a_slow_program_holds_the_pipeline_back_and_loses_nothing():
    with zp.Workdir() as w:
        rc, err, run = up(w, "slow", "slow")
        zp.check(rc == 0, "exit %d:\n%s" % (rc, err[-2000:]))
        exactly_once(run, 2)


def a_program_holding_a_batch_past_the_fetch_timeout_is_waited_for():
    with zp.Workdir() as w:
        rc, err, run = up(w, "hold", "hold")
        zp.check(rc == 0 and "no loader delivers" not in err, "exit %d:\n%s" % (rc, err[-2000:]))
        exactly_once(run, 2)


def a_second_program_on_an_attached_rank_is_refused_naming_the_holder():
    with zp.Workdir() as w:
        rc, err, run = up(w, "second", "second")
        zp.check(rc == 0, "exit %d:\n%s" % (rc, err[-2000:]))
        pid, said = zp.text(os.path.join(w.path, "second.out")).split(" ", 1)
        zp.check("rank 0 is already attached by another program (pid %s)" % pid in said,
                 "the second program was told: %r" % said)
        exactly_once(run, 2)


def attaching_to_no_run_or_an_ended_one_says_what_to_do():
    with zp.Workdir() as w:
        rc, err, run = up(w, "ended", "all", epochs=1)
        zp.check(rc == 0, "exit %d:\n%s" % (rc, err[-2000:]))
        probe = ("import sys, zeus_pipe\ntry:\n    zeus_pipe.attach(run=sys.argv[1], rank=0, "
                 "timeout_s=0.5)\nexcept zeus_pipe.ZeusPipeError as e:\n    print(e)\n")
        env = dict(os.environ, PYTHONPATH=os.path.abspath(PACKAGE))
        for folder, want in ((w.path, "no config.yaml: not a zeus-pipe run directory"),
                             (run, "is not there after 500 ms")):
            said = subprocess.run([PYTHON, "-c", probe, folder], capture_output=True, text=True,
                                  env=env, timeout=60).stdout
            zp.check(want in said and "zeus-pipe up" in said, "attach(run=%s): %r" % (folder, said))


if __name__ == "__main__":
    if subprocess.run([PYTHON, "-c", "import torch"], capture_output=True).returncode:
        print("SKIP: %s has no torch (Debian: apt install python3-torch)" % PYTHON)
        sys.exit(77)
    zp.main([a_program_that_exits_early_ends_the_run_cleanly,
             a_slow_program_holds_the_pipeline_back_and_loses_nothing,
             a_program_holding_a_batch_past_the_fetch_timeout_is_waited_for,
             a_second_program_on_an_attached_rank_is_refused_naming_the_holder,
             attaching_to_no_run_or_an_ended_one_says_what_to_do])

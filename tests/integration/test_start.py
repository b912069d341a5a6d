"""Python-first use (python/zeus_pipe/_start.py and `zeus-pipe up --attach`): a
script run as `python3 script.py` starts the data stages itself with
zeus_pipe.attach(config=...), gets every epoch exactly once, and leaves no
process or ring behind when it ends — normally, by an exception mid-epoch, or
SIGKILLed; a bad config raises ZeusPipeError with the config error; under
`torchrun --nproc_per_node 2` local rank 0 starts one pipeline of two ranks
and the ranks' batches split every epoch exactly once. Exits 77 (skipped)
where /usr/bin/python3 has no torch."""
import os
import signal
import subprocess
import sys
import time
import zp

PYTHON = sys.executable
TORCHRUN = "/usr/bin/torchrun"
PACKAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
TRAIN, TEST = 1000, 300

CONFIG = """
run: {name: start}
seed: 7
dataset:
  source: synthetic
  synthetic: {train_samples: 1000, test_samples: 300, shape: [2, 6, 5], classes: 4}
loader: {workers: 2, task_size: 32}
prefetch: {batch_size: 64, depth: 2, shuffle: true}
trainer:
  epochs: 2
  command: [python3, never-started.py]   # --attach leaves it out: the script is the trainer
"""

# argv: MODE OUT. Writes the run directory to OUT.run, then one line per batch
# (split epoch indices) to OUT.<rank>; MODE raise/sleep stops at train batch 3.
SCRIPT = """
import os, sys, time, zeus_pipe
mode, out = sys.argv[1], sys.argv[2]
rank = int(os.environ.get("RANK", "0"))
if mode == "bad":
    try:
        zeus_pipe.attach(config="bad.yaml")
    except zeus_pipe.ZeusPipeError as e:
        open(out + ".error", "w").write(str(e))
    sys.exit(0)
f = open("%s.%d" % (out, rank), "w")
with zeus_pipe.attach(config="start.yaml", overrides={"loader.workers": 2}, timeout_s=240) as zp:
    open(out + ".run.tmp", "w").write(zp.run)
    os.replace(out + ".run.tmp", out + ".run")
    for epoch in range(2):
        for name, src in (("train", zp.train), ("test", zp.test)):
            for i, (x, y) in enumerate(src):
                print(name, epoch, ",".join(map(str, zp.indices.tolist())), file=f, flush=True)
                if mode == "raise" and i == 3:
                    raise ValueError("the model broke mid-epoch")
                if mode == "sleep" and i == 3:
                    open(out + ".ready", "w").close()
                    time.sleep(600)
"""


def env():
    """The package from this checkout and the binary under test; with a
    sanitizer build, its runtime preloaded into Python (without leak checks:
    those are Python's own)."""
    e = dict(os.environ, PYTHONPATH=os.path.abspath(PACKAGE), ZP_BIN=zp.BIN,
             ZP_LIBRARY=os.path.join(os.path.dirname(zp.BIN), "libzeuspipe.so"))
    e.update(zp.sanitizer_env())
    return e


def start(w, *argv):
    """Runs argv in w with the script and config written, in a session of its own."""
    w.write("start.yaml", CONFIG)
    w.write("script.py", SCRIPT)
    p = subprocess.Popen(list(argv), cwd=w.path, env=env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    w.procs.append(p)
    return p


def leftovers(w, run_dir):
    """What of the run is still there: its processes (stages and the
    supervisor) and its ring."""
    left = ["pid %d" % p for p in zp.stage_pids(w.path)]
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
            cwd = os.readlink("/proc/%s/cwd" % d)
        except OSError:
            continue
        if "--attach" in argv and cwd.startswith(w.path):
            left.append("supervisor %s" % d)
    return left + [r for r in [zp.ring_path(run_dir)] if os.path.exists(r)]


def batches(path):
    """{(split, epoch): [indices in order]} of one rank's file."""
    got = {}
    with open(path) as f:
        for split, epoch, idx in map(str.split, f):
            got.setdefault((split, int(epoch)), []).extend(int(i) for i in idx.split(","))
    return got


def a_script_started_alone_gets_every_epoch_once_and_leaves_nothing():
    with zp.Workdir() as w:
        p = start(w, PYTHON, "script.py", "all", "out")
        out, err = p.communicate(timeout=240)
        zp.check(p.returncode == 0, "exit %d:\n%s" % (p.returncode, err[-3000:]))
        with open(os.path.join(w.path, "out.run")) as f:
            run_dir = f.read()
        got = batches(os.path.join(w.path, "out.0"))
        for split, n in (("train", TRAIN), ("test", TEST)):
            ends = [(m["epoch"], m["samples"], m["distinct"]) for m in zp.epoch_ends(run_dir, split)]
            zp.check(ends == [(0, n, n), (1, n, n)], "%s epoch_end records: %s" % (split, ends))
            for epoch in range(2):
                zp.check(sorted(got[split, epoch]) == list(range(n)),
                         "%s epoch %d: the script got %d indices" % (split, epoch, len(got[split, epoch])))
        zp.check(not leftovers(w, run_dir), "left after exit: %s" % leftovers(w, run_dir))
        log = zp.text(os.path.join(run_dir, "logs", "supervisor.log"))
        zp.check("run finished" in log and "trainer.command not started" in log,
                 "the pipeline ended by itself, its output in logs/supervisor.log:\n" + log[-2000:])
        zp.check("zeus-pipe:" not in err, "the pipeline's output reached the terminal:\n" + err)


def stopped_after(w, p, what):
    """Waits (bounded) until nothing of the script's run is left."""
    with open(os.path.join(w.path, "out.run")) as f:
        run_dir = f.read()
    zp.wait_for(lambda: not leftovers(w, run_dir), 60, "the stages to stop after " + what)
    return run_dir


def a_script_that_raises_mid_epoch_stops_the_stages():
    with zp.Workdir() as w:
        p = start(w, PYTHON, "script.py", "raise", "out")
        out, err = p.communicate(timeout=240)
        zp.check(p.returncode == 1 and "ValueError: the model broke mid-epoch" in err,
                 "exit %d:\n%s" % (p.returncode, err[-3000:]))
        run_dir = stopped_after(w, p, "the exception")
        log = zp.text(os.path.join(run_dir, "logs", "supervisor.log"))
        zp.check("every stage stopped" in log, "supervisor.log:\n" + log[-2000:])


def a_sigkilled_script_stops_the_stages():
    with zp.Workdir() as w:
        p = start(w, PYTHON, "script.py", "sleep", "out")
        zp.wait_for(lambda: os.path.exists(os.path.join(w.path, "out.ready")) or p.poll() is not None,
                    240, "the script's fourth batch")
        if p.poll() is not None:
            raise AssertionError("the script ended early:\n%s" % p.communicate()[1][-3000:])
        os.kill(p.pid, signal.SIGKILL)  # the script alone: its pipeline must notice
        p.wait()
        stopped_after(w, p, "SIGKILL")


def a_bad_config_raises_the_config_error():
    with zp.Workdir() as w:
        w.write("bad.yaml", "run: {name: bad}\ndataset: {source: synthetic}\nloader: {workers: 0}\n")
        p = start(w, PYTHON, "script.py", "bad", "out")
        out, err = p.communicate(timeout=120)
        zp.check(p.returncode == 0, "exit %d:\n%s" % (p.returncode, err[-3000:]))
        said = zp.text(os.path.join(w.path, "out.error"))
        zp.check("bad.yaml:3:19: loader.workers: must be 1..256 (got 0)" in said and
                 "exited with status 2" in said, "ZeusPipeError: %r" % said)
        zp.check(not os.path.exists(os.path.join(w.path, "runs", "bad")), "a run directory was made")


def torchrun_two_ranks_split_every_epoch_once():
    if not os.path.exists(TORCHRUN):
        print("SKIP torchrun_two_ranks_split_every_epoch_once: no %s" % TORCHRUN)
        return
    with zp.Workdir() as w:
        # --redirects 1 --tee 1: Debian's torch 1.13 under Python 3.11 fails to parse the
        # default "0" (Std.from_str returns None); 1 is stdout to a file and teed.
        p = start(w, TORCHRUN, "--standalone", "--nproc_per_node", "2", "--redirects", "1",
                  "--tee", "1", "script.py", "all", "out")
        out, err = p.communicate(timeout=280)
        zp.check(p.returncode == 0, "exit %d:\n%s\n%s" % (p.returncode, out[-2000:], err[-3000:]))
        with open(os.path.join(w.path, "out.run")) as f:
            run_dir = f.read()
        ranks = [batches(os.path.join(w.path, "out.%d" % r)) for r in range(2)]
        for split, n in (("train", TRAIN), ("test", TEST)):
            for epoch in range(2):
                mine = [r.get((split, epoch), []) for r in ranks]
                zp.check(all(mine), "%s epoch %d: a rank got no batch" % (split, epoch))
                zp.check(not set(mine[0]) & set(mine[1]), "%s epoch %d: ranks share indices"
                         % (split, epoch))
                zp.check(sorted(mine[0] + mine[1]) == list(range(n)),
                         "%s epoch %d: %d + %d indices" % (split, epoch, len(mine[0]), len(mine[1])))
        zp.check(not leftovers(w, run_dir), "left after exit: %s" % leftovers(w, run_dir))


if __name__ == "__main__":
    if subprocess.run([PYTHON, "-c", "import torch"], capture_output=True).returncode:
        print("SKIP: %s has no torch (Debian: apt install python3-torch)" % PYTHON)
        sys.exit(77)
    zp.main([a_script_started_alone_gets_every_epoch_once_and_leaves_nothing,
             a_script_that_raises_mid_epoch_stops_the_stages,
             a_sigkilled_script_stops_the_stages,
             a_bad_config_raises_the_config_error,
             torchrun_two_ranks_split_every_epoch_once])

"""What a Dataset starts does not outlive the run: helper processes a
Dataset's constructor starts (subprocess.Popen), in the probe and in each
Python loader, are stopped with that process's group; a child it forks inside
__getitem__, whether it calls sys.exit or returns, ends at once instead of
going on as a loader on its parent's ZeroMQ sockets (it used to spin in
zmq_ctx_term for ever, reparented to init). Every sample still comes once.
Exits 77 (skipped) where /usr/bin/python3 has no numpy or torch."""
import os
import subprocess
import sys
import time

import zp

PYTHON = sys.executable
PACKAGE, DATA = zp.PACKAGE, zp.PYDATA

CONFIG = """
run: {{name: {name}}}
dataset:
  source: python
  python:
    class: zp_test_data:Forky
    path: [{data}]
    args: {{n: 300, helpers: {helpers}, forks: {forks}, fork_at: 17, child_returns: {returns}}}
    splits: {{train: {{}}, test: {{n: 30}}}}
    interpreter: {python}
loader: {{workers: 2, task_size: 16}}
prefetch: {{batch_size: 30}}
trainer: {{epochs: 2, backend: "null"}}
"""


def env():
    return zp.python_env()


def running(pid):
    """Alive and not a zombie."""
    try:
        state = zp.text("/proc/%d/stat" % pid).rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):  # gone (text() may read it empty)
        return False
    return state != "Z"


def pids(path):
    return [int(x) for x in zp.text(path).split()] if os.path.exists(path) else []


def helpers_and_forked_children_end_with_the_run():
    with zp.Workdir() as w:
        for name, returns in (("exits", "false"), ("returns", "true")):
            helpers, forks = os.path.join(w.path, name + ".helpers"), os.path.join(w.path, name + ".forks")
            cfg = w.write(name + ".yaml", CONFIG.format(name=name, data=DATA, helpers=helpers,
                                                        forks=forks, returns=returns, python=PYTHON))
            p = w.start("up", cfg, env=env())
            out, err = p.communicate(timeout=240)
            zp.check(p.returncode == 0, "%s: exit %d:\n%s" % (name, p.returncode, err[-3000:]))
            for split, n in (("train", 300), ("test", 30)):
                for e in zp.epoch_ends(w.run_dir(name), split):
                    zp.check(e["samples"] == n == e["distinct"], "%s: %r" % (name, e))
            started = pids(helpers) + pids(forks)
            zp.check(len(pids(helpers)) >= 2 and len(pids(forks)) >= 2,
                     "%s: %d helpers, %d forked children: the Dataset did not do its part"
                     % (name, len(pids(helpers)), len(pids(forks))))
            end = time.time() + 5
            while any(running(pid) for pid in started) and time.time() < end:
                time.sleep(0.1)
            left = [pid for pid in started if running(pid)]
            for pid in left:
                os.kill(pid, 9)
            zp.check(not left, "%s: %d of the Dataset's %d processes outlived the run: %r"
                     % (name, len(left), len(started), left))


if __name__ == "__main__":
    zp.main_needing(['numpy', 'torch'], [helpers_and_forked_children_end_with_the_run])

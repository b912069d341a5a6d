"""What `up` waits on before any stage starts, bounded and said: an
interpreter that never answers `import zeus_pipe` is killed after 30 s with
a sentence naming dataset.python.interpreter; a Dataset that prints more
than a pipe holds still starts (the probe's answer has a channel of its own)
and its last lines reach the log; a full disk under `zeus-pipe warm` is named
as a full disk (root only: a 2 MB tmpfs). Exits 77 (skipped) where
/usr/bin/python3 has no numpy or torch."""
import json
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
    class: zp_test_data:{cls}
    path: [{data}]
    args: {{n: 200}}
    splits: {{train: {{}}, test: {{n: 20}}}}
    interpreter: {python}
loader: {{workers: 2}}
prefetch: {{batch_size: 20}}
trainer: {{epochs: 1, command: [{program}, consumer.py]}}
"""

CONSUMER = """
import sys, zeus_pipe
with zeus_pipe.attach(raw=True) as zp:
    n = sum(len(y) for x, y in zp.train) + sum(len(y) for x, y in zp.test)
print("consumer saw", n, file=sys.stderr)
"""


def env():
    return zp.python_env()


def up(w, cfg, *over, timeout=240):
    p = w.start("up", cfg, *over, env=env())
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def an_interpreter_that_never_answers_is_killed_and_named():
    with zp.Workdir() as w:
        pidfile = os.path.join(w.path, "hang.pid")
        hang = w.write("hang.sh", "#!/bin/sh\necho $$ > %s\nexec sleep 3600\n" % pidfile)
        os.chmod(hang, 0o755)
        cfg = w.write("hang.yaml", CONFIG.format(name="hang", cls="Shifted", data=DATA,
                                                 python=hang, program=PYTHON))
        t0 = time.time()
        rc, out, err = up(w, cfg, timeout=120)
        zp.check(rc == 2, "exit %d, want 2:\n%s" % (rc, err[-2000:]))
        zp.check("hang.yaml: dataset.python.interpreter: '%s -c \"import zeus_pipe\"' did not end "
                 "in 30 s (killed)" % hang in err, err[-2000:])
        zp.check(time.time() - t0 < 100, "up took %.0f s to give up" % (time.time() - t0))
        pid = int(zp.text(pidfile))
        zp.check(not os.path.exists("/proc/%d" % pid) or
                 zp.text("/proc/%d/stat" % pid).rsplit(")", 1)[1].split()[0] == "Z",
                 "the interpreter that never answered is still running (pid %d)" % pid)


def a_dataset_that_prints_more_than_a_pipe_holds_starts():
    with zp.Workdir() as w:
        w.write("consumer.py", CONSUMER)
        cfg = w.write("chatty.yaml", CONFIG.format(name="chatty", cls="Chatty", data=DATA,
                                                   python=PYTHON, program=PYTHON))
        rc, out, err = up(w, cfg)
        zp.check(rc == 0, "exit %d:\n%s" % (rc, err[-3000:]))
        zp.check("consumer saw 220" in err, err[-2000:])
        log = zp.text(os.path.join(w.run_dir("chatty"), "logs", "supervisor.log")) + err
        zp.check("the Dataset printed, last lines:" in log and "built a chatty Dataset" in log,
                 "the Dataset's prints are not in the log:\n%s" % log[-2000:])


SYNTH = """
run: {name: full}
dataset: {source: synthetic, synthetic: {train_samples: 3000, test_samples: 10, shape: [1, 28, 28]}}
cache: {enabled: true, path: %s}
"""


def a_full_disk_under_warm_is_named_a_full_disk():
    if os.geteuid() != 0:
        print("(not root: no tmpfs to fill; skipped)")
        return
    with zp.Workdir() as w:
        disk = os.path.join(w.path, "small")
        os.makedirs(disk)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", disk]).returncode:
            print("(mount refused here: skipped)")
            return
        try:
            cfg = w.write("full.yaml", SYNTH % os.path.join(disk, "cache"))
            rc, out, err = w.run("warm", cfg)  # 3010 samples of 3 KiB: 9 MB into 2
            zp.check(rc == 1, "warm on a full disk: exit %d:\n%s%s" % (rc, out, err[-2000:]))
            zp.check("the cache could not take every sample: " in err and "the disk of cache.path "
                     "is full" in err and "max_bytes" not in err, err[-2000:])
        finally:
            subprocess.run(["umount", "-l", disk])


if __name__ == "__main__":
    zp.main_needing(['numpy', 'torch'], [an_interpreter_that_never_answers_is_killed_and_named,
                    a_dataset_that_prints_more_than_a_pipe_holds_starts,
                    a_full_disk_under_warm_is_named_a_full_disk])

"""One sample that kills or hangs every loader does not take the run down:
a __getitem__ that segfaults on train sample 100 (loader.on_error: skip)
costs three loaders, then the sample is found alone and skipped, named with
its cause ("killed"), and every other sample of the epoch comes once; one
that never returns on sample 150 is found the same way, each hung loader
ending itself past loader.heartbeat_ms x (liveness + 1) and replaced
("hung"). With loader.on_error: error the run stops at once, naming the
sample, rather than after prefetch.fetch_timeout_s. Exits 77 (skipped)
where /usr/bin/python3 has no numpy or torch."""
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
    class: zp_test_data:Deadly
    path: [{data}]
    args: {{n: 300, crash_at: {crash}, hang_at: {hang}}}
    splits: {{train: {{}}, test: {{n: 40, crash_at: -1, hang_at: -1}}}}
    interpreter: {python}
loader: {{workers: 2, task_size: 16, heartbeat_ms: 200, liveness: 3, on_error: {on_error},
          max_restarts_per_min: 100}}
prefetch: {{batch_size: 32, fetch_timeout_s: 120}}
trainer: {{epochs: 1, backend: "null"}}
"""


def env():
    # the Dataset's SIGSEGV is the test's own: a sanitizer build must not report it as a fault
    return zp.python_env(ASAN_OPTIONS="handle_segv=0")


def up(w, name, crash=-1, hang=-1, on_error="skip"):
    cfg = w.write(name + ".yaml", CONFIG.format(name=name, data=DATA, crash=crash, hang=hang,
                                                on_error=on_error, python=PYTHON))
    t0 = time.time()
    p = w.start("up", cfg, env=env())
    out, err = p.communicate(timeout=240)
    return p.returncode, err, time.time() - t0


def a_sample_that_kills_or_hangs_every_loader_is_found_and_skipped():
    with zp.Workdir() as w:
        for name, kw, cause, index in (("crash", {"crash": 100}, "killed", 100),
                                       ("hang", {"hang": 150}, "hung", 150)):
            rc, err, took = up(w, name, **kw)
            zp.check(rc == 0, "%s: exit %d:\n%s" % (name, rc, err[-3000:]))
            rep = json.load(open(os.path.join(w.run_dir(name), "report.json")))
            skipped = rep["skipped_samples"]
            zp.check(len(skipped) == 1 and skipped[0]["index"] == index and
                     ("train sample %d %s each loader that held it alone" % (index, cause))
                     in skipped[0]["error"], "%s: skipped %r" % (name, skipped))
            e = zp.epoch_ends(w.run_dir(name), "train")[0]
            zp.check(e["skipped"] == 1 and e["samples"] == 299 and e["distinct"] == 299, e)
            t = zp.epoch_ends(w.run_dir(name), "test")[0]
            zp.check(t["samples"] == 40 == t["distinct"], t)
            zp.check(took < 100, "%s: the run took %.0f s" % (name, took))


def with_on_error_error_the_run_stops_naming_the_sample():
    with zp.Workdir() as w:
        rc, err, took = up(w, "stop", crash=100, on_error="error")
        logs = "".join(zp.text(os.path.join(w.run_dir("stop"), "logs", f))
                       for f in os.listdir(os.path.join(w.run_dir("stop"), "logs")))
        zp.check(rc != 0 and "train sample 100 killed each loader that held it alone" in logs + err,
                 "exit %d:\n%s" % (rc, (logs + err)[-3000:]))
        zp.check(took < 60, "the run took %.0f s to stop (the fetch timeout is 120)" % took)


if __name__ == "__main__":
    zp.main_needing(['numpy', 'torch'], [a_sample_that_kills_or_hangs_every_loader_is_found_and_skipped,
                    with_on_error_error_the_run_stops_naming_the_sample])

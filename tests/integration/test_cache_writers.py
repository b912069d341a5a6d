"""One cache, two writers: `zeus-pipe warm` of config A (a Python Dataset
with args shift: 7) runs while `zeus-pipe up` of config B (the same Dataset
without the shift, cache.on_mismatch: rebuild) asks for the same cache.path.
B is refused before any stage starts, naming A's run; once A has ended B
rebuilds and gets only its own pixels; a value of A's put into B's cache (what
two writers used to leave) is never served, and `cache verify` counts it
foreign. Exits 77 (skipped) where /usr/bin/python3 has no numpy or torch."""
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
    class: zp_test_data:Shifted
    path: [{data}]
    args: {{n: 400, shift: {shift}, cost_ms: {cost}}}
    splits: {{train: {{}}, test: {{n: 40}}}}
    interpreter: {python}
loader: {{workers: 2, task_size: 16}}
prefetch: {{batch_size: 40}}
cache: {{enabled: true, path: {cache}, on_mismatch: rebuild}}
trainer: {{epochs: 2, command: [{python}, consumer.py, {name}.json]}}
"""

# Every sample's first pixel, by split and index: the shift it was made with.
CONSUMER = """
import json, sys, zeus_pipe
wrong = []
n = 0
with zeus_pipe.attach(raw=True) as zp:
    for epoch in range(2):
        for name, src in (("train", zp.train), ("test", zp.test)):
            for image, label in src:
                for k, i in enumerate(zp.indices.tolist()):
                    n += 1
                    if int(image[k, 0, 0, 0]) != i % 256:
                        wrong.append((name, epoch, i, int(image[k, 0, 0, 0])))
json.dump({"n": n, "wrong": wrong}, open(sys.argv[1], "w"))
"""

COPY = """
import lmdb, sys
src = lmdb.open(sys.argv[1], readonly=True, lock=False, max_dbs=8)
dst = lmdb.open(sys.argv[2], max_dbs=8)
with src.begin() as t:
    name = [k for k, _ in t.cursor() if k.endswith(b"/train")][0]
sdb, ddb = src.open_db(name, create=False), dst.open_db(name, create=False)
key = int(sys.argv[3]).to_bytes(4, "big")
with src.begin() as t:
    v = bytes(t.get(key, db=sdb))
with dst.begin(write=True) as t:
    t.put(key, v, db=ddb)
"""


def env():
    return zp.python_env()


def config(w, name, shift, cost, cache="cache"):
    return w.write(name + ".yaml", CONFIG.format(name=name, data=DATA, shift=shift, cost=cost,
                                                 python=PYTHON, cache=cache))


def up(w, cfg, timeout=240):
    p = w.start("up", cfg, env=env())
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def seen(w, name):
    return json.load(open(os.path.join(w.path, name + ".json")))


def a_second_writer_of_another_dataset_is_refused_and_a_foreign_value_never_served():
    with zp.Workdir() as w:
        w.write("consumer.py", CONSUMER)
        a = config(w, "a", 7, 15)  # 440 samples of 15 ms on 2 loaders: about 3 s of warming
        warm = w.start("warm", a, env=env())
        cache_log = os.path.join(w.path, "cache")
        zp.wait_for(lambda: os.path.exists(os.path.join(cache_log, "writer.lock")) and
                    b"run " in open(os.path.join(cache_log, "writer.lock"), "rb").read(), 60,
                    "warm's cache stage holding the cache")
        b = config(w, "b", 0, 0)
        rc, out, err = up(w, b)
        zp.check(warm.poll() is None, "warm ended before up was tried: the test proves nothing")
        zp.check(rc == 2, "up of another dataset during warm: exit %d, want 2:\n%s" % (rc, err[-2000:]))
        for want in ("give this one another cache.path", "was built from another dataset or transform",
                     "is in use by another run (zeus-pipe pid", "wait for that run to end"):
            zp.check(want in err, "no %r in:\n%s" % (want, err[-2000:]))
        zp.check(not os.path.exists(os.path.join(w.run_dir("b"), "logs")), "a stage of b started")
        out, err = warm.communicate(timeout=240)
        zp.check(warm.returncode == 0 and "max_bytes" not in err,
                 "warm of a: exit %d:\n%s" % (warm.returncode, err[-2000:]))
        # a has ended: b rebuilds the cache, and every sample it gets is its own
        rc, out, err = up(w, b)
        zp.check(rc == 0 and "rebuilding" in err, "b after a: exit %d:\n%s" % (rc, err[-2000:]))
        got = seen(w, "b")
        zp.check(got["n"] == 2 * 440 and not got["wrong"], "b got %d samples, %d of another "
                 "dataset: %r" % (got["n"], len(got["wrong"]), got["wrong"][:5]))
        # what two writers used to leave: a value of a's in b's cache, checksum and all
        p = w.start("warm", config(w, "a2", 7, 0, cache="cache-a"), env=env())
        out, err = p.communicate(timeout=240)
        zp.check(p.returncode == 0, err[-2000:])
        subprocess.run(["/usr/bin/python3", "-c", COPY, os.path.join(w.path, "cache-a"),
                        os.path.join(w.path, "cache"), "123"], check=True)
        rc, out, err = w.run("cache", "verify", "cache")
        zp.check(rc == 1 and "1 bad (1 of them foreign" in out and "key 123: a value of another "
                 "dataset or transform" in out, "verify: exit %d:\n%s%s" % (rc, out, err))
        rc, out, err = up(w, b)
        zp.check(rc == 0, "b with a foreign value: exit %d:\n%s" % (rc, err[-2000:]))
        got = seen(w, "b")
        zp.check(got["n"] == 2 * 440 and not got["wrong"], "the foreign value was served: %r"
                 % got["wrong"][:5])
        metrics = zp.metrics(w.run_dir("b-2"))  # the refused try made no run folder
        corrupt = sum(m["corrupt"] for m in metrics if m.get("event") == "cache")
        zp.check(corrupt == 1, "the foreign value counted %d times, want once (then reloaded)" % corrupt)


if __name__ == "__main__":
    zp.main_needing(['numpy', 'torch', 'lmdb'], [a_second_writer_of_another_dataset_is_refused_and_a_foreign_value_never_served])

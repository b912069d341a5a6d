"""dataset.source: python — a user's map-style Dataset through the whole
pipeline: Python loaders (python -m zeus_pipe._loader_process over libzeuspipe.so's
loader) run __getitem__, samples of named fields cross the wire, the cache
and the ring, and a trainer.command gets them as the Dataset returned them
(a dict of tensors, a tuple), every sample once, its random draws seeded
from (seed, split, epoch, index). Bad Datasets, a killed or hung loader.
Exits 77 (skipped) where /usr/bin/python3 has no torch or numpy."""
import json
import os
import random
import signal
import subprocess
import sys
import time

import zp

PYTHON = sys.executable
PACKAGE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "python"))
DATA = os.path.abspath(os.path.join(os.path.dirname(__file__), "pydata"))
sys.path.insert(0, PACKAGE)

CONFIG = """
run: {{name: {name}}}
seed: 11
dataset:
  source: python
  python:
    class: zp_test_data:{cls}
    path: [{data}]
    args: {args}
    splits: {splits}
    interpreter: {python}
loader: {{workers: {workers}, task_size: 16, heartbeat_ms: 200, liveness: 3, on_error: {on_error}}}
prefetch: {{batch_size: 32, depth: 2}}
cache: {{enabled: {cache}, path: cache}}
trainer:
  epochs: 2
  command: [{command}]
"""

# Checks every field of every sample against its index, and writes each
# sample's noise, for the test to compare with the seeded draw.
CONSUMER = """
import json, sys, torch, zeus_pipe
seen = []
with zeus_pipe.attach(raw=True) as zp:  # the image's uint8 values as __getitem__ made them
    assert zp.fields[0][:3] == ("image", "uint8", (3, 8, 8)), zp.fields
    for epoch in range(2):
        for name, src in (("train", zp.train), ("test", zp.test)):
            for b in src:
                assert isinstance(b, dict) and list(b) == ["image", "target", "label", "noise"], b
                idx = zp.indices
                n = len(idx)
                assert b["image"].shape == (n, 3, 8, 8) and b["image"].dtype == torch.uint8
                assert torch.equal(b["image"][:, 1, 2, 3].to(torch.int64), idx % 256)
                assert b["target"].dtype == torch.float32 and b["target"].shape == (n, 2)
                assert torch.equal(b["target"][:, 1], idx.to(torch.float32))
                assert b["label"].dtype == torch.int64 and torch.equal(b["label"], idx % 7)
                assert b["noise"].dtype == torch.float64
                for i, v in zip(idx.tolist(), b["noise"].tolist()):
                    seen.append((name, epoch, i, v))
json.dump(seen, open(sys.argv[1], "w"))
"""


def env():
    """The package on the program's PYTHONPATH, and what a sanitizer build needs."""
    return dict(os.environ, PYTHONPATH=PACKAGE, **zp.sanitizer_env())


def config(w, name, cls="Fields", args="{n: 300}", splits="{train: {}, test: {n: 70}}",
           workers=2, on_error="error", cache="false", command=None):
    return w.write(name + ".yaml", CONFIG.format(
        name=name, cls=cls, data=DATA, args=args, splits=splits, python=PYTHON, workers=workers,
        on_error=on_error, cache=cache,
        command=command or "%s, consumer.py, %s" % (PYTHON, os.path.join(w.path, name + ".json"))))


def up(w, cfg, timeout=240):
    p = w.start("up", cfg, env=env())
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def check_coverage(run, n):
    for split, count in n.items():
        ends = zp.epoch_ends(run, split)
        zp.check(len(ends) == 2, "%s: %d epoch records, want 2" % (split, len(ends)))
        for r in ends:
            zp.check(r["samples"] == count and r["distinct"] == count,
                     "%s: %d samples (%d distinct), want %d" % (split, r["samples"],
                                                                r["distinct"], count))
            zp.check(r["index_checksum"] == zp.index_checksum(range(count)),
                     "%s: index checksum differs" % split)


def expected_noise(seed, split, epoch, index):
    from zeus_pipe._dataset import sample_seed
    random.seed(sample_seed(seed, split, epoch, index))
    return random.random()


def a_dict_dataset_reaches_the_program_field_by_field_once_each_with_seeded_draws():
    with zp.Workdir() as w:
        w.write("consumer.py", CONSUMER)
        rc, out, err = up(w, config(w, "fields"))
        zp.check(rc == 0, "up exited %d:\n%s" % (rc, err[-3000:]))
        run = w.run_dir("fields")
        check_coverage(run, {"train": 300, "test": 70})
        seen = json.load(open(os.path.join(w.path, "fields.json")))
        zp.check(len(seen) == 2 * (300 + 70), "%d samples seen" % len(seen))
        for split, epoch, i, v in seen:
            zp.check(v == expected_noise(11, split, epoch, i),
                     "%s epoch %d sample %d: noise %r is not the seeded draw" % (split, epoch, i, v))
        meta = zp.text(os.path.join(run, "dataset", "meta"))
        zp.check("fields 4 dict\nfield image uint8 3 3 8 8\nfield target float32 1 2\n"
                 "field label int64 0\nfield noise float64 0\n" in meta, meta)


REGRESSION = """
import sys, torch, zeus_pipe
with zeus_pipe.attach() as zp:
    for epoch in range(2):
        for x, y in zp.train:
            assert x.shape[1:] == (1, 4, 4) and y.dtype == torch.float32, (x.shape, y.dtype)
            assert torch.equal(y, 2 * x) and torch.equal(x[:, 0, 1, 2], zp.indices.float())
        for x, y in zp.test:
            assert torch.equal(y, 2 * x)
print("regression ok", file=sys.stderr)
"""


def a_regression_tuple_goes_through_the_cache_and_comes_back_warm():
    with zp.Workdir() as w:
        w.write("reg.py", REGRESSION)
        cfg = config(w, "reg", cls="Regression", args="{n: 200}", splits="{}", cache="true",
                     command="%s, reg.py" % PYTHON)
        for attempt in ("cold", "warm"):
            rc, out, err = up(w, cfg)
            zp.check(rc == 0, "%s run exited %d:\n%s" % (attempt, rc, err[-3000:]))
            zp.check("regression ok" in err, "%s: the program did not finish" % attempt)
        # the second run of the name is runs/reg-2: every sample of it from the cache
        cache = [m for m in zp.metrics(w.run_dir("reg-2")) if m.get("event") == "cache"]
        zp.check(len(cache) == 4 and all(c["hits"] == 200 and c["misses"] == 0 for c in cache),
                 "the warm run's cache records: %r" % cache)


def bad_datasets_stop_before_any_stage_with_a_sentence():
    with zp.Workdir() as w:
        cases = [
            ("noimport", dict(cls="Missing"), "Missing"),
            ("ctor", dict(cls="Raises"), "FileNotFoundError: no such root: /nowhere/pets"),
            ("empty", dict(cls="Empty"), "has no samples"),
            ("strfield", dict(args="{n: 50, bad_type: true}"), "field 'name': a str is not a field"),
        ]
        for name, kw, want in cases:
            rc, out, err = up(w, config(w, name, **kw), timeout=120)
            zp.check(rc == 2, "%s: exit %d, want 2:\n%s" % (name, rc, err[-2000:]))
            zp.check(want in err and "dataset.python.class" in err and name + ".yaml" in err,
                     "%s: no sentence with %r:\n%s" % (name, want, err[-2000:]))
            zp.check(not os.path.exists(os.path.join(w.run_dir(name), "logs", "cache-0.log")),
                     "%s: a stage started" % name)


def a_raising_getitem_is_skipped_or_stops_the_run_naming_it():
    with zp.Workdir() as w:
        w.write("consumer.py", "import zeus_pipe\nwith zeus_pipe.attach() as zp:\n"
                "    for e in range(2):\n        [b for b in zp.train]; [b for b in zp.test]\n")
        rc, out, err = up(w, config(w, "skip", args="{n: 100, fail_at: 13}", on_error="skip",
                                    command="%s, consumer.py" % PYTHON))
        zp.check(rc == 0, "skip: exit %d:\n%s" % (rc, err[-3000:]))
        skipped = [m for m in zp.metrics(w.run_dir("skip")) if m.get("event") == "sample_skipped"]
        zp.check(skipped and all(s["index"] == 13 and "KeyError" in s["error"] for s in skipped),
                 "skipped: %r" % skipped[:3])
        rc, out, err = up(w, config(w, "stop", args="{n: 100, fail_at: 13}",
                                    command="%s, consumer.py" % PYTHON))
        zp.check(rc != 0, "stop: the run went on")
        logs = "".join(zp.text(os.path.join(w.run_dir("stop"), "logs", f))
                       for f in os.listdir(os.path.join(w.run_dir("stop"), "logs")))
        zp.check("train sample 13: KeyError" in logs + err, "stop: no sentence:\n" + err[-2000:])
        rc, out, err = up(w, config(w, "odd", args="{n: 100, odd_at: 5}",
                                    command="%s, consumer.py" % PYTHON))
        logs = "".join(zp.text(os.path.join(w.run_dir("odd"), "logs", f))
                       for f in os.listdir(os.path.join(w.run_dir("odd"), "logs")))
        zp.check(rc != 0 and "train sample 5: field 'target' is float32 [3], item 0's is float32 "
                 "[2]" in logs, "odd: exit %d, logs:\n%s" % (rc, logs[-2000:]))


def killed_and_hung_python_loaders_lose_no_sample():
    with zp.Workdir() as w:
        w.write("consumer.py", CONSUMER)
        marker = os.path.join(w.path, "hung")
        cfg = config(w, "kill", workers=3, args="{n: 600, hang_at: 250, marker: '%s'}" % marker)
        p = w.start("up", cfg, env=env())
        run = w.run_dir("kill")
        killed, end = 0, time.time() + 60
        while p.poll() is None and time.time() < end and killed < 4:
            time.sleep(0.4)
            out = subprocess.run(["pgrep", "-f", "zeus_pipe._loader_process --run %s" % run],
                                 capture_output=True, text=True).stdout.split()
            if out:
                os.kill(int(random.choice(out)), signal.SIGKILL)
                killed += 1
        out, err = p.communicate(timeout=240)
        zp.check(rc_ok(p.returncode), "up exited %d after %d kills:\n%s" % (p.returncode, killed,
                                                                          err[-3000:]))
        zp.check(killed >= 1, "no loader was killed")
        zp.check(os.path.exists(marker), "no loader hung")
        check_coverage(run, {"train": 600, "test": 70})


def rc_ok(rc):
    return rc == 0


FIRST = """
import json, sys, torch, zeus_pipe
n = 0
with zeus_pipe.attach(config="first.yaml", timeout_s=240) as zp:
    for epoch in range(2):
        for split in (zp.train, zp.test):
            for b in split:
                assert torch.equal(b["label"], zp.indices % 7)
                # the uint8 "image" field comes as __getitem__ made it: nothing normalised unasked
                assert b["image"].dtype == torch.uint8
                assert torch.equal(b["image"][:, 2, 1, 0].to(torch.int64), zp.indices % 256)
                n += len(b["label"])
    open("first.run", "w").write(zp.run)
print("first ok", n, file=sys.stderr)
"""


def a_python_first_script_starts_the_pipeline_of_its_dataset():
    with zp.Workdir() as w:
        config(w, "first", command="NONE")
        cfg = zp.text(os.path.join(w.path, "first.yaml")).replace("  command: [NONE]\n", "")
        w.write("first.yaml", cfg)
        w.write("first.py", FIRST)
        e = dict(env(), ZP_BIN=zp.BIN, ZP_LIBRARY=os.path.join(os.path.dirname(zp.BIN),
                                                               "libzeuspipe.so"))
        p = subprocess.run([PYTHON, "first.py"], cwd=w.path, env=e, capture_output=True,
                           text=True, timeout=240)
        zp.check(p.returncode == 0 and "first ok %d" % (2 * 370) in p.stderr,
                 "exit %d:\n%s" % (p.returncode, p.stderr[-3000:]))
        check_coverage(zp.text(os.path.join(w.path, "first.run")).strip(),
                       {"train": 300, "test": 70})


def python_loaders(run):
    out = subprocess.run(["pgrep", "-f", "zeus_pipe._loader_process --run %s" % run], capture_output=True,
                         text=True).stdout.split()
    return [int(p) for p in out]


def python_loaders_scale_and_a_remote_one_of_another_dataset_is_refused():
    with zp.Workdir() as w:
        w.write("consumer.py", CONSUMER)
        port = 18500 + os.getpid() % 300
        os.makedirs(os.path.join(w.path, "keys"))
        rc, out, err = w.run("keygen", "keys/far")
        zp.check(rc == 0, err)
        # 20 ms a sample: 15 s of loading for one loader, so that the run outlives the
        # scaling below even on a loaded machine (the retired loaders must exit before it ends)
        cfg = config(w, "scale", workers=1, args="{n: 300, cost_ms: 20}")
        tcp = 'transport: {kind: tcp, bind: "127.0.0.1:%d", allowed_keys: keys}\n' % port
        w.write("scale.yaml", zp.text(cfg) + tcp)
        other = config(w, "other", workers=1, args="{n: 301}")
        w.write("other.yaml", zp.text(other) + tcp)
        p = w.start("up", cfg, env=env())
        run = w.run_dir("scale")
        zp.wait_for(lambda: len(python_loaders(run)) == 1, 60, "the first Python loader")
        rc, out, err = w.run("scale", "scale", "loader=3")
        zp.check(rc == 0, err)
        zp.wait_for(lambda: len(python_loaders(run)) == 3, 30, "3 Python loaders")
        rc, out, err = w.run("scale", "scale", "loader=-2")
        zp.check(rc == 0, err)
        zp.wait_for(lambda: len(python_loaders(run)) == 1, 60, "two Python loaders to retire")
        zp.check(p.poll() is None, "the run ended before its loaders retired")
        far = w.start("loader", "--connect", "127.0.0.1:%d" % port, "--server-key",
                      os.path.join(run, "server.pub"), "--key", "keys/far.key", other, env=env())
        out, err = far.communicate(timeout=120)
        zp.check(far.returncode == 2 and "refused by the cache stage" in err and
                 "stopping: loaded 0 samples" in err,
                 "the remote loader of another dataset exited %d:\n%s" % (far.returncode,
                                                                          err[-2000:]))
        out, err = p.communicate(timeout=240)
        zp.check(p.returncode == 0, "up exited %d:\n%s" % (p.returncode, err[-3000:]))
        zp.check(err.count("retired") >= 2, "no loader retired:\n" + err[-2000:])
        check_coverage(run, {"train": 300, "test": 70})


def main():
    try:
        subprocess.run([PYTHON, "-c", "import torch, numpy"], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        print("skipped: %s has no torch or numpy" % PYTHON)
        sys.exit(77)
    zp.main([a_dict_dataset_reaches_the_program_field_by_field_once_each_with_seeded_draws,
             a_regression_tuple_goes_through_the_cache_and_comes_back_warm,
             bad_datasets_stop_before_any_stage_with_a_sentence,
             a_raising_getitem_is_skipped_or_stops_the_run_naming_it,
             killed_and_hung_python_loaders_lose_no_sample,
             a_python_first_script_starts_the_pipeline_of_its_dataset,
             python_loaders_scale_and_a_remote_one_of_another_dataset_is_refused])


if __name__ == "__main__":
    main()

"""python/examples/custom_dataset.py with its configs, as docs/pytorch.md gives
them (configs/custom-dataset.yaml, configs/h5-regression.yaml), on smaller
data: SlowImages (a generated JPEG folder, cached) and H5Regression (a
generated HDF5 file, h5py) train through `zeus-pipe up`, and H5Regression
also Python-first (the script starts the pipeline: --config); every epoch of
both splits exactly once, and the test loss falls. Exits 77 (skipped) where
/usr/bin/python3 has no torch, PIL or h5py."""
import os
import subprocess
import sys

import zp

PYTHON = sys.executable
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PACKAGE = os.path.join(ROOT, "python")
EXAMPLE = os.path.join(PACKAGE, "examples", "custom_dataset.py")


def env():
    return dict(os.environ, PYTHONPATH=PACKAGE, ZP_BIN=zp.BIN,
                ZP_LIBRARY=os.path.join(os.path.dirname(zp.BIN), "libzeuspipe.so"),
                **zp.sanitizer_env())


def overrides(w, name, args):
    return ["run.dir=%s" % os.path.join(w.path, "runs"), "run.name=%s" % name,
            "dataset.python.interpreter=%s" % PYTHON, "dataset.python.args=%s" % args,
            "trainer.command=[%s, ../python/examples/custom_dataset.py]" % PYTHON,
            "cache.path=%s" % os.path.join(w.path, "cache")]


def check_run(run, epochs):
    ends = {s: zp.epoch_ends(run, s) for s in ("train", "test")}
    for split, recs in ends.items():
        zp.check(len(recs) == epochs, "%s: %d epoch records, want %d" % (split, len(recs), epochs))
        for r in recs:
            zp.check(r["samples"] == r["distinct"] == r["expected_samples"] > 0 and
                     r["index_checksum"] == zp.index_checksum(range(r["samples"])),
                     "%s: not every sample once: %r" % (split, r))
    losses = [m["loss"] for m in zp.metrics(run) if m.get("event") == "test_epoch"]
    zp.check(len(losses) == epochs and losses[-1] < losses[0],
             "the test loss did not fall: %r" % losses)


def the_slow_image_dataset_trains_through_up_from_its_cache():
    with zp.Workdir() as w:
        args = "{root: %s, size: 32, per_class: 40}" % os.path.join(w.path, "images")
        p = subprocess.run([zp.BIN, "up", os.path.join(ROOT, "configs", "custom-dataset.yaml")] +
                           overrides(w, "images", args), cwd=w.path, env=env(),
                           capture_output=True, text=True, timeout=240)
        zp.check(p.returncode == 0, "exit %d:\n%s" % (p.returncode, p.stderr[-3000:]))
        run = w.run_dir("images")
        check_run(run, 4)
        cache = [m for m in zp.metrics(run) if m.get("event") == "cache" and m["epoch"] > 0]
        zp.check(cache and all(c["misses"] == 0 for c in cache),
                 "epochs after the first decoded again: %r" % cache)
        # Python-first: the script starts the same pipeline itself, from the warm cache
        first = [o for o in overrides(w, "images-first", args) if not o.startswith("trainer.command")]
        p = subprocess.run([PYTHON, EXAMPLE, "--config", os.path.join(ROOT, "configs",
                                                                      "custom-dataset.yaml")] + first,
                           cwd=w.path, env=env(), capture_output=True, text=True, timeout=240)
        zp.check(p.returncode == 0, "Python-first: exit %d:\n%s" % (p.returncode, p.stderr[-3000:]))
        check_run(w.run_dir("images-first"), 4)


def the_hdf5_regression_trains_through_up_and_python_first():
    with zp.Workdir() as w:
        cfg = os.path.join(ROOT, "configs", "h5-regression.yaml")
        args = "{path: %s, n: 400, size: 16}" % os.path.join(w.path, "pairs.h5")
        p = subprocess.run([zp.BIN, "up", cfg] + overrides(w, "h5", args), cwd=w.path,
                           env=env(), capture_output=True, text=True, timeout=240)
        zp.check(p.returncode == 0, "up: exit %d:\n%s" % (p.returncode, p.stderr[-3000:]))
        check_run(w.run_dir("h5"), 3)
        first = [o for o in overrides(w, "h5-first", args) if not o.startswith("trainer.command")]
        p = subprocess.run([PYTHON, EXAMPLE, "--config", cfg] + first, cwd=w.path, env=env(),
                           capture_output=True, text=True, timeout=240)
        zp.check(p.returncode == 0, "Python-first: exit %d:\n%s" % (p.returncode, p.stderr[-3000:]))
        check_run(w.run_dir("h5-first"), 3)


if __name__ == "__main__":
    try:
        subprocess.run([PYTHON, "-c", "import torch, PIL, h5py"], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        print("skipped: %s has no torch, PIL or h5py" % PYTHON)
        sys.exit(77)
    zp.main([the_slow_image_dataset_trains_through_up_from_its_cache,
             the_hdf5_regression_trains_through_up_and_python_first])

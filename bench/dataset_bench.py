#!/usr/bin/python3
"""Your own map-style Dataset fed by DataLoader and by zeus-pipe, side by side.

The same Dataset class, the same loop, the same number of CPU workers:
torch.utils.data.DataLoader(num_workers=N, persistent_workers=True,
shuffle=True) against zeus-pipe's Python loaders (`dataset.source: python`,
loader.workers=N), cache off (every sample a __getitem__ call, in every
epoch) and warm (the cache filled by a first run; then every sample an LMDB
read). The loop takes each batch and sums its tensors (x.float().sum(): the
batch is really read), and samples/s is counted over the epochs after the
first (a DataLoader's worker start-up and zeus-pipe's pipeline start-up are
the first epoch's).

Datasets (python/examples/custom_dataset.py):
- slow: SlowImages, a generated JPEG folder decoded, resized and run through a
  per-pixel Python transform in __getitem__ (3 classes, uint8 3x64x64).
- hdf5: H5Regression, (x, y) float32 image pairs read from an HDF5 file with
  h5py, one sample per __getitem__.

Per-sample cost: a Dataset whose __getitem__ returns a preallocated array
(uint8 3x32x32 and an int), one worker each. DataLoader's figure is its
wall time per sample (its worker's fetch, collate and transfer, and the
loop); zeus-pipe's is its loader's own time per sample, from the loader's
`read` region (seeding the generators, the __getitem__ call, packing the
fields into the record), and beside it its wall time per sample.

Run: /usr/bin/python3 bench/dataset_bench.py [BUILD_DIR] [--quick] [--workers N]
     [--epochs E] [--only slow,hdf5,cost]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = os.path.join(ROOT, "python", "examples")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, EXAMPLES)
sys.path.insert(0, HERE)

PREALLOC = '''
import numpy as np
class Prealloc:
    """__getitem__ returns the same preallocated array: what is measured is the feed."""
    def __init__(self, n=20000, split="train"):
        self.n, self.x = n, np.zeros((3, 32, 32), np.uint8)
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        return self.x, 1
'''


def workloads(tmp, quick):
    """name -> (module:class, kwargs for both splits, per-split kwargs)."""
    images = os.path.join(tmp, "images")
    return {
        "slow": ("custom_dataset:SlowImages",
                 {"root": images, "size": 32 if quick else 64, "per_class": 40 if quick else 400},
                 {"train": {"split": "train"}, "test": {"split": "val"}}),
        "hdf5": ("custom_dataset:H5Regression",
                 {"path": os.path.join(tmp, "pairs.h5"), "n": 600 if quick else 20000, "size": 32},
                 {"train": {"split": "train"}, "test": {"split": "test"}}),
        "cost": ("zp_prealloc:Prealloc", {"n": 2000 if quick else 20000},
                 {"train": {"split": "train"}, "test": {"n": 64, "split": "test"}}),
    }


def loop(batches):
    """The loop both feeds run: every batch's tensors read once. The
    DataLoader side times only its train epochs; so does zeus-pipe's (its
    test epochs run between them, untimed, as in a real loop)."""
    n = 0
    for b in batches:
        parts = b.values() if isinstance(b, dict) else b
        for t in parts:
            t.float().sum()
        n += len(next(iter(parts)))
    return n


def dataloader_rate(cls, kwargs, workers, epochs, batch):
    import importlib
    import torch
    from torch.utils.data import DataLoader
    module, name = cls.split(":")
    ds = getattr(importlib.import_module(module), name)(**kwargs)
    torch.manual_seed(0)
    dl = DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers,
                    persistent_workers=workers > 0, drop_last=False)
    loop(dl)  # the first epoch: the workers start
    t0, n = time.perf_counter(), 0
    for _ in range(epochs - 1):
        n += loop(dl)
    return n / (time.perf_counter() - t0)


def use_build(build):
    """This process and the ones it starts use the build in BUILD (its
    zeus-pipe and libzeuspipe.so) and this tree's Python package."""
    os.environ.setdefault("ZP_BIN", os.path.join(build, "zeus-pipe"))
    os.environ.setdefault("ZP_LIBRARY", os.path.join(build, "libzeuspipe.so"))
    os.environ["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "python")] +
                                               os.environ.get("PYTHONPATH", "").split(os.pathsep))


def attach_rate(cfg, over, epochs):
    """Python-first: attach(config=cfg, overrides=over) starts the pipeline;
    the loop reads `epochs` epochs (train, then test), and samples/s counts the
    train epochs after the first. Returns (samples/s, run dir)."""
    import zeus_pipe
    with zeus_pipe.attach(config=cfg, overrides=over, timeout_s=600) as zp:
        n, spent = 0, 0.0
        for epoch in range(epochs):  # the usual loop: train, then test, every epoch
            t0 = time.perf_counter()
            got = loop(zp.train)
            if epoch:
                n, spent = n + got, spent + time.perf_counter() - t0
            loop(zp.test)
        run = zp.run
    return n / spent, run


def zeus_rate(tmp, name, cls, kwargs, splits, workers, epochs, batch, cache):
    """dataset.source: python over the Dataset, through attach_rate."""
    cfg = os.path.join(tmp, "bench.yaml")
    with open(cfg, "w") as f:
        f.write("dataset:\n  source: python\n  python:\n    class: %s\n    path: [%s, %s]\n"
                "    args: %s\n    splits: %s\n    interpreter: %s\n"
                % (cls, EXAMPLES, tmp, json.dumps(kwargs), json.dumps(splits), sys.executable))
    over = {"run.dir": os.path.join(tmp, "runs"), "run.name": name, "loader.workers": workers,
            "prefetch.batch_size": batch, "trainer.epochs": epochs, "cache.enabled": cache,
            "cache.path": os.path.join(tmp, "cache")}
    return attach_rate(cfg, over, epochs)


def loader_cost_us(build, run):
    """The loader's read region per sample (µs): its own cost."""
    out = subprocess.run([os.path.join(build, "zeus-pipe"), "report", run, "--json"],
                         capture_output=True, text=True, check=True).stdout
    rep = json.loads(out)
    read = sum(r["total_s"] for r in rep["regions"] if r["stage"] == "loader" and r["region"] == "read")
    items = sum(s.get("items", 0) for s in rep["stages"] if s.get("stage") == "loader")
    return 1e6 * read / items if items else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--quick", action="store_true", help="small data, 2 epochs: seconds (CI)")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2)))
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--only", default="slow,hdf5,cost")
    args = ap.parse_args()
    try:
        import torch  # noqa: F401
        import h5py  # noqa: F401
        import PIL  # noqa: F401
    except ImportError as e:
        print("skipped: %s has no %s" % (sys.executable, e.name))
        sys.exit(77)
    build = os.path.abspath(args.build)
    use_build(build)
    epochs = args.epochs or (2 if args.quick else 4)
    tmp = tempfile.mkdtemp(prefix="zp-dsbench-")
    sys.path.insert(0, tmp)
    with open(os.path.join(tmp, "zp_prealloc.py"), "w") as f:
        f.write(PREALLOC)
    only = args.only.split(",")
    print("machine: %d cores; workers %d; %d epochs, the first not counted; batch 64"
          % (os.cpu_count() or 0, args.workers, epochs), flush=True)
    rows = []
    try:
        for name, (cls, kw, splits) in workloads(tmp, args.quick).items():
            if name not in only or name == "cost":
                continue
            train_kw = dict(kw, **splits["train"])
            dl = dataloader_rate(cls, train_kw, args.workers, epochs, 64)
            off, _ = zeus_rate(tmp, name + "-off", cls, kw, splits, args.workers, epochs,
                               64, False)
            zeus_rate(tmp, name + "-fill", cls, kw, splits, args.workers, 1 + 1, 64, True)
            warm, _ = zeus_rate(tmp, name + "-warm", cls, kw, splits, args.workers, epochs,
                                64, True)
            rows.append((name, dl, off, warm))
        print("\n%-6s %14s %16s %9s %16s %9s" % ("data", "DataLoader/s", "zeus-pipe off/s", "ratio",
                                               "zeus-pipe warm/s", "ratio"))
        for name, dl, off, warm in rows:
            print("%-6s %14.0f %16.0f %8.2fx %16.0f %8.2fx" % (name, dl, off, off / dl, warm,
                                                            warm / dl))
        if "cost" in only:
            cls, kw, splits = workloads(tmp, args.quick)["cost"]
            dl = dataloader_rate(cls, dict(kw, **splits["train"]), 1, epochs, 64)
            rate, run = zeus_rate(tmp, "cost", cls, kw, splits, 1, epochs, 64, False)
            print("\nper-sample cost, 1 worker, a __getitem__ returning a preallocated array:")
            print("  DataLoader:  %.1f us a sample (wall)" % (1e6 / dl))
            print("  zeus-pipe:   %.1f us a sample in the Python loader (its read region), "
                  "%.1f us a sample (wall)" % (loader_cost_us(build, run), 1e6 / rate))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

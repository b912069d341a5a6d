#!/usr/bin/python3
"""HDF5 arrays fed three ways, side by side, from the same files.

The files: (x, y) float32 regression pairs of 1 x 32 x 32 each, a train file
and a test file, written by h5py in two layouts: contiguous, and chunked (16
samples a chunk) with gzip (level 1). The same loop reads each way the same
number of train epochs and sums every batch's tensors:

- DataLoader: torch.utils.data.DataLoader(num_workers=N, shuffle=True) over
  an h5py Dataset (H5Pairs below: one sample a __getitem__, the file opened
  in each worker), what a user writes today;
- zeus-pipe python: the same Dataset in zeus-pipe's Python loaders
  (dataset.source: python, loader.workers=N), cache off;
- zeus-pipe hdf5: the native source (dataset.source: hdf5, loader.workers=N:
  C loaders on libhdf5, a task's rows read in one selection), cache off, and
  warm (the LMDB cache filled by a first run).

samples/s counts the train epochs after the first (worker and pipeline
start-up are the first's); the ratios are against DataLoader with as many
worker processes. Target (issue 41): native >= 3x DataLoader, cache off.

Run: /usr/bin/python3 bench/arrays_bench.py [BUILD_DIR] [--quick] [--workers N] [--epochs E]
     [--samples N]
"""
import argparse
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

PAIRS = '''
class H5Pairs:
    """(x, y) of an HDF5 file, one sample a __getitem__ (h5py, opened on first use)."""
    def __init__(self, path, split="train"):
        import h5py
        self.path, self.file = path % split, None
        with h5py.File(self.path, "r") as f:
            self.n = len(f["x"])
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        if self.file is None:
            import h5py
            self.file = h5py.File(self.path, "r")
        return self.file["x"][i], self.file["y"][i]
'''

LAYOUTS = {"contiguous": {}, "gzip": {"chunks": (16, 1, 32, 32), "compression": "gzip",
                                      "compression_opts": 1}}


def write_files(tmp, layout, n):
    """TMP/LAYOUT-train.h5 and -test.h5 (a tenth as many); the path pattern."""
    import h5py
    import numpy as np
    rng = np.random.default_rng(1)
    for split, rows in (("train", n), ("test", max(n // 10, 16))):
        x = rng.random((rows, 1, 32, 32), dtype=np.float32)
        with h5py.File(os.path.join(tmp, "%s-%s.h5" % (layout, split)), "w") as f:
            f.create_dataset("x", data=x, **LAYOUTS[layout])
            f.create_dataset("y", data=0.5 * x + 0.1, **LAYOUTS[layout])
    return os.path.join(tmp, layout + "-%s.h5")


def native_rate(tmp, name, pattern, workers, epochs, batch, cache):
    """dataset.source: hdf5 on the same files, through attach_rate."""
    from dataset_bench import attach_rate
    cfg = os.path.join(tmp, name + ".yaml")
    with open(cfg, "w") as f:
        f.write("dataset:\n  source: hdf5\n  files: {train: [%s], test: [%s]}\n"
                "  fields: {x: /x, y: /y}\n" % (pattern % "train", pattern % "test"))
    over = {"run.dir": os.path.join(tmp, "runs"), "run.name": name, "loader.workers": workers,
            "prefetch.batch_size": batch, "trainer.epochs": epochs, "cache.enabled": cache,
            "cache.path": os.path.join(tmp, "cache-" + name.split("-")[0])}
    return attach_rate(cfg, over, epochs)[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--quick", action="store_true", help="600 samples, 2 epochs: seconds (CI)")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2)))
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--samples", type=int, default=None)
    args = ap.parse_args()
    try:
        import h5py  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print("skipped: %s has no %s" % (sys.executable, e.name))
        sys.exit(77)
    from dataset_bench import dataloader_rate, use_build, zeus_rate
    use_build(os.path.abspath(args.build))
    epochs = args.epochs or (2 if args.quick else 4)
    n = args.samples or (600 if args.quick else 40000)
    tmp = tempfile.mkdtemp(prefix="zp-arrbench-")
    sys.path.insert(0, tmp)
    with open(os.path.join(tmp, "zp_h5pairs.py"), "w") as f:
        f.write(PAIRS)
    print("machine: %d cores; %d worker processes each side; %d train samples of 2 x 4 KiB; "
          "%d epochs, the first not counted; batch 64" % (os.cpu_count() or 0, args.workers, n,
                                                         epochs), flush=True)
    rows = []
    try:
        for layout in LAYOUTS:
            pattern = write_files(tmp, layout, n)
            cls, kw = "zp_h5pairs:H5Pairs", {"path": pattern}
            splits = {"train": {"split": "train"}, "test": {"split": "test"}}
            dl = dataloader_rate(cls, dict(kw, split="train"), args.workers, epochs, 64)
            py, _ = zeus_rate(tmp, layout + "-py", cls, kw, splits, args.workers, epochs, 64, False)
            off = native_rate(tmp, layout + "-off", pattern, args.workers, epochs, 64, False)
            native_rate(tmp, layout + "-fill", pattern, args.workers, 2, 64, True)
            warm = native_rate(tmp, layout + "-warm", pattern, args.workers, epochs, 64, True)
            rows.append((layout, dl, py, off, warm))
        print("\n%-11s %13s %18s %18s %8s %19s %8s" % (
            "layout", "DataLoader/s", "zeus-pipe python/s", "zeus-pipe hdf5/s", "ratio",
            "hdf5 warm cache/s", "ratio"))
        for layout, dl, py, off, warm in rows:
            print("%-11s %13.0f %18.0f %18.0f %7.2fx %19.0f %7.2fx" % (
                layout, dl, py, off, off / dl, warm, warm / dl))
        print("(ratios: against DataLoader over the h5py Dataset with as many worker processes)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

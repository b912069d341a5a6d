#!/usr/bin/python3
"""zeus-pipe's data path against the peers a user would pick, all in one run.

1. Fashion-MNIST train split, normalised float32 samples, shuffled batches of
   128 (the default config's), two loader processes, nothing trained (zeus-pipe: trainer.backend=null;
   PyTorch: the loop only touches each batch):
   - PyTorch DataLoader(num_workers=2)
   - zeus-pipe with the cache off (every sample loaded by a loader)
   - zeus-pipe with a warm LMDB cache (every sample a hit)
2. The ceiling of an exact shuffle: LMDB's random-order get rate on the same
   environment (one thread, one read transaction, each value copied out),
   measured right after the warm run while the file is in page cache.
3. 150 KiB synthetic samples from a warm cache: bytes/s delivered into the
   ring against a single-thread memcpy of the same value size.

Each zeus-pipe and DataLoader figure is the median samples/s of the epochs
after the first (warm workers; the median because a 2-core VM is noisy). An
epoch of the warm run lasts about 60 ms, so it runs 3 times as many epochs,
and the ceiling is the median of 3 measurements, one before it, one between
and one after.
Run: bench/run.sh   (or /usr/bin/python3 bench/bench.py build)
     /usr/bin/python3 bench/bench.py build --quick   (what the test suite runs:
     every part, 2 epochs of 20 batches, 320 synthetic samples; its figures
     mean nothing)
"""
import argparse
import gzip
import json
import statistics
import os
import struct
import subprocess
import sys
import tempfile
import time

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530
BATCH, WORKERS, EPOCHS = 128, 2, 7


FMNIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "fashion-mnist.yaml")
SYNTH = """
run: {name: big}
dataset:
  source: synthetic
  synthetic: {train_samples: 3000, test_samples: 0, shape: [3, 160, 80], classes: 10}
cache: {enabled: true, path: big-cache}
loader: {workers: 2}
prefetch: {batch_size: 32}
trainer: {backend: null, epochs: 6}
"""


def skip_without_torch(quick, who):
    """When torch or torchvision cannot be imported: a --quick run (the test
    suite's) exits 77, which ctest counts as skipped; a full run goes on and
    fails where it needs them."""
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError as e:
        if quick:
            print("%s: skipped: %s for %s (Debian: python3-torch python3-torchvision)"
                  % (who, e, sys.executable), file=sys.stderr)
            sys.exit(77)


def zp_run(bin_dir, cwd, cfg, name, *over, warm=False):
    """Runs `up` (after `warm` when asked); returns the train epochs' samples/s."""
    bin_path = os.path.join(bin_dir, "zeus-pipe")
    if warm:
        subprocess.run([bin_path, "warm", cfg] + list(over), cwd=cwd, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run([bin_path, "up", cfg, "run.name=" + name] + list(over), cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(cwd, "runs", name, "metrics.jsonl")) as f:
        recs = [json.loads(l) for l in f]
    ends = [r for r in recs if r.get("event") == "epoch_end" and r["split"] == "train"]
    assert all(r["samples"] == r["distinct"] == r["expected_samples"] for r in ends)
    return [r["samples_per_s"] for r in ends]


def ceiling(bin_dir, env, db):
    out = subprocess.run([os.path.join(bin_dir, "zp-bench-lmdb"), env, db], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return data[4 + 4 * ndim:], dims


def fashion_mnist(split="train"):
    """Fashion-MNIST's `split` ("train" or "t10k") as a torch Dataset: the IDX
    files read once; __getitem__ normalises one sample, as torchvision's
    ToTensor + Normalize would. The DataLoader side of bench.py and of
    torch_bench.py."""
    import numpy as np
    import torch
    from torch.utils.data import Dataset

    class FashionMNIST(Dataset):
        def __init__(self):
            img, dims = read_idx(os.path.join(DATA, "%s-images-idx3-ubyte.gz" % split))
            lab, _ = read_idx(os.path.join(DATA, "%s-labels-idx1-ubyte.gz" % split))
            self.images = np.frombuffer(img, dtype=np.uint8).reshape(dims[0], 1, dims[1], dims[2])
            self.labels = np.frombuffer(lab, dtype=np.uint8).astype(np.int64)

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, i):
            x = torch.from_numpy(self.images[i].astype(np.float32) / 255.0)
            return (x - MEAN) / STD, int(self.labels[i])

    return FashionMNIST()


def torch_loader(epochs, limit):
    """DataLoader's samples/s of each epoch (its first `limit` batches when
    limit > 0)."""
    import torch
    from torch.utils.data import DataLoader

    torch.set_num_threads(1)
    loader = DataLoader(fashion_mnist(), batch_size=BATCH, shuffle=True, num_workers=WORKERS,
                        persistent_workers=True, generator=torch.Generator().manual_seed(1))
    rates = []
    for _ in range(epochs):
        t0, n = time.perf_counter(), 0
        for i, (x, y) in enumerate(loader):
            n += x.shape[0]
            if i + 1 == limit:
                break
        rates.append(n / (time.perf_counter() - t0))
    return rates


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="The module's docstring says what each part measures.")
    ap.add_argument("build", nargs="?", default="build",
                    help="the build folder holding zeus-pipe and zp-bench-lmdb (default: build)")
    ap.add_argument("--quick", action="store_true",
                    help="every part on a few batches, as the test suite runs it; figures mean nothing")
    opt = ap.parse_args()
    quick = opt.quick
    bin_dir = os.path.abspath(opt.build)
    skip_without_torch(quick, "bench")
    epochs, limit = (2, 20) if quick else (EPOCHS, 0)
    common = ["trainer.backend=null", "loader.workers=%d" % WORKERS, "prefetch.batch_size=%d" % BATCH,
              "prefetch.shuffle=true", "trainer.limit_test_batches=1",
              "trainer.limit_train_batches=%d" % limit]
    med = lambda r: statistics.median(r[1:])
    with tempfile.TemporaryDirectory(prefix="zp-bench-") as d:
        torch_rates = torch_loader(epochs, limit)
        cold = zp_run(bin_dir, d, FMNIST, "cold", "cache.enabled=false", "trainer.epochs=%d" % epochs,
                      *common)
        subprocess.run([os.path.join(bin_dir, "zeus-pipe"), "warm", FMNIST, "cache.path=fm-cache"],
                       cwd=d, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        db = (os.path.join(d, "fm-cache"), "fashion-mnist/train")
        tops = [ceiling(bin_dir, *db)]
        warm = zp_run(bin_dir, d, FMNIST, "warm", "cache.path=fm-cache",
                      "trainer.epochs=%d" % (epochs if quick else 3 * epochs), *common)
        tops.append(ceiling(bin_dir, *db))
        warm += zp_run(bin_dir, d, FMNIST, "warm2", "cache.path=fm-cache",
                       "trainer.epochs=%d" % (epochs if quick else 3 * epochs), *common)[1:]
        tops.append(ceiling(bin_dir, *db))
        top = {"get_per_s": statistics.median(t["get_per_s"] for t in tops)}
        with open(os.path.join(d, "big.yaml"), "w") as f:
            f.write(SYNTH.replace("3000", "320").replace("epochs: 6", "epochs: 2") if quick else SYNTH)
        big = zp_run(bin_dir, d, os.path.join(d, "big.yaml"), "big", warm=True)
        big_top = ceiling(bin_dir, os.path.join(d, "big-cache"), "synthetic/train")
    t, c, w = med(torch_rates), med(cold), med(warm)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print("machine: %s, %d cores; batch %d, shuffle, %d loader processes; median of epochs 2..%d%s"
          % (cpu, os.cpu_count(), BATCH, WORKERS, epochs,
             "; --quick: %d batches an epoch, figures not comparable" % limit if quick else ""))
    print()
    print("Fashion-MNIST train split (normalised float32, 3136 bytes a sample)")
    print("%-44s %12s   %s" % ("", "samples/s", "per epoch"))
    row = lambda name, v, r: print("%-44s %12.0f   %s" % (name, v, " ".join("%.0f" % x for x in r)))
    row("PyTorch DataLoader(num_workers=2)", t, torch_rates)
    row("zeus-pipe, cache off", c, cold)
    row("zeus-pipe, warm LMDB cache", w, warm)
    print("%-44s %12.0f   %s" % ("LMDB random get + copy, one thread (ceiling)", top["get_per_s"],
                                  " ".join("%.0f" % t["get_per_s"] for t in tops)))
    print("ratio zeus-pipe cache off / DataLoader:   %.1fx" % (c / t))
    print("ratio zeus-pipe warm cache / DataLoader:  %.1fx" % (w / t))
    print("ratio zeus-pipe warm cache / LMDB ceiling: %.0f%%   (goal >= 90%% at batch 128: %s)"
          % (100 * w / top["get_per_s"], "met" if w >= 0.9 * top["get_per_s"] else "MISSED"))
    print()
    vb = big_top["value_bytes"] - 40
    gbs = med(big) * vb
    print("synthetic %d-byte samples (150 KiB), warm cache, batch 32" % vb)
    print("%-44s %10.2f GB/s" % ("zeus-pipe into the ring", gbs / 1e9))
    print("%-44s %10.2f GB/s" % ("LMDB random get + copy, one thread", big_top["get_bytes_per_s"] / 1e9))
    print("%-44s %10.2f GB/s" % ("memcpy, one thread", big_top["memcpy_bytes_per_s"] / 1e9))
    print("ratio zeus-pipe / memcpy: %.0f%%" % (100 * gbs / big_top["memcpy_bytes_per_s"]))


if __name__ == "__main__":
    main()

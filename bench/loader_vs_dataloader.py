#!/usr/bin/python3
"""zeus-pipe against PyTorch's DataLoader on the Fashion-MNIST train split.

Both deliver normalised float32 samples in shuffled batches of 256 with two
loader processes; neither trains (zeus-pipe: trainer.backend=null; PyTorch: the
loop only touches each batch). Each runs EPOCHS epochs in this one run, and
the figure is the median samples/s of the epochs after the first (warm
workers, warm page cache; the median because a 2-core VM is noisy). Run: bench/run.sh   (or /usr/bin/python3 this-file BIN)
"""
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
BATCH, WORKERS, EPOCHS = 256, 2, 7


def zeus(bin_path):
    with tempfile.TemporaryDirectory(prefix="zp-bench-") as d:
        cfg = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs",
                           "fashion-mnist.yaml")
        subprocess.run([bin_path, "up", cfg, "run.name=bench", "trainer.backend=null",
                        "loader.workers=%d" % WORKERS, "prefetch.batch_size=%d" % BATCH,
                        "trainer.epochs=%d" % EPOCHS, "prefetch.shuffle=true",
                        "trainer.limit_test_batches=1"],
                       cwd=d, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(os.path.join(d, "runs", "bench", "metrics.jsonl")) as f:
            recs = [json.loads(l) for l in f]
        ends = [r for r in recs if r.get("event") == "epoch_end" and r["split"] == "train"]
        assert all(r["samples"] == 60000 and r["distinct"] == 60000 for r in ends)
        return [r["samples_per_s"] for r in ends]


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return data[4 + 4 * ndim:], dims


def torch_loader():
    import numpy as np
    import torch
    from torch.utils.data import DataLoader, Dataset

    class FashionMNIST(Dataset):
        """Reads the IDX files once; __getitem__ normalises one sample, as
        torchvision's ToTensor + Normalize would."""

        def __init__(self):
            img, dims = read_idx(os.path.join(DATA, "train-images-idx3-ubyte.gz"))
            lab, _ = read_idx(os.path.join(DATA, "train-labels-idx1-ubyte.gz"))
            self.images = np.frombuffer(img, dtype=np.uint8).reshape(dims[0], 1, dims[1], dims[2])
            self.labels = np.frombuffer(lab, dtype=np.uint8).astype(np.int64)

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, i):
            x = torch.from_numpy(self.images[i].astype(np.float32) / 255.0)
            return (x - MEAN) / STD, int(self.labels[i])

    torch.set_num_threads(1)
    loader = DataLoader(FashionMNIST(), batch_size=BATCH, shuffle=True, num_workers=WORKERS,
                        persistent_workers=True, generator=torch.Generator().manual_seed(1))
    rates = []
    for _ in range(EPOCHS):
        t0, n = time.perf_counter(), 0
        for x, y in loader:
            n += x.shape[0]
        rates.append(n / (time.perf_counter() - t0))
    return rates


def main():
    bin_path = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/zeus-pipe")
    z = zeus(bin_path)
    t = torch_loader()
    zs, ts = statistics.median(z[1:]), statistics.median(t[1:])
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print("Fashion-MNIST train split, batch %d, shuffle, %d loader processes, %d epochs; "
          "median of epochs 2..%d" % (BATCH, WORKERS, EPOCHS, EPOCHS))
    print("machine: %s, %d cores" % (cpu, os.cpu_count()))
    print("%-34s %14s   %s" % ("loader", "samples/s", "per epoch"))
    print("%-34s %14.0f   %s" % ("zeus-pipe (trainer.backend=null)", zs, " ".join("%.0f" % r for r in z)))
    print("%-34s %14.0f   %s" % ("torch DataLoader(num_workers=2)", ts, " ".join("%.0f" % r for r in t)))
    print("ratio zeus-pipe / DataLoader: %.1fx" % (zs / ts))


if __name__ == "__main__":
    main()

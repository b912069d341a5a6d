#!/usr/bin/python3
"""The cuda backend on one GPU, in one run:

(a) host-to-device bandwidth from the prefetch ring (a /dev/shm mapping
    page-locked with cudaHostRegister, as the trainer does) against
    cudaMemcpy from cudaHostAlloc memory of the same size: zp-bench-h2d
    (bench/h2d_bench.cu). Goal: ratio >= 0.90.
(b) the share of the trainer's time spent waiting for data with a warm cache:
    one run fills the LMDB cache, a second run with the same cache.path reads
    every sample from it; report.json's trainer_wait_share of that second
    run. Goal: < 1%.
(c) samples/s training the Fashion-MNIST MLP (784-256-128-10, SGD, batch 128):
    zeus-pipe's cuda backend (the warm run: median train epoch after the
    first) against PyTorch on the same GPU fed by DataLoader(pin_memory=True,
    num_workers=N, persistent workers) with non_blocking copies, the same
    normalisation per sample in __getitem__ (median epoch after the first).
    Goal: ratio zeus-pipe / PyTorch > 1. Needs a PyTorch with CUDA; Debian's
    python3-torch has none, and then (c) says so and is not measured.

Run: /usr/bin/python3 bench/gpu_bench.py [BUILD_DIR] [--workers N] [--epochs E]
     /usr/bin/python3 bench/gpu_bench.py [BUILD_DIR] --quick   (what the test
     suite runs: 2 epochs of 20 batches; without a GPU (a) is skipped, (b) runs
     the cpu backend and (c) PyTorch and its DataLoader on the CPU, so that
     every line of the script runs; its figures mean nothing)
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench import read_idx, skip_without_torch  # bench/bench.py

HERE = os.path.dirname(os.path.abspath(__file__))
FMNIST = os.path.join(HERE, "..", "configs", "fashion-mnist.yaml")
DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD, BATCH, N_TRAIN = 0.2860, 0.3530, 128, 60000


def die(msg):
    print("gpu_bench: " + msg, file=sys.stderr)
    sys.exit(1)


def has_gpu():
    """Whether nvidia-smi lists a GPU (the cuda backend needs one)."""
    smi = shutil.which("nvidia-smi")
    return bool(smi) and subprocess.run([smi, "-L"], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL).returncode == 0


def h2d(build):
    exe = os.path.join(build, "zp-bench-h2d")
    if not os.path.exists(exe):
        die("%s is missing: this build has no CUDA (see CMake's 'cuda backend' line)" % exe)
    out = subprocess.run([exe], stdout=subprocess.PIPE, text=True, check=True).stdout
    print("(a) host-to-device copies, ring vs cudaHostAlloc (goal: ratio >= 0.90)\n" + out)


def zp_up(build, cwd, name, workers, epochs, backend, limit):
    over = ["run.dir=" + os.path.join(cwd, "runs"), "run.name=" + name, "cache.enabled=true",
            "cache.path=" + os.path.join(cwd, "cache"), "trainer.backend=" + backend,
            "trainer.epochs=%d" % epochs, "loader.workers=%d" % workers,
            "prefetch.batch_size=%d" % BATCH, "trainer.limit_test_batches=1",
            "trainer.limit_train_batches=%d" % limit,
            "trainer.checkpoint.every_epochs=0", "trainer.schedule.name=none"]
    p = subprocess.run([os.path.join(build, "zeus-pipe"), "up", FMNIST] + over, cwd=cwd,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode:
        die("zeus-pipe up (%s) exited with %d:\n%s" % (name, p.returncode, p.stdout[-3000:]))
    run = os.path.join(cwd, "runs", name)
    recs = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl")) if l.strip()]
    ends = [r for r in recs if r.get("event") == "epoch_end" and r.get("split") == "train"]
    report = json.load(open(os.path.join(run, "report.json")))
    return [r["seconds"] for r in ends], report.get("trainer_wait_share")


def idx_tensor(name):
    """The IDX file `name` of the dataset as a uint8 tensor of its dims."""
    import numpy as np
    import torch
    data, dims = read_idx(os.path.join(DATA, name))
    return torch.from_numpy(np.frombuffer(data, dtype=np.uint8).reshape(dims).copy())


def torch_epochs(workers, epochs, limit, quick):
    """PyTorch's epoch seconds (the first `limit` batches when limit > 0) and
    the device's name; on the CPU only when `quick`."""
    import torch
    if not torch.cuda.is_available() and not quick:
        return None, "torch %s in %s has no CUDA" % (torch.__version__, sys.executable)
    images = idx_tensor("train-images-idx3-ubyte.gz").reshape(-1, 784)
    labels = idx_tensor("train-labels-idx1-ubyte.gz").long()

    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return len(labels)

        def __getitem__(self, i):
            return (images[i].float() / 255 - MEAN) / STD, labels[i]

    dl = torch.utils.data.DataLoader(DS(), batch_size=BATCH, shuffle=True, num_workers=workers,
                                     pin_memory=torch.cuda.is_available(), persistent_workers=workers > 0)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    secs = []
    for _ in range(epochs):
        t0 = None
        for i, (x, y) in enumerate(dl):
            if limit and i == limit:
                break
            if t0 is None:
                t0 = time.perf_counter()  # from the first batch in hand, as zeus-pipe's epoch
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        secs.append(time.perf_counter() - t0)
    return secs, torch.cuda.get_device_name(0) if dev.type == "cuda" else "the CPU"


def med(xs):
    return statistics.median(xs[1:] if len(xs) > 1 else xs)


def parse_args():
    # The docstring up to its Run: lines: its first paragraph alone ends in a colon.
    ap = argparse.ArgumentParser(description=__doc__.split("\nRun:")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", nargs="?", default=os.path.join(HERE, "..", "build"), metavar="BUILD_DIR",
                    help="zeus-pipe's build directory (default: the repository's build/)")
    ap.add_argument("--quick", action="store_true",
                    help="the test suite's run: 20 batches an epoch, no GPU needed")
    ap.add_argument("--workers", type=int, default=2, metavar="N",
                    help="zeus-pipe loaders and DataLoader workers (default: %(default)s)")
    ap.add_argument("--epochs", type=int, metavar="N",
                    help="epochs of the timed runs (default: 4, or 2 with --quick)")
    return ap.parse_args()


def main():
    args = parse_args()
    quick, workers = args.quick, args.workers
    epochs = args.epochs if args.epochs is not None else 2 if quick else 4
    limit = 20 if quick else 0
    build = os.path.abspath(args.build)
    skip_without_torch(quick, "gpu_bench")
    gpu = has_gpu()
    if gpu:
        h2d(build)
    elif quick:
        print("(a) skipped: no GPU (nvidia-smi -L lists none); --quick runs (b) and (c) on the CPU")
    else:
        die("no GPU (nvidia-smi -L lists none); --quick runs the CPU parts")
    backend = "cuda" if gpu else "cpu"
    with tempfile.TemporaryDirectory(prefix="zp-gpu-bench-") as cwd:
        zp_up(build, cwd, "fill", workers, 1, backend, limit)
        secs, wait = zp_up(build, cwd, "warm", workers, epochs, backend, limit)
    print("(b) trainer data wait with a warm cache: %.2f%% of its time (goal: < 1%%)" % (100 * wait))
    n = BATCH * limit if limit else N_TRAIN
    zp_rate = n / med(secs)
    t_secs, what = torch_epochs(workers, epochs, limit, quick)
    print("(c) samples/s, MLP on Fashion-MNIST, %d loaders / DataLoader workers%s" %
          (workers, ", --quick: %d batches an epoch" % limit if quick else ""))
    print("    zeus-pipe %s backend: %10.0f  (epochs %s s)" %
          (backend, zp_rate, ", ".join("%.3f" % s for s in secs)))
    if t_secs is None:
        print("    PyTorch: not measured: %s" % what)
        return
    t_rate = n / med(t_secs)
    print("    PyTorch on %s: %10.0f  (epochs %s s)" % (what, t_rate, ", ".join("%.3f" % s for s in t_secs)))
    print("    ratio zeus-pipe / PyTorch: %.2f (goal: > 1)" % (zp_rate / t_rate))


if __name__ == "__main__":
    main()

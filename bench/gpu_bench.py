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
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench import read_idx  # bench/bench.py: the gzip IDX reader

HERE = os.path.dirname(os.path.abspath(__file__))
FMNIST = os.path.join(HERE, "..", "configs", "fashion-mnist.yaml")
DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD, BATCH, N_TRAIN = 0.2860, 0.3530, 128, 60000


def die(msg):
    print("gpu_bench: " + msg, file=sys.stderr)
    sys.exit(1)


def h2d(build):
    exe = os.path.join(build, "zp-bench-h2d")
    if not os.path.exists(exe):
        die("%s is missing: this build has no CUDA (see CMake's 'cuda backend' line)" % exe)
    out = subprocess.run([exe], stdout=subprocess.PIPE, text=True, check=True).stdout
    print("(a) host-to-device copies, ring vs cudaHostAlloc (goal: ratio >= 0.90)\n" + out)


def zp_up(build, cwd, name, workers, epochs):
    over = ["run.dir=" + os.path.join(cwd, "runs"), "run.name=" + name, "cache.enabled=true",
            "cache.path=" + os.path.join(cwd, "cache"), "trainer.backend=cuda",
            "trainer.epochs=%d" % epochs, "loader.workers=%d" % workers,
            "prefetch.batch_size=%d" % BATCH, "trainer.limit_test_batches=1",
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


def torch_epochs(workers, epochs):
    import torch
    if not torch.cuda.is_available():
        return None, "torch %s in %s has no CUDA" % (torch.__version__, sys.executable)
    images = torch.from_numpy(read_idx(os.path.join(DATA, "train-images-idx3-ubyte.gz"))).reshape(-1, 784)
    labels = torch.from_numpy(read_idx(os.path.join(DATA, "train-labels-idx1-ubyte.gz"))).long()

    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return len(labels)

        def __getitem__(self, i):
            return (images[i].float() / 255 - MEAN) / STD, labels[i]

    dl = torch.utils.data.DataLoader(DS(), batch_size=BATCH, shuffle=True, num_workers=workers,
                                     pin_memory=True, persistent_workers=workers > 0)
    dev = torch.device("cuda")
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    secs = []
    for _ in range(epochs):
        t0 = None
        for x, y in dl:
            if t0 is None:
                t0 = time.perf_counter()  # from the first batch in hand, as zeus-pipe's epoch
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            opt.step()
        torch.cuda.synchronize()
        secs.append(time.perf_counter() - t0)
    return secs, torch.cuda.get_device_name(0)


def med(xs):
    return statistics.median(xs[1:] if len(xs) > 1 else xs)


def main():
    args = sys.argv[1:]
    build = next((a for a in args if not a.startswith("--")), os.path.join(HERE, "..", "build"))
    workers = int(args[args.index("--workers") + 1]) if "--workers" in args else 2
    epochs = int(args[args.index("--epochs") + 1]) if "--epochs" in args else 4
    build = os.path.abspath(build)
    h2d(build)
    with tempfile.TemporaryDirectory(prefix="zp-gpu-bench-") as cwd:
        zp_up(build, cwd, "fill", workers, 1)
        secs, wait = zp_up(build, cwd, "warm", workers, epochs)
    print("(b) trainer data wait with a warm cache: %.2f%% of its time (goal: < 1%%)" % (100 * wait))
    zp_rate = N_TRAIN / med(secs)
    t_secs, what = torch_epochs(workers, epochs)
    print("(c) samples/s, MLP on Fashion-MNIST, %d loaders / DataLoader workers" % workers)
    print("    zeus-pipe cuda backend: %10.0f  (epochs %s s)" % (zp_rate, ", ".join("%.3f" % s for s in secs)))
    if t_secs is None:
        print("    PyTorch: not measured: %s" % what)
        return
    t_rate = N_TRAIN / med(t_secs)
    print("    PyTorch on %s: %10.0f  (epochs %s s)" % (what, t_rate, ", ".join("%.3f" % s for s in t_secs)))
    print("    ratio zeus-pipe / PyTorch: %.2f (goal: > 1)" % (zp_rate / t_rate))


if __name__ == "__main__":
    main()

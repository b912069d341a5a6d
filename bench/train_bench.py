#!/usr/bin/python3
"""One training epoch of the same MLP on Fashion-MNIST: zeus-pipe's cpu backend
against PyTorch on CPU fed by its DataLoader, all in one run.

Both sides train the same model the same way on the 60000-sample train split:
784 -> 256 -> ReLU -> 128 -> ReLU -> 10, softmax cross-entropy, SGD lr 0.02,
momentum 0.9, weight_decay 1e-4, batches of 128, a fresh shuffle every epoch,
pixels scaled to 0..1 then (x - 0.2860) / 0.3530, float32.

- zeus-pipe: `zeus-pipe up configs/fashion-mnist.yaml` with the cache off (every
  sample decoded and normalised by a loader process, every epoch) and, as the
  default config has it, on (epochs 2.. read from LMDB: loaders idle), checkpoints
  off and the test split cut to one batch; the model and optimizer keys are
  passed explicitly too. An epoch's time is the "seconds" of the trainer's
  train epoch_end record in runs/<name>/metrics.jsonl: from the epoch's first
  batch in hand to the end of its last step.
  Tried: trainer.threads (OpenBLAS threads) 1, 2 x loader.workers 1, 2, each
  with OPENBLAS_CORETYPE as inherited (this machine's env sets Haswell) and with
  OPENBLAS_CORETYPE=SkylakeX in the zeus-pipe process's environment. The core
  OpenBLAS actually picked is read back from the trainer's log.
- PyTorch: a Dataset over the decoded uint8 images whose __getitem__ normalises
  one sample (as torchvision's ToTensor + Normalize would), DataLoader(
  batch_size=128, shuffle=True, num_workers=W, persistent_workers=W > 0), the
  same nn.Sequential, torch.optim.SGD; the loop is zero_grad, forward, loss,
  backward, step (loss and correct count summed as tensors, read once an
  epoch). An epoch's time runs, as zeus-pipe's does, from the first batch in
  hand to the end of the last step; the wait for that first batch is shown
  apart ("1st ms"), and "data wait" is the share of the epoch spent in the
  DataLoader's __next__.
  Tried: torch.set_num_threads(T) with OPENBLAS_NUM_THREADS=T ("blas=T":
  Debian's torch does its GEMMs in the system libblas.so.3, OpenBLAS here,
  whose thread pool set_num_threads does not size) for T in 1, 2 x num_workers
  0, 1, 2, plus set_num_threads(2) with blas=1 and num_workers 0 (OpenMP's and
  OpenBLAS's pools spinning side by side oversubscribe 2 cores), all with
  OPENBLAS_CORETYPE as inherited; then the best of these again with
  OPENBLAS_CORETYPE=SkylakeX, since the same variable steers the same library
  there. Each configuration runs in its own python process.
  Reference row "(ref)", not a candidate for the best: the best thread count's
  loop again with no DataLoader (batches sliced in a fresh random order from
  the whole split normalised up front): PyTorch's compute alone, to show how
  much of its epoch is the DataLoader.

Every figure is the median epoch time of the epochs after the first (3 epochs
a configuration: warm loaders/workers; the median because a 2-core VM shared
with other work is noisy). The ratio compares the best configuration of each
side: zeus-pipe epoch / PyTorch epoch (the goal is <= 0.5).
Run: /usr/bin/python3 bench/train_bench.py [BUILD_DIR] [--epochs N]
     /usr/bin/python3 bench/train_bench.py [BUILD_DIR] --quick   (what the test
     suite runs: one configuration of each side and the reference, 2 epochs of
     20 batches; its figures mean nothing)
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from bench import read_idx, skip_without_torch  # bench/bench.py

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530
BATCH, HIDDEN, LR, MOMENTUM, WD = 128, (256, 128), 0.02, 0.9, 1e-4
N_TRAIN = 60000
EPOCHS = 3
ZP_THREADS, ZP_WORKERS = (1, 2), (1, 2)
TORCH_THREADS, TORCH_WORKERS = (1, 2), (0, 1, 2)
# (set_num_threads, OpenBLAS threads, num_workers) tried on top of the grid above
TORCH_EXTRA = ((2, 1, 0),)
LIMIT = 0  # train batches an epoch (0: all); --quick sets it


def expected():
    """The train samples an epoch sees."""
    return min(N_TRAIN, LIMIT * BATCH) if LIMIT else N_TRAIN
FMNIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "fashion-mnist.yaml")


def die(msg):
    print("train_bench: " + msg, file=sys.stderr)
    sys.exit(1)


def med(xs):
    """Median of the epochs after the first."""
    return statistics.median(xs[1:] if len(xs) > 1 else xs)


# ---------------------------------------------------------------- zeus-pipe

def zp_run(bin_path, cwd, name, threads, workers, coretype, epochs, cache=False):
    """Runs `up` once; returns (train epoch seconds, trainer's whole-run data
    wait share, OpenBLAS core the trainer reported)."""
    env = dict(os.environ)
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    over = ["cache.enabled=%s" % ("true" if cache else "false"),
            "cache.path=" + os.path.join(cwd, "cache-" + name), "run.dir=" + os.path.join(cwd, "runs"), "run.name=" + name,
            "trainer.backend=cpu", "trainer.epochs=%d" % epochs, "trainer.threads=%d" % threads,
            "loader.workers=%d" % workers, "prefetch.batch_size=%d" % BATCH, "prefetch.shuffle=true",
            "prefetch.drop_last=false", "trainer.model.hidden=[%s]" % ",".join(map(str, HIDDEN)),
            "trainer.optimizer.name=sgd", "trainer.optimizer.lr=%g" % LR,
            "trainer.optimizer.momentum=%g" % MOMENTUM, "trainer.optimizer.weight_decay=%g" % WD,
            "trainer.schedule.name=none", "trainer.limit_train_batches=%d" % LIMIT,
            "trainer.limit_test_batches=1", "trainer.checkpoint.every_epochs=0",
            "trainer.checkpoint.every_steps=0"]
    p = subprocess.run([bin_path, "up", FMNIST] + over, cwd=cwd, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        die("zeus-pipe up (%s) exited with %d; its output ends:\n%s"
            % (name, p.returncode, p.stdout[-3000:]))
    run = os.path.join(cwd, "runs", name)
    with open(os.path.join(run, "metrics.jsonl")) as f:
        recs = [json.loads(l) for l in f if l.strip()]
    ends = [r for r in recs if r.get("event") == "epoch_end" and r.get("split") == "train"]
    if len(ends) != epochs:
        die("zeus-pipe run %s: %d train epoch_end records, expected %d" % (name, len(ends), epochs))
    for r in ends:
        if not r["samples"] == r["distinct"] == r["expected_samples"] == expected():
            die("zeus-pipe run %s: epoch %s saw %s samples (%s distinct), expected %d"
                % (name, r["epoch"], r["samples"], r["distinct"], expected()))
    wait = None
    try:
        with open(os.path.join(run, "report.json")) as f:
            wait = json.load(f).get("trainer_wait_share")
    except (OSError, ValueError):
        pass
    core = "?"
    try:
        with open(os.path.join(run, "logs", "trainer-0.log")) as f:
            m = re.search(r"OpenBLAS core ([^,\s]+)", f.read())
            core = m.group(1) if m else "?"
    except OSError:
        pass
    return [r["seconds"] for r in ends], wait, core, ends[-1].get("loss")


# ---------------------------------------------------------------- PyTorch

def loaded_blas():
    """The BLAS shared objects this process has mapped, and OpenBLAS's core."""
    libs = set()
    with open("/proc/self/maps") as f:
        for l in f:
            p = l.split()[-1]
            if re.search(r"lib(open)?blas", os.path.basename(p)):
                libs.add(os.path.realpath(p))
    core = "?"
    import ctypes
    for p in sorted(libs):
        try:
            fn = ctypes.CDLL(p).openblas_get_corename
            fn.restype = ctypes.c_char_p
            core = fn().decode()
            break
        except (OSError, AttributeError):
            pass
    return sorted(libs), core


def torch_child(threads, workers, epochs, limit):
    """Runs in its own process (the env was set by the parent); prints one JSON
    line. An epoch is its first `limit` batches when limit > 0."""
    import numpy as np
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset

    class FashionMNIST(Dataset):
        """Reads the IDX files once; __getitem__ normalises one sample, as
        torchvision's ToTensor + Normalize would."""

        def __init__(self):
            img, dims = read_idx(os.path.join(DATA, "train-images-idx3-ubyte.gz"))
            lab, _ = read_idx(os.path.join(DATA, "train-labels-idx1-ubyte.gz"))
            self.images = np.frombuffer(img, dtype=np.uint8).reshape(dims[0], dims[1] * dims[2])
            self.labels = np.frombuffer(lab, dtype=np.uint8).astype(np.int64)

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, i):
            x = torch.from_numpy(self.images[i].astype(np.float32) / 255.0)
            return (x - MEAN) / STD, int(self.labels[i])

    torch.set_num_threads(threads)
    torch.manual_seed(1)
    ds = FashionMNIST()
    if workers >= 0:
        loader = DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=workers,
                            persistent_workers=workers > 0, generator=torch.Generator().manual_seed(1))
    else:  # reference: no DataLoader, batches sliced from a normalised tensor in a fresh order
        X = (torch.from_numpy(ds.images.astype(np.float32)) / 255.0 - MEAN) / STD
        Y = torch.from_numpy(ds.labels)
        g = torch.Generator().manual_seed(1)

        class Sliced:
            def __iter__(self):
                perm = torch.randperm(len(Y), generator=g)
                return ((X[i], Y[i]) for i in perm.split(BATCH))

        loader = Sliced()
    dims = (784,) + HIDDEN + (10,)
    layers = []
    for i in range(len(dims) - 1):
        layers.append(nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            layers.append(nn.ReLU())
    model = nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
    lossf = nn.CrossEntropyLoss()
    out = []
    for _ in range(epochs):
        model.train()
        tw = time.perf_counter()
        it = iter(loader)
        x, y = next(it)
        t0 = time.perf_counter()
        first, wait, n = t0 - tw, 0.0, 0
        tot_loss, correct = torch.zeros(()), torch.zeros((), dtype=torch.int64)
        while True:
            opt.zero_grad()  # 1.13's default, in place: set_to_none=True was slower here
            logits = model(x)
            loss = lossf(logits, y)
            loss.backward()
            opt.step()
            with torch.no_grad():
                tot_loss += loss.detach() * x.shape[0]
                correct += (logits.argmax(1) == y).sum()
            n += x.shape[0]
            if limit and n >= limit * BATCH:
                break
            tw = time.perf_counter()
            try:
                x, y = next(it)
            except StopIteration:
                break
            finally:
                wait += time.perf_counter() - tw
        t1 = time.perf_counter()
        out.append({"seconds": t1 - t0, "first_s": first, "wait_s": wait, "samples": n,
                    "loss": float(tot_loss) / n, "accuracy": int(correct) / n})
    libs, core = loaded_blas()
    print(json.dumps({"epochs": out, "threads": torch.get_num_threads(), "blas": libs, "core": core}))


def torch_info():
    import torch
    show = torch.__config__.show()
    m = re.search(r"BLAS_INFO=([^,\s]+)", show)
    cap = re.search(r"CPU capability usage: (\S+)", show)
    libs, core = loaded_blas()
    print(json.dumps({"version": torch.__version__, "blas_info": m.group(1) if m else "?",
                      "cpu_capability": cap.group(1) if cap else "?", "blas": libs, "core": core,
                      "build": next((l.strip() for l in show.splitlines() if "BLAS_INFO" in l), "")}))


def torch_env(threads, blas, coretype):
    env = dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = str(blas)
    env["OMP_NUM_THREADS"] = str(threads)
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    return env


def torch_run(threads, blas, workers, coretype, epochs):
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--torch-child", str(threads),
                        str(workers), str(epochs), str(LIMIT)], env=torch_env(threads, blas, coretype),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        die("PyTorch run (threads %d, workers %d) exited with %d:\n%s"
            % (threads, workers, p.returncode, p.stderr[-3000:]))
    r = json.loads(p.stdout.strip().splitlines()[-1])
    for e in r["epochs"]:
        if e["samples"] != expected():
            die("PyTorch run saw %d samples in an epoch, expected %d" % (e["samples"], expected()))
    return r


# ---------------------------------------------------------------- main

def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", nargs="?", default="build", metavar="BUILD_DIR",
                    help="the build directory of zeus-pipe (default: %(default)s)")
    ap.add_argument("--quick", action="store_true",
                    help="the test suite's run: one configuration a side, 2 short epochs")
    ap.add_argument("--epochs", type=int, metavar="N",
                    help="epochs a configuration, >= 2 (default: %d, or 2 with --quick)" % EPOCHS)
    return ap.parse_args()


def main():
    # torch_run and main re-execute this script in these internal modes: not
    # options of the bench, so kept out of argparse and its --help.
    argv = sys.argv[1:]
    if argv and argv[0] == "--torch-child":
        torch_child(int(argv[1]), int(argv[2]), int(argv[3]), int(argv[4]))
        return
    if argv and argv[0] == "--torch-info":
        torch_info()
        return
    args = parse_args()
    global ZP_THREADS, ZP_WORKERS, TORCH_THREADS, TORCH_WORKERS, TORCH_EXTRA, LIMIT
    epochs = EPOCHS
    if args.quick:
        ZP_THREADS, ZP_WORKERS, TORCH_THREADS, TORCH_WORKERS, TORCH_EXTRA = (1,), (2,), (1,), (2,), ()
        epochs, LIMIT = 2, 20
        skip_without_torch(True, "train_bench")
    if args.epochs is not None:
        epochs = args.epochs
    if epochs < 2:
        die("--epochs must be at least 2 (the first epoch is not counted)")
    bin_path = os.path.join(os.path.abspath(args.build), "zeus-pipe")
    if not os.access(bin_path, os.X_OK):
        die("%s not found or not executable: build it first (scripts/build.sh)" % bin_path)
    for f in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"):
        if not os.path.exists(os.path.join(DATA, f)):
            die("%s missing: install dataset-fashion-mnist (scripts/deps.sh)" % os.path.join(DATA, f))
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--torch-info"],
                       env=torch_env(1, 1, None), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        if "No module named" in p.stderr:
            die("PyTorch (or numpy) is missing for %s: run scripts/deps.sh --bench "
                "(installs python3-torch python3-numpy), then run this with /usr/bin/python3\n%s"
                % (sys.executable, p.stderr.strip().splitlines()[-1]))
        die("importing torch failed:\n" + p.stderr[-3000:])
    info = json.loads(p.stdout.strip().splitlines()[-1])

    t_start = time.perf_counter()
    inherited = os.environ.get("OPENBLAS_CORETYPE")
    rows = []  # (side, label, epoch seconds, extra, setting dict)
    print("running %d zeus-pipe and %d PyTorch configurations, %d epochs each ..."
          % (2 * len(ZP_THREADS) * len(ZP_WORKERS) + len(ZP_THREADS), len(TORCH_THREADS) * len(TORCH_WORKERS) + len(TORCH_EXTRA) + 2, epochs),
          file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="zp-train-bench-") as d:
        k = 0
        for coretype in (None, "SkylakeX"):
            for th in ZP_THREADS:
                for w in ZP_WORKERS:
                    k += 1
                    secs, wait, core, loss = zp_run(bin_path, d, "r%d" % k, th, w, coretype, epochs)
                    ct = coretype or "%s (env)" % (inherited or "unset")
                    label = "zeus-pipe threads=%d workers=%d CORETYPE=%s" % (th, w, ct)
                    extra = "core %s, trainer data wait %s (whole run), last loss %.3f" % (
                        core, "?" if wait is None else "%.1f%%" % (100 * wait), loss or float("nan"))
                    rows.append(("zeus-pipe", label, secs, extra))
        # The default config keeps the cache on: from epoch 2 on the loaders are
        # idle and the trainer may have both cores.
        for th in ZP_THREADS:
            k += 1
            secs, wait, core, loss = zp_run(bin_path, d, "r%d" % k, th, 2, "SkylakeX", epochs, cache=True)
            label = "zeus-pipe threads=%d workers=2 CORETYPE=SkylakeX cache=on" % th
            extra = "core %s, trainer data wait %s (whole run), last loss %.3f" % (
                core, "?" if wait is None else "%.1f%%" % (100 * wait), loss or float("nan"))
            rows.append(("zeus-pipe", label, secs, extra))
    t_zp = time.perf_counter() - t_start

    torch_rows = []
    grid = [(th, th, w) for th in TORCH_THREADS for w in TORCH_WORKERS] + list(TORCH_EXTRA)
    for th, bl, w in grid:
        torch_rows.append((th, bl, w, None, torch_run(th, bl, w, None, epochs)))
    best = min(torch_rows, key=lambda t: med([e["seconds"] for e in t[4]["epochs"]]))
    th, bl, w = best[:3]
    torch_rows.append((th, bl, w, "SkylakeX", torch_run(th, bl, w, "SkylakeX", epochs)))
    # Reference only, not a candidate for the best: the same loop without a DataLoader.
    torch_rows.append((th, bl, -1, None, torch_run(th, bl, -1, None, epochs)))
    for th, bl, w, coretype, r in torch_rows:
        es = r["epochs"]
        ct = coretype or "%s (env)" % (inherited or "unset")
        label = "PyTorch set_num_threads=%d blas=%d num_workers=%d CORETYPE=%s" % (th, bl, w, ct)
        side = "PyTorch"
        if w < 0:
            label = "(ref) PyTorch set_num_threads=%d blas=%d no DataLoader CORETYPE=%s" % (th, bl, ct)
            side = "ref"
        extra = "core %s, data wait %.0f%%, 1st %.0f ms, last loss %.3f" % (
            r["core"], 100 * med([e["wait_s"] / e["seconds"] for e in es]),
            1000 * med([e["first_s"] for e in es]), es[-1]["loss"])
        rows.append((side, label, [e["seconds"] for e in es], extra))
    total = time.perf_counter() - t_start

    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print("machine: %s, %d cores; batch %d, shuffle; median of epochs 2..%d; train split only"
          % (cpu, os.cpu_count(), BATCH, epochs))
    print("PyTorch %s: BLAS_INFO=%s (GEMMs in %s, OpenBLAS core %s with the inherited env), CPU capability %s"
          % (info["version"], info["blas_info"], " -> ".join(info["blas"]) or "?", info["core"],
             info["cpu_capability"]))
    print("env: OPENBLAS_CORETYPE=%s%s" % (inherited or "(unset)", "".join(
        "  %s=%s" % (k, v) for k, v in sorted(os.environ.items())
        if k.startswith("OPENBLAS_") and k != "OPENBLAS_CORETYPE")))
    print("note: a shared 2-core VM; other processes may have used the cores, so figures are noisy")
    print()
    w = max(len(r[1]) for r in rows)
    print("%-*s %9s %10s   %-18s %s" % (w, "configuration", "epoch s", "samples/s", "epochs (s)", "notes"))
    for side, label, secs, extra in rows:
        m = med(secs)
        print("%-*s %9.3f %10.0f   %-18s %s" % (w, label, m, expected() / m,
                                                " ".join("%.2f" % s for s in secs), extra))
    print()
    bz = min((r for r in rows if r[0] == "zeus-pipe"), key=lambda r: med(r[2]))
    bt = min((r for r in rows if r[0] == "PyTorch"), key=lambda r: med(r[2]))
    print("best zeus-pipe: %-*s %.3f s/epoch (%.0f samples/s)" % (w, bz[1], med(bz[2]), expected() / med(bz[2])))
    print("best PyTorch:   %-*s %.3f s/epoch (%.0f samples/s)" % (w, bt[1], med(bt[2]), expected() / med(bt[2])))
    print("zeus-pipe epoch / PyTorch epoch = %.2f (best zeus-pipe: %s; best PyTorch: %s; goal <= 0.5)"
          % (med(bz[2]) / med(bt[2]), bz[1][len("zeus-pipe "):], bt[1][len("PyTorch "):]))
    print("bench wall time: %.0f s (zeus-pipe %.0f s, PyTorch %.0f s)" % (total, t_zp, total - t_zp))


if __name__ == "__main__":
    main()

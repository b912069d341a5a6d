#!/usr/bin/python3
"""One PyTorch training loop fed by DataLoader and by zeus-pipe, side by side.

The loop (`--loop`, below) is one function of this file, run in a process of
its own either way: fed by torch.utils.data.DataLoader, or started by
`zeus-pipe up` as the run's trainer.command and fed by the zeus_pipe package.
Same model, optimizer, batch size, seed, shuffle, torch threads and number of
CPU workers (DataLoader's num_workers = zeus-pipe's loader.workers, with
persistent_workers; pin_memory only on a GPU).

Workloads:
- cnn: Fashion-MNIST (Debian's dataset-fashion-mnist) and the CNN of
  python/examples/fashion_cnn.py (Adam 1e-3), batch 128, configs/fashion-cnn.yaml.
  DataLoader side: a Dataset over the IDX files read once into memory, whose
  __getitem__ normalises one sample as torchvision's ToTensor + Normalize would.
- jpeg: the JPEG folder of bench/make_images.py and a small CNN (two strided
  convolutions, so that the data path matters on a CPU), batch 64, SGD,
  configs/image-folder.yaml's resize 256 and center crop 224 (its random
  augmentation off). DataLoader side: torchvision ImageFolder with Resize(256),
  CenterCrop(224), ToTensor, Normalize with the config's mean and std.
  zeus-pipe sends uint8 pixels (the config's dataset.dtype); the loop turns
  them into the same normalised float32 as part of taking the batch.
- resnet (only where torch sees a GPU): the JPEG folder and torchvision's
  resnet18 on the GPU as fast training runs it: bf16 autocast, channels_last,
  batch 256, uint8 batches normalised on the device.
The image workloads (jpeg, resnet) have a second DataLoader baseline, the
stronger one: "DataLoader uint8" hands out uint8 batches (PILToTensor in
place of ToTensor + Normalize), normalised on the device as zeus-pipe's are.
zeus-pipe runs each workload twice: cache off (every sample decoded by a
loader) and warm (`zeus-pipe warm` first: every sample an LMDB hit).

Measured in the loop, identically for both feeds: an epoch runs from iter() to
the end of its last step; its data wait is the time spent in iter() and each
__next__, including the conversion of the batch to the model's dtype and its
copy to the device; samples/s is the epoch's samples over its time. The train
split's epochs are compared (each epoch's test pass runs too, as in a real
loop, and is not counted). A figure is the median of the epochs after the first.

Client cost: a loop that does nothing with its batches, over a warm cache of
tiny synthetic samples (batch 16 of 1x2x2), its time per batch; beside it the
built-in trainer with trainer.backend=null over the same pipeline (the rate
the pipeline itself delivers: the Python figure is not corrected by it).

Run: /usr/bin/python3 bench/torch_bench.py [BUILD_DIR] [--quick] [--workers N]
     [--threads T] [--epochs E] [--only cnn,jpeg,resnet,client]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "python", "examples"))

FMNIST = "/usr/share/datasets/fashion-mnist"
CONFIGS = {"cnn": "fashion-cnn.yaml", "jpeg": "image-folder.yaml", "resnet": "image-folder.yaml"}
BATCH = {"cnn": 128, "jpeg": 64, "resnet": 256}
IMAGE_MEAN, IMAGE_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
RESIZE, CROP = 256, 224
IMAGE_OVERRIDES = ["dataset.image.resize=%d" % RESIZE, "dataset.image.crop=%d" % CROP,
                   "dataset.augment.resized_crop=false", "dataset.augment.hflip=false",
                   "dataset.augment.crop_padding=0", "dataset.dtype=uint8"]
CLIENT_CONFIG = """
run: {name: client}
seed: 1
dataset:
  source: synthetic
  synthetic: {train_samples: %d, test_samples: 0, shape: [1, 2, 2], classes: 2}
cache: {enabled: true, path: cache}
loader: {workers: 1}
prefetch: {batch_size: 16, depth: 32, shuffle: true}
"""


def die(msg):
    print("torch_bench: " + msg, file=sys.stderr)
    sys.exit(1)


# ================================================================ the loop (both feeds)

def small_cnn(classes):
    from torch import nn
    return nn.Sequential(nn.Conv2d(3, 16, 5, stride=4, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, classes))


def model_for(workload):
    """(model, optimizer) of a workload; the caller has seeded torch."""
    import torch
    if workload == "cnn":
        from fashion_cnn import Net  # python/examples/fashion_cnn.py: the example's own model
        model = Net()
        return model, torch.optim.Adam(model.parameters(), lr=1e-3)
    if workload == "jpeg":
        model = small_cnn(10)
    else:
        import torchvision
        model = torchvision.models.resnet18(num_classes=10)
    return model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


class Limited:
    """At most n batches of each pass over a DataLoader (n = 0: all), as
    trainer.limit_*_batches cuts zeus-pipe's epochs."""

    def __init__(self, loader, n):
        self.loader, self.n = loader, n

    def __len__(self):
        return min(len(self.loader), self.n) if self.n else len(self.loader)

    def __iter__(self):
        for i, b in enumerate(self.loader):
            yield b
            if i + 1 == self.n:
                return


def dataloaders(a):
    """The DataLoader side's train and test sources: float32 normalised in the
    workers, or (source dataloader-u8) uint8 pixels as PILToTensor gives them."""
    import torch
    from torch.utils.data import DataLoader
    if a.loop == "cnn":
        from bench import fashion_mnist  # bench/bench.py: the IDX files as a Dataset
        train, test = fashion_mnist("train"), fashion_mnist("t10k")
    else:
        from torchvision import datasets, transforms
        last = ([transforms.PILToTensor()] if a.source == "dataloader-u8" else
                [transforms.ToTensor(), transforms.Normalize(IMAGE_MEAN, IMAGE_STD)])
        tf = transforms.Compose([transforms.Resize(RESIZE), transforms.CenterCrop(CROP)] + last)
        train = datasets.ImageFolder(os.path.join(a.images, "train"), transform=tf)
        test = datasets.ImageFolder(os.path.join(a.images, "val"), transform=tf)
    kw = dict(batch_size=BATCH[a.loop], num_workers=a.workers, persistent_workers=a.workers > 0,
              pin_memory=a.device == "cuda")
    return (Limited(DataLoader(train, shuffle=True, generator=torch.Generator().manual_seed(a.seed), **kw), a.limit),
            Limited(DataLoader(test, shuffle=False, **kw), a.limit_test))


def preparer(a):
    """The batch's conversion to what the model takes, on the device: a copy
    (non-blocking from DataLoader's pinned memory) and, for zeus-pipe's uint8
    images, the normalisation with the config's mean and std; on a GPU the
    zeus_pipe package does both (attach(device="cuda"))."""
    import torch
    dev = torch.device(a.device)
    fmt = torch.channels_last if a.loop == "resnet" else torch.contiguous_format
    if a.source == "zeus" and a.device == "cuda":  # attach(device="cuda") copied and normalised
        return lambda x, y: (x.contiguous(memory_format=fmt), y)
    if a.source == "dataloader" or a.loop == "cnn":
        return lambda x, y: (x.to(dev, non_blocking=True).contiguous(memory_format=fmt),
                             y.to(dev, non_blocking=True))
    mean = torch.tensor(IMAGE_MEAN, device=dev).view(1, 3, 1, 1) * 255
    inv = 1 / (torch.tensor(IMAGE_STD, device=dev).view(1, 3, 1, 1) * 255)
    return lambda x, y: (x.to(dev, non_blocking=True).float().sub_(mean).mul_(inv).contiguous(memory_format=fmt),
                         y.to(dev, non_blocking=True))


def timed(source, prep, body, sync):
    """One pass over source, body(x, y) -> loss sum on each batch. Returns
    {seconds, wait_s, cpu_s, samples, batches, loss}: the pass from iter() to
    its last step's end, the time in iter(), __next__ and prep, and the CPU
    time of this process (all its threads) meanwhile."""
    clock = time.perf_counter
    c0, t0 = time.process_time(), clock()
    it = iter(source)
    wait, n, batches, loss = clock() - t0, 0, 0, 0.0
    while True:
        tw = clock()
        try:
            x, y = next(it)
        except StopIteration:
            wait += clock() - tw
            break
        x, y = prep(x, y)
        wait += clock() - tw
        loss += body(x, y)
        n += len(y)
        batches += 1
    sync()
    return dict(seconds=clock() - t0, wait_s=wait, cpu_s=time.process_time() - c0, samples=n, batches=batches, loss=loss / max(n, 1))


def loop(a):
    """The training loop both feeds share; one JSON line per pass into a.out."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    zp = None
    if a.source == "zeus":
        import zeus_pipe
        # the CPU loop takes uint8 and normalises it itself, as its DataLoader side's does
        zp = zeus_pipe.attach(device="cuda" if a.device == "cuda" else None,
                              raw=a.device != "cuda")
        train, test = zp.train, zp.test
    else:
        train, test = dataloaders(a)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    out = open(a.out, "w")
    if a.loop == "client":  # nothing done with the batches
        for epoch in range(a.epochs):
            r = timed(train, lambda x, y: (x, y), lambda x, y: 0.0, sync)
            print(json.dumps(dict(r, split="train", epoch=epoch)), file=out, flush=True)
        zp.close()
        return
    model, opt = model_for(a.loop)
    model.to(a.device)
    fast = a.loop == "resnet"  # what fast training uses: bf16 autocast, channels_last
    if fast:
        model.to(memory_format=torch.channels_last)
    prep = preparer(a)

    def forward(x):
        with torch.autocast(device_type=a.device, dtype=torch.bfloat16, enabled=fast):
            return model(x)

    def step(x, y):
        loss = F.cross_entropy(forward(x).float(), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item() * len(y)

    def evaluate(x, y):
        with torch.no_grad():
            return F.cross_entropy(forward(x).float(), y, reduction="sum").item()

    for epoch in range(a.epochs):
        model.train()
        r = timed(train, prep, step, sync)
        print(json.dumps(dict(r, split="train", epoch=epoch)), file=out, flush=True)
        model.eval()
        r = timed(test, prep, evaluate, sync)
        print(json.dumps(dict(r, split="test", epoch=epoch)), file=out, flush=True)
    if zp:
        zp.close()


# ================================================================ the driver

def records(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


class Bench:
    """Runs the loop's processes in a temporary folder `work`."""

    def __init__(self, a, work):
        self.a, self.work = a, work
        self.bin = os.path.join(os.path.abspath(a.build), "zeus-pipe")
        self.env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), OPENBLAS_NUM_THREADS=str(a.threads))

    def loop_args(self, workload, source, out):
        a = self.a
        return [sys.executable, os.path.abspath(__file__), "--loop", workload, "--source", source, "--out", out,
                "--epochs", str(a.epochs), "--threads", str(a.threads), "--workers", str(a.workers),
                "--seed", str(a.seed), "--device", a.device, "--limit", str(a.limit),
                "--limit-test", str(a.limit_test), "--images", a.images]

    def dataloader(self, workload, source="dataloader"):
        out = os.path.join(self.work, "%s-%s.jsonl" % (workload, source))
        p = subprocess.run(self.loop_args(workload, source, out), env=self.env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode:
            die("the DataLoader loop (%s, %s) exited with %d:\n%s" % (workload, source, p.returncode,
                                                                    p.stdout[-3000:]))
        return records(out)

    def overrides(self, workload, name, cache):
        a = self.a
        over = ["run.dir=" + os.path.join(self.work, "runs"), "run.name=" + name, "trainer.epochs=%d" % a.epochs,
                "cache.enabled=%s" % ("true" if cache else "false"),
                "cache.path=" + os.path.join(self.work, "cache-" + workload)]
        if workload == "client":  # the config's own sizes
            return over
        over += ["seed=%d" % a.seed, "loader.workers=%d" % a.workers, "prefetch.shuffle=true",
                 "prefetch.batch_size=%d" % BATCH[workload],
                 "trainer.limit_train_batches=%d" % a.limit, "trainer.limit_test_batches=%d" % a.limit_test]
        if workload != "cnn":
            over += IMAGE_OVERRIDES + ["dataset.path=" + a.images]
        return over

    def up(self, config, over, what):
        p = subprocess.run([self.bin, "up", config] + over, cwd=self.work, env=self.env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode:
            die("zeus-pipe up (%s) exited with %d; its output ends:\n%s" % (what, p.returncode, p.stdout[-3000:]))

    def warm(self, config, over, what):
        p = subprocess.run([self.bin, "warm", config] + over, cwd=self.work, env=self.env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode:
            die("zeus-pipe warm (%s) exited with %d:\n%s" % (what, p.returncode, p.stdout[-3000:]))

    def exactly_once(self, name):
        """The run's train epoch_end records, each checked for exactly-once coverage."""
        ends = [r for r in records(os.path.join(self.work, "runs", name, "metrics.jsonl"))
                if r.get("event") == "epoch_end" and r.get("split") == "train"]
        if len(ends) != self.a.epochs:
            die("run %s: %d train epoch_end records, expected %d" % (name, len(ends), self.a.epochs))
        for r in ends:
            if not r["samples"] == r["distinct"] == r["expected_samples"]:
                die("run %s: epoch %s: %s samples, %s distinct, %s expected"
                    % (name, r["epoch"], r["samples"], r["distinct"], r["expected_samples"]))
        return ends

    def zeus(self, workload, cache):
        name = "%s-%s" % (workload, "warm" if cache else "off")
        out = os.path.join(self.work, name + ".jsonl")
        config = os.path.join(ROOT, "configs", CONFIGS[workload])
        over = self.overrides(workload, name, cache)
        if cache:
            self.warm(config, over, name)
        over.append("trainer.command=" + json.dumps(self.loop_args(workload, "zeus", out)))
        self.up(config, over, name)
        self.exactly_once(name)
        return records(out)

    def client_cost(self):
        """(Python loop's records, the built-in null trainer's per-batch seconds)."""
        config = os.path.join(self.work, "client.yaml")
        with open(config, "w") as f:
            f.write(CLIENT_CONFIG % self.a.client_samples)
        over = self.overrides("client", "client", True)
        self.warm(config, over, "client")
        out = os.path.join(self.work, "client.jsonl")
        self.up(config, over + ["trainer.command=" + json.dumps(self.loop_args("client", "zeus", out))],
                "client")
        self.exactly_once("client")
        over[1] = "run.name=client-null"
        self.up(config, over + ["trainer.backend=null"], "client-null")
        ends = self.exactly_once("client-null")
        per_batch = [16 / r["samples_per_s"] for r in ends]
        return records(out), per_batch


def med(xs):
    """Median of the epochs after the first (all, when there is one)."""
    return statistics.median(xs[1:] if len(xs) > 1 else xs)


def summary(recs):
    train = [r for r in recs if r["split"] == "train"]
    return dict(epochs=train, seconds=med([r["seconds"] for r in train]),
                rate=med([r["samples"] / r["seconds"] for r in train]),
                wait=med([r["wait_s"] / r["seconds"] for r in train]))


def report(a, results, client):
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print()
    print("machine: %s, %d cores; device %s; torch threads %d, %d CPU workers (num_workers = loader.workers); "
          "seed %d; median of epochs 2..%d" % (cpu, os.cpu_count(), a.device, a.threads, a.workers, a.seed,
                                               a.epochs))
    if a.limit:
        print("cut short (--quick or --limit): %d train and %d test batches an epoch" % (a.limit, a.limit_test))
    print()
    print("%-8s %-22s %5s %9s %10s %9s" % ("workload", "fed by", "epoch", "seconds", "samples/s", "data wait"))
    for wl, rows in results.items():
        for label, s in rows:
            for r in s["epochs"]:
                print("%-8s %-22s %5d %9.3f %10.0f %8.1f%%" % (wl, label, r["epoch"] + 1, r["seconds"],
                                                              r["samples"] / r["seconds"], 100 * r["wait_s"] / r["seconds"]))
    print()
    print("%-8s %-22s %9s %10s %9s %12s %12s" % ("workload", "fed by", "epoch s", "samples/s", "data wait",
                                                "rate / DL", "epoch / DL"))
    for wl, rows in results.items():
        base = rows[0][1]
        for label, s in rows:
            print("%-8s %-22s %9.3f %10.0f %8.1f%% %11.2fx %11.2fx" % (
                wl, label, s["seconds"], s["rate"], 100 * s["wait"], s["rate"] / base["rate"],
                s["seconds"] / base["seconds"]))
    print()

    def target(what, ok, figure):
        print("%-64s %-14s %s" % (what, figure, "met" if ok else "MISSED"))
    if "cnn" in results:
        r = dict(results["cnn"])
        target("cnn: zeus-pipe warm data wait < 5%", r["zeus-pipe warm"]["wait"] < 0.05,
               "%.1f%%" % (100 * r["zeus-pipe warm"]["wait"]))
        for k in ("zeus-pipe cache off", "zeus-pipe warm"):
            x = r[k]["seconds"] / r["DataLoader"]["seconds"]
            target("cnn: %s epoch <= DataLoader's" % k, x <= 1, "%.2fx" % x)
    for wl in ("jpeg", "resnet"):
        if wl in results:
            r = dict(results[wl])
            for k in ("zeus-pipe cache off", "zeus-pipe warm"):
                x = r[k]["rate"] / r["DataLoader"]["rate"]
                target("%s: %s samples/s >= 1.5x DataLoader's" % (wl, k), x >= 1.5, "%.2fx" % x)
                x = r[k]["rate"] / r["DataLoader uint8"]["rate"]
                target("%s: %s samples/s >= 1.5x DataLoader uint8's" % (wl, k), x >= 1.5, "%.2fx" % x)
    if client:
        recs, null = client
        train = [r for r in recs if r["split"] == "train"]
        us = 1e6 * med([r["seconds"] / r["batches"] for r in train])
        cpu_us = 1e6 * med([r["cpu_s"] / r["batches"] for r in train])
        print("%-58s %-14s %s" % ("client: Python loop's time per batch < 50 us", "%.1f us" % us,
                                  "met" if us < 50 else "MISSED"))
        print("  (a loop doing nothing, batch 16 of 1x2x2, warm cache, %d batches an epoch; each epoch %s us)"
              % (train[0]["batches"], " ".join("%.1f" % (1e6 * r["seconds"] / r["batches"]) for r in train)))
        print("  its process's CPU time per batch (the client's own work; waits for the pipeline use none): "
              "%.1f us" % cpu_us)
        print("  the built-in trainer (backend null) on the same pipeline, per batch: %.1f us (when near the "
              "loop's time, the pipeline was the limit)" % (1e6 * med(null)))


def arguments(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", nargs="?", default="build", help="build folder with zeus-pipe (default build)")
    ap.add_argument("--quick", action="store_true",
                    help="what the test suite runs: 2 epochs of 3 train and 2 test batches, 40 JPEGs, "
                         "3,200 client samples")
    ap.add_argument("--only", default=None, help="comma-separated workloads: cnn, jpeg, resnet, client")
    ap.add_argument("--workers", type=int, default=None,
                    help="loader.workers = num_workers (default 2; on a GPU machine the cores less one)")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    ap.add_argument("--epochs", type=int, default=None, help="epochs a configuration (default 3; --quick 2)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--images", default=None, help="the JPEG folder (default bench/out/images[-quick-40x10])")
    ap.add_argument("--limit", type=int, default=None, help="train batches an epoch (0: all)")
    ap.add_argument("--limit-test", type=int, default=None, help="test batches an epoch (0: all)")
    # the loop's own process
    ap.add_argument("--loop", choices=("cnn", "jpeg", "resnet", "client"), help=argparse.SUPPRESS)
    ap.add_argument("--source", choices=("dataloader", "dataloader-u8", "zeus"), help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--device", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.epochs is None:
        a.epochs = 2 if a.quick else 3
    if a.limit is None:
        a.limit = 3 if a.quick else 0
    if a.limit_test is None:
        a.limit_test = 2 if a.quick else 0
    a.client_samples = 3200 if a.quick else 320000
    if a.images is None:
        import make_images
        a.images = make_images.quick_folder(HERE) if a.quick else os.path.join(HERE, "out", "images")
    a.images = os.path.abspath(a.images)
    return a


def main():
    a = arguments(sys.argv[1:])
    if a.loop:
        loop(a)
        return
    from bench import skip_without_torch
    skip_without_torch(a.quick, "torch_bench")
    try:
        import torch
        import torchvision  # noqa: F401
    except ImportError as e:
        die("%s for %s: install python3-torch and python3-torchvision (scripts/deps.sh --bench), "
            "and run this with /usr/bin/python3" % (e, sys.executable))
    if not os.access(os.path.join(a.build, "zeus-pipe"), os.X_OK):
        die("%s/zeus-pipe not found or not executable: build it first (scripts/build.sh)" % a.build)
    gpu = torch.cuda.is_available()
    a.device = "cuda" if gpu else "cpu"
    if a.workers is None:  # a GPU machine's cores feed it; one is left for the loop itself
        a.workers = max(1, os.cpu_count() - 1) if gpu else 2
    todo = a.only.split(",") if a.only else ["cnn", "jpeg"] + (["resnet"] if gpu else []) + ["client"]
    for w in todo:
        if w not in ("cnn", "jpeg", "resnet", "client"):
            die("--only: unknown workload %r (cnn, jpeg, resnet, client)" % w)
    if "resnet" in todo and not gpu:
        die("resnet: torch sees no GPU here (torch.cuda.is_available() is False)")
    if "cnn" in todo and not os.path.exists(os.path.join(FMNIST, "train-images-idx3-ubyte.gz")):
        die("%s: missing: install dataset-fashion-mnist (scripts/deps.sh)" % FMNIST)
    if "jpeg" in todo or "resnet" in todo:
        import make_images
        n, size = make_images.make(a.images, *(make_images.QUICK if a.quick else (5000, 500)))
        print("torch_bench: %s: %d images, %.0f KB average" % (a.images, n, size / n / 1024), flush=True)
    results, client = {}, None
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="zp-torch-bench-") as work:
        b = Bench(a, work)
        for w in todo:
            if w == "client":
                print("torch_bench: client cost ...", file=sys.stderr, flush=True)
                client = b.client_cost()
                continue
            rows = []
            feeds = [("DataLoader", lambda: b.dataloader(w))]
            if w != "cnn":  # the stronger baseline for images: uint8 batches, normalised on the device
                feeds.append(("DataLoader uint8", lambda: b.dataloader(w, "dataloader-u8")))
            feeds += [("zeus-pipe cache off", lambda: b.zeus(w, False)),
                      ("zeus-pipe warm", lambda: b.zeus(w, True))]
            for label, fn in feeds:
                print("torch_bench: %s, %s ..." % (w, label), file=sys.stderr, flush=True)
                rows.append((label, summary(fn())))
            results[w] = rows
    report(a, results, client)
    print("bench wall time: %.0f s" % (time.perf_counter() - t0))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""zeus-pipe on JPEG images against its own ceiling and torchvision, in one run.

A synthetic ImageNet-like folder (bench/make_images.py: 5,000 train JPEGs of
about 500x375 at quality 90, 10 classes, 500 val) is generated when missing.
Every figure uses configs/image-folder.yaml's deterministic transform: shorter
side resized to 256, center crop 224, CHW (its random augmentation off);
batches of 64, shuffled. zeus-pipe runs the config's dataset.dtype, uint8:
loaders send pixels and the trainer normalises them (a kernel on the GPU with
the cuda backend; with trainer.backend=null, here, not at all: the row
"normalise" of (a) in parts says what it costs a CPU). One row runs
dataset.dtype=float32, normalised in the loaders, for comparison;
torchvision's figures include its Normalize.

(a) ceiling: the image source's get() (read, TurboJPEG decode, resize, crop)
    called directly on one core for every train image (bench/jpeg_ceiling.c);
(b) zeus-pipe with loader.workers=1 and 2, trainer.backend=null, cache off
    (and 2 loaders with float32 samples);
(b') zeus-pipe with 2 loaders and the LMDB cache on, starting empty: epoch 1
    cold (loaders decode, the cache stage writes), epoch 3 warm (all hits);
(c) torchvision ImageFolder + DataLoader(num_workers=1 and 2): Resize(256),
    CenterCrop(224), ToTensor, Normalize with the same mean/std, batch 64,
    shuffle, persistent workers.
(d) the training recipe: RandomResizedCrop(224, scale=(0.08, 1), ratio=(3/4,
    4/3)) of the whole image and a random flip, uint8 CHW. torchvision:
    ImageFolder + DataLoader(num_workers=2) with RandomResizedCrop +
    RandomHorizontalFlip + PILToTensor; zeus-pipe with
    dataset.augment.resized_crop and hflip, 2 loaders: cache off, and the
    cache on keeping the whole images (longer side 320) raw and as JPEG
    (cache.encoding), epoch 1 cold and epoch 3 warm (the crop made by the
    prefetch readers). Each row's CPU (all processes, in core-seconds per
    1,000 images) and each cache's bytes per image are printed with them.

(e) accuracy: speed must not cost it. The ResNet-18 of
    python/examples/image_resnet.py (its build(), train_epoch() and
    test_epoch(): SGD lr 0.05, momentum 0.9, weight decay 5e-4, cosine over
    the epochs, torch.manual_seed(1) before the weights) trained from scratch
    a few epochs both ways on a folder of its own (make_images: --acc-train,
    --acc-val images), with the same budget (images, crop, epochs, batch) and
    seed 1 for the weights and the shuffle, each epoch's test accuracy printed
    side by side. DataLoader: ImageFolder + DataLoader(num_workers=2,
    shuffle, generator seeded 1) with RandomResizedCrop(--acc-crop,
    scale=(0.08, 1), ratio=(3/4, 4/3)) + RandomHorizontalFlip + PILToTensor,
    uint8 batches normalised in the loop with the same mean/std; test split
    Resize(--acc-resize) + CenterCrop + PILToTensor. zeus-pipe: `zeus-pipe
    warm` fills the cache (whole train images, longer side 320), then `up` a
    config (written into the temporary folder) with dataset.augment.
    resized_crop (the same scale and ratio) and hflip, 2 loaders, seed 1,
    running image_resnet.py --no-augment as trainer.command (its own random
    crop and flip off: the pipeline's recipe alone); its accuracies come from
    the run's metrics.jsonl (test_epoch records). The two sides draw
    different random crops, flips and batch orders (different generators)
    and the pipeline crops the cached 320 px image rather than the JPEG, so
    the accuracies agree within noise, not bit for bit; the standard error
    printed is only the test set's (binomial), training runs vary more: at
    the CPU defaults on a 2-core machine, runs of pipeline seeds 1-3 (the
    weights' seed 1) ended at 0.86-0.95 test accuracy with zeus-pipe and
    0.94-0.95 with the DataLoader (its seeds 1-3 for weights and draws).
    Defaults on the CPU (a 2-core machine: about 4 minutes for both sides):
    2,000 train and 500 val images, crop 64 (resize 72), 4 epochs, batch
    64; with a GPU (used by both sides): 5,000 and 500, crop 112 (resize
    126), 6 epochs. Each side's wall time is printed too (zeus-pipe's `up`,
    plus its `warm` apart). --only accuracy runs part (e) alone, --only speed
    parts (a)-(d).

The measurements run in --repeats rounds, each round one of everything, so
that a busy spell on a shared machine spoils one round of each rather than
every repeat of one; a figure is the best of its rounds (contention only ever
slows things down). Before each measurement every file is read once (the
dataset is in page cache for all), and the script waits up to a minute for
other processes to use under a quarter of a core; beside each round's figure
it prints the CPU (in cores) that other processes used while it ran.

A round's ceiling is one timed pass after an untimed one. zeus-pipe and
torchvision run two epochs and the second is timed; a zeus-pipe epoch's rate
comes from its run's metrics.jsonl: the train and test samples between two
consecutive train epoch_end records over the time between them (unlike the
record's own samples_per_s, whose clock starts at the epoch's first batch).
The cold cache epoch is epoch 1's own samples_per_s; the warm one is epoch 3
by the same interval rule.

Run: /usr/bin/python3 bench/image_bench.py build [--quick] [--repeats N] [--train N --val M]
     [--no-wait] [--only speed|accuracy] [--acc-train N] [--acc-val M]
     [--acc-epochs E] [--acc-crop C] [--acc-resize R] [--acc-batch B]
     --quick (what the test suite runs): make_images.QUICK's 40 images, one
     round, no wait for a quiet machine; every part runs, its figures mean
     nothing ((e): 1 epoch of 3 batches of 16 at crop 32 each side).
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_images  # noqa: E402
from bench import skip_without_torch  # noqa: E402

CONFIG = os.path.join(HERE, "..", "configs", "image-folder.yaml")
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
RESIZE, CROP, BATCH = 256, 224, 64
# the deterministic transform only: the config's random augmentation is off
DETERMINISTIC = ["dataset.image.resize=%d" % RESIZE, "dataset.image.crop=%d" % CROP,
                 "dataset.augment.resized_crop=false", "dataset.augment.hflip=false",
                 "dataset.augment.crop_padding=0"]


def machine_busy():
    """CPU seconds the whole machine has been busy (steal included)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")


def own_cpu():
    """CPU seconds of this process and its children that have been waited for."""
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


class Others:
    """`with Others() as o:` ... o.cores: the CPU other processes used meanwhile."""

    def __enter__(self):
        self.t, self.busy, self.own = time.monotonic(), machine_busy(), own_cpu()
        return self

    def __exit__(self, *exc):
        dt = time.monotonic() - self.t
        self.own_cpu = own_cpu() - self.own
        self.cores = max(0.0, (machine_busy() - self.busy) - self.own_cpu) / dt


def quiet(limit_s=60):
    """Waits until other processes use under a quarter of a core (2 s windows)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        with Others() as o:
            time.sleep(2)
        if o.cores < 0.25:
            return
    print("image_bench: the machine stayed busy (%.1f cores used by others): measuring anyway" % o.cores,
          flush=True)


def warm_files(root):
    """Reads every file under root once: the page cache holds the dataset."""
    for d, _, files in os.walk(root):
        for f in files:
            with open(os.path.join(d, f), "rb") as fh:
                while fh.read(1 << 20):
                    pass


def ceiling(bin_dir, root, parts):
    cmd = [os.path.join(bin_dir, "zp-bench-jpeg"), CONFIG, "--passes", "1"] + (["--parts"] if parts else []) + \
        ["dataset.path=" + root] + DETERMINISTIC
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit("image_bench: %s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
    return json.loads(p.stdout)


def records(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def zp_run(bin_dir, cwd, root, name, epochs, *over):
    """Runs `up`; returns a dict: train (its train epoch_end records), rates
    (images/s of each train epoch; None for epoch 1), images (train and test
    samples of the whole run), report (report.json), cpu (CPU s per stage)."""
    cmd = [os.path.join(bin_dir, "zeus-pipe"), "up", CONFIG, "run.name=" + name, "dataset.path=" + root,
           "trainer.backend=null", "trainer.epochs=%d" % epochs, "trainer.limit_test_batches=1",
           "prefetch.batch_size=%d" % BATCH, "prefetch.shuffle=true", "logger.stat_interval_ms=250"]
    cmd += DETERMINISTIC + list(over)
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    run = os.path.join(cwd, "runs", name)
    if p.returncode:
        sys.exit("image_bench: %s failed (%d):\n%s" % (" ".join(cmd), p.returncode, p.stderr[-3000:]))
    ends = [r for r in records(os.path.join(run, "metrics.jsonl")) if r.get("event") == "epoch_end"]
    train = [r for r in ends if r["split"] == "train"]
    bad = [r["epoch"] for r in train if not r["samples"] == r["distinct"] == r["expected_samples"]]
    if bad or len(train) != epochs:
        sys.exit("image_bench: %s: %d train epochs recorded, epochs %s incomplete" % (run, len(train), bad))
    rates = [None]
    for a, b in zip(train, train[1:]):  # train epoch b and the test epoch before it
        n = b["samples"] + sum(r["samples"] for r in ends if r["split"] == "test" and r["epoch"] == a["epoch"])
        rates.append(n / (b["time"] - a["time"]))
    cpu = {}
    for r in records(os.path.join(run, "stats.jsonl")):
        if r.get("kind") == "stats":
            cpu[r["stage"]] = cpu.get(r["stage"], 0) + r["cpu"] * r["window_s"]
    with open(os.path.join(run, "report.json")) as f:
        report = json.load(f)
    return dict(train=train, rates=rates, images=sum(r["samples"] for r in ends), report=report, cpu=cpu)


def torchvision_rate(root, workers, recipe=False):
    """images/s of the second of two epochs through ImageFolder + DataLoader
    (recipe: RandomResizedCrop + RandomHorizontalFlip + PILToTensor)."""
    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    torch.set_num_threads(1)
    tf = transforms.Compose([transforms.Resize(RESIZE), transforms.CenterCrop(CROP), transforms.ToTensor(),
                             transforms.Normalize(MEAN, STD)])
    if recipe:
        tf = transforms.Compose([transforms.RandomResizedCrop(CROP), transforms.RandomHorizontalFlip(),
                                 transforms.PILToTensor()])
    ds = datasets.ImageFolder(os.path.join(root, "train"), transform=tf)
    loader = DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=workers, persistent_workers=True,
                        generator=torch.Generator().manual_seed(1))
    for _ in range(2):
        t0, n = time.perf_counter(), 0
        for x, _ in loader:
            n += x.shape[0]
        rate = n / (time.perf_counter() - t0)
    del loader  # joins the workers: their CPU time counts as this process's children's
    return rate


def share(run):
    """One line: each stage's CPU time per image (all its instances) and busy share."""
    busy = {s["stage"]: s["busy"] for s in run["report"]["stages"]}
    return "  ".join("%s %.2f ms %.0f%%" % (st, 1e3 * run["cpu"].get(st, 0) / run["images"], 100 * busy.get(st, 0))
                     for st in ("loader", "cache", "prefetch", "trainer", "logger"))


def region_ms(run, stage, region, images=None):
    """A timer region's total per image (of the run, or of `images`), in ms."""
    r = [x for x in run["report"]["regions"] if x["stage"] == stage and x["region"] == region]
    return 1e3 * r[0]["total_s"] / (images or run["images"]) if r else 0.0


ROWS = [("ceiling", "(a)  get() on one core: read+decode+resize+crop (ceiling)"),
        ("zp1", "(b)  zeus-pipe, 1 loader, cache off"),
        ("zp2", "(b)  zeus-pipe, 2 loaders, cache off"),
        ("zp2f", "(b)  zeus-pipe, 2 loaders, cache off, dataset.dtype=float32"),
        ("cold", "(b') zeus-pipe, 2 loaders, cache on: epoch 1 (cold, fills LMDB)"),
        ("warm", "(b') zeus-pipe, 2 loaders, cache on: epoch 3 (warm)"),
        ("tv1", "(c)  torchvision ImageFolder + DataLoader, num_workers=1"),
        ("tv2", "(c)  torchvision ImageFolder + DataLoader, num_workers=2"),
        ("rtv", "(d)  recipe: torchvision DataLoader, num_workers=2"),
        ("roff", "(d)  recipe: zeus-pipe, 2 loaders, cache off"),
        ("rcold", "(d)  recipe: zeus-pipe, cache raw: epoch 1 (cold)"),
        ("rwarm", "(d)  recipe: zeus-pipe, cache raw: epoch 3 (warm)"),
        ("jcold", "(d)  recipe: zeus-pipe, cache jpeg: epoch 1 (cold)"),
        ("jwarm", "(d)  recipe: zeus-pipe, cache jpeg: epoch 3 (warm)")]
RECIPE = ["dataset.augment.resized_crop=true", "dataset.augment.hflip=true", "dataset.dtype=uint8",
          "dataset.augment.scale=[0.08, 1.0]", "dataset.augment.ratio=[0.75, 1.3333333]"]


def cache_bytes(path):
    """Bytes per image of the train split's values, and how many there are."""
    try:
        import lmdb
    except ImportError:
        return 0, 0
    env = lmdb.open(path, readonly=True, lock=False, max_dbs=8)
    with env.begin() as txn:
        names = [k for k, _ in txn.cursor() if k.endswith(b"/train")]
    db = env.open_db(names[0], create=False)
    n = total = 0
    with env.begin() as txn:
        for _, v in txn.cursor(db=db):
            n, total = n + 1, total + len(v)
    env.close()
    return total / max(n, 1), n


def measure_all(bin_dir, root, reps, work, wait_quiet):
    """Runs `reps` rounds of everything (each after the machine is quiet when
    wait_quiet); returns got (per row key, a list of (images/s, cores used by
    others) per round), the zeus-pipe run behind each best figure, and the
    ceiling's parts."""
    got, runs, parts = {k: [] for k, _ in ROWS}, {}, {}
    cpu = {}     # per row key: core-seconds per 1,000 images of its best round
    sizes = {}   # per encoding: (bytes per image, images) of its cache

    def record(key, r, rate, cores, run=None):
        if run and rate > max([x for x, _ in got[key]] or [0]):
            runs[key] = run
        got[key].append((rate, cores))
        print("image_bench: round %d: %-8s %8.0f images/s  (others used %.1f cores)" % (r + 1, key, rate, cores),
              flush=True)

    for r in range(reps):
        jobs = [("ceiling", lambda: ceiling(bin_dir, root, not parts))]
        for w in (1, 2):
            jobs.append(("zp%d" % w, lambda w=w: zp_run(bin_dir, work, root, "loaders-%d-%d" % (w, r + 1), 2,
                                                         "loader.workers=%d" % w, "cache.enabled=false")))
        jobs.append(("zp2f", lambda: zp_run(bin_dir, work, root, "float32-%d" % (r + 1), 2, "loader.workers=2",
                                            "cache.enabled=false", "dataset.dtype=float32")))
        cache = os.path.join(work, "cache")
        jobs.append(("cache", lambda: zp_run(bin_dir, work, root, "cache-%d" % (r + 1), 3, "loader.workers=2",
                                             "cache.enabled=true", "cache.path=" + cache)))
        for w in (1, 2):
            jobs.append(("tv%d" % w, lambda w=w: torchvision_rate(root, w)))
        jobs.append(("rtv", lambda: torchvision_rate(root, 2, recipe=True)))
        jobs.append(("roff", lambda: zp_run(bin_dir, work, root, "recipe-off-%d" % (r + 1), 2, "loader.workers=2",
                                            "cache.enabled=false", *RECIPE)))
        for enc in ("raw", "jpeg"):
            jobs.append(("r" + enc, lambda enc=enc: zp_run(bin_dir, work, root, "recipe-%s-%d" % (enc, r + 1), 3,
                                                          "loader.workers=2", "cache.enabled=true",
                                                          "cache.path=" + cache + "-" + enc,
                                                          "cache.encoding=" + enc, *RECIPE)))
        for key, fn in jobs:
            if wait_quiet:
                quiet()
            warm_files(root)
            with Others() as o:
                out = fn()
            if key == "ceiling":
                parts = parts or out
                record(key, r, out["get_per_s"], o.cores)
            elif key == "cache":
                shutil.rmtree(cache)
                record("cold", r, out["train"][0]["samples_per_s"], o.cores, out)
                record("warm", r, out["rates"][2], o.cores, out)
            elif key in ("rraw", "rjpeg"):
                enc = key[1:]
                sizes[enc] = cache_bytes(cache + "-" + enc)
                shutil.rmtree(cache + "-" + enc)
                pre = "r" if enc == "raw" else "j"
                record(pre + "cold", r, out["train"][0]["samples_per_s"], o.cores, out)
                record(pre + "warm", r, out["rates"][2], o.cores, out)
            elif key.startswith("zp") or key == "roff":
                record(key, r, out["rates"][1], o.cores, out)
            else:
                record(key, r, out, o.cores)
            if key == "rtv" or key == "roff" or key in ("rraw", "rjpeg"):
                images = 2 * tv_images(root) if key == "rtv" else out["images"]
                used = o.own_cpu if key == "rtv" else sum(out["cpu"].values())
                cpu[key] = 1e3 * used / images
    return got, runs, parts, cpu, sizes


def tv_images(root):
    return sum(len(f) for _, _, f in os.walk(os.path.join(root, "train")))


# ---- (e) accuracy: the ResNet example both ways ---------------------------------------------------------

EXAMPLES = os.path.join(HERE, "..", "python", "examples")
RESNET = os.path.join(EXAMPLES, "image_resnet.py")
ACC_SEED, ACC_LR, ACC_WORKERS = 1, 0.05, 2  # image_resnet.py's torch.manual_seed and --lr default
ACC_SCALE, ACC_RATIO = (0.08, 1.0), (3 / 4, 4 / 3)  # torchvision's RandomResizedCrop defaults


def image_resnet():
    """python/examples/image_resnet.py as a module (build, train_epoch, test_epoch, DevicePrep)."""
    sys.path.insert(0, EXAMPLES)
    import image_resnet as m
    return m


def acc_dataloader(root, b, threads):
    """The DataLoader side: [(test loss, test accuracy)] per epoch and the wall
    seconds of its epochs (train and test)."""
    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    ir = image_resnet()
    torch.set_num_threads(threads)  # what a fresh process gets, as the zeus-pipe trainer does
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_tf = transforms.Compose([transforms.RandomResizedCrop(b["crop"], scale=ACC_SCALE, ratio=ACC_RATIO),
                                   transforms.RandomHorizontalFlip(), transforms.PILToTensor()])
    test_tf = transforms.Compose([transforms.Resize(b["resize"]), transforms.CenterCrop(b["crop"]),
                                  transforms.PILToTensor()])
    train_ds = datasets.ImageFolder(os.path.join(root, "train"), transform=train_tf)
    test_ds = datasets.ImageFolder(os.path.join(root, "val"), transform=test_tf)
    train = DataLoader(train_ds, batch_size=b["batch"], shuffle=True, num_workers=ACC_WORKERS,
                       persistent_workers=True, generator=torch.Generator().manual_seed(ACC_SEED))
    test = DataLoader(test_ds, batch_size=b["batch"], num_workers=ACC_WORKERS, persistent_workers=True)
    torch.manual_seed(ACC_SEED)  # as image_resnet.main: the same initial weights
    model, opt, sched = ir.build(len(train_ds.classes), b["epochs"], ACC_LR, device)
    prep = ir.DevicePrep(device, MEAN, STD, 0, seed=ACC_SEED)  # normalises (train=False: no crop, no flip)
    got, t0 = [], time.perf_counter()
    for epoch in range(b["epochs"]):
        ir.train_epoch(model, opt, sched, train, prep, train=False)
        got.append(ir.test_epoch(model, test, prep))
        print("image_bench: (e) DataLoader epoch %d: test accuracy %.4f" % (epoch + 1, got[-1][1]), flush=True)
    wall = time.perf_counter() - t0
    del train, test  # joins the workers
    return got, wall


def acc_zeus(bin_dir, work, root, b):
    """The zeus-pipe side: `warm`, then `up` of a config written into `work`
    running image_resnet.py --no-augment; [(test loss, test accuracy)] per
    epoch from its metrics.jsonl, and the wall seconds of warm and of up."""
    cfg = os.path.join(work, "accuracy.yaml")
    q = json.dumps  # double-quoted YAML scalars for paths
    with open(cfg, "w") as f:
        f.write("""# image_bench.py part (e): the ResNet example with the pipeline's recipe
run: {name: accuracy}
seed: %d
dataset:
  source: image_folder
  path: %s
  image: {train: train, test: val, resize: %d, crop: %d}
  mean: %s
  std: %s
  dtype: uint8
  augment:
    resized_crop: true
    scale: [%r, %r]
    ratio: [%r, %r]
    hflip: true
    crop_padding: 0
cache:
  enabled: true
  path: %s
loader:
  workers: %d
prefetch:
  batch_size: %d
  shuffle: true
trainer:
  epochs: %d
  command: [%s, %s, --no-augment, --lr, %r]
""" % (ACC_SEED, q(root), b["resize"], b["crop"], MEAN, STD, ACC_SCALE[0], ACC_SCALE[1], ACC_RATIO[0],
       ACC_RATIO[1], q(os.path.join(work, "accuracy-cache")), ACC_WORKERS, b["batch"], b["epochs"],
       q(sys.executable), q(os.path.abspath(RESNET)), ACC_LR))
    zp = os.path.join(bin_dir, "zeus-pipe")
    walls = []
    for cmd in ([zp, "warm", cfg], [zp, "up", cfg]):
        t0 = time.perf_counter()
        p = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
        walls.append(time.perf_counter() - t0)
        if p.returncode:
            sys.exit("image_bench: %s failed (%d):\n%s%s" % (" ".join(cmd), p.returncode, p.stdout[-2000:],
                                                             p.stderr[-3000:]))
    run = os.path.join(work, "runs", "accuracy")
    got = {r["epoch"]: (r["loss"], r["accuracy"]) for r in records(os.path.join(run, "metrics.jsonl"))
           if r.get("event") == "test_epoch"}
    if sorted(got) != list(range(b["epochs"])):
        sys.exit("image_bench: %s: test_epoch records for epochs %s, not 0..%d" % (run, sorted(got), b["epochs"] - 1))
    ends = [r for r in records(os.path.join(run, "metrics.jsonl"))
            if r.get("event") == "epoch_end" and r["split"] == "train"]
    bad = [r["epoch"] for r in ends if not r["samples"] == r["distinct"] == r["expected_samples"]]
    if bad or len(ends) != b["epochs"]:
        sys.exit("image_bench: %s: %d train epochs recorded, epochs %s incomplete" % (run, len(ends), bad))
    for e in sorted(got):
        print("image_bench: (e) zeus-pipe epoch %d: test accuracy %.4f" % (e + 1, got[e][1]), flush=True)
    return [got[e] for e in sorted(got)], walls[0], walls[1]


def accuracy(bin_dir, b, threads):
    """Part (e): generates its folder, trains both sides, prints the table."""
    root = b["root"]
    n, size = make_images.make(root, b["train"], b["val"])
    print("image_bench: (e) %s: %d images, %.0f KB average" % (root, n, size / n / 1024), flush=True)
    with tempfile.TemporaryDirectory(prefix="zp-image-acc-", dir=os.path.join(HERE, "out")) as d:
        tv, tv_wall = acc_dataloader(root, b, threads)
        zp, warm_wall, up_wall = acc_zeus(bin_dir, d, root, b)
    import torch
    device = "GPU (%s)" % torch.cuda.get_device_name() if torch.cuda.is_available() else \
        "CPU, %d torch thread%s" % (threads, "s" * (threads != 1))
    print()
    print("(e) accuracy, ResNet-18 from scratch on %s: %d train / %d val images, %d classes; train RandomResizedCrop "
          "%d (scale 0.08-1, ratio 3/4-4/3) + flip, test resize %d + center crop %d; %d epoch%s, batch %d, "
          "SGD lr %g cosine, seed %d; 2 workers / loaders each side"
          % (device, b["train"], b["val"], len(make_images.CLASSES), b["crop"], b["resize"], b["crop"],
             b["epochs"], "s" * (b["epochs"] != 1), b["batch"], ACC_LR, ACC_SEED))
    print("    different random crops each side (different generators): they agree within noise, not bit for bit")
    print()
    print("%-8s %15s %10s   %19s %10s" % ("epoch", "DataLoader: acc", "test loss", "zeus-pipe warm: acc",
                                            "test loss"))
    for e, (a, z) in enumerate(zip(tv, zp)):
        print("%-8d %15.4f %10.3f   %19.4f %10.3f" % (e + 1, a[1], a[0], z[1], z[0]))
    a, z = tv[-1][1], zp[-1][1]
    se = max(a * (1 - a), z * (1 - z)) ** 0.5 / max(b["val"], 1) ** 0.5
    print("%-8s %15.4f %10s   %19.4f %10s   difference %+.4f (test-set standard error %.4f each)"
          % ("final", a, "", z, "", z - a, se))
    print("%-8s %15.1f %10s   %19.1f %10s   (zeus-pipe: `up`; its `warm` took %.1f s more)"
          % ("wall s", tv_wall, "", up_wall, "", warm_wall))


def acc_budget(a, quick, gpu):
    """Part (e)'s budget from the options: each unset one defaults by mode."""
    d = dict(train=make_images.QUICK[0], val=make_images.QUICK[1], crop=32, epochs=1, batch=16) if quick else \
        dict(train=5000, val=500, crop=112, epochs=6, batch=64) if gpu else \
        dict(train=2000, val=500, crop=64, epochs=4, batch=64)
    b = {k: getattr(a, "acc_" + k) if getattr(a, "acc_" + k) is not None else v for k, v in d.items()}
    b["resize"] = a.acc_resize or b["crop"] * 9 // 8
    if (b["train"], b["val"]) == make_images.QUICK:
        b["root"] = make_images.quick_folder(HERE)
    elif (b["train"], b["val"]) == (5000, 500):
        b["root"] = os.path.join(HERE, "out", "images")
    else:
        b["root"] = os.path.join(HERE, "out", "images-%dx%d" % (b["train"], b["val"]))
    return b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bin_dir", nargs="?", default="build", help="build folder with zeus-pipe and zp-bench-jpeg")
    ap.add_argument("--quick", action="store_true", help="40 train images, 1 round, no wait for quiet")
    ap.add_argument("--repeats", type=int, help="rounds a best is taken of (default 3)")
    ap.add_argument("--images", help="folder of the generated images (default bench/out/images[-quick-40x10])")
    ap.add_argument("--train", type=int, default=5000, help="train images to generate (default 5000)")
    ap.add_argument("--val", type=int, default=500, help="val images to generate (default 500)")
    ap.add_argument("--no-wait", action="store_true", help="measure without waiting for a quiet machine")
    ap.add_argument("--only", choices=("speed", "accuracy"), help="parts (a)-(d) only, or (e) only")
    g = ap.add_argument_group("(e) accuracy (defaults: CPU / GPU; --quick: 40 and 10 images, crop 32, 1 "
                              "epoch, batch 16)")
    g.add_argument("--acc-train", type=int, help="train images of its folder (default 2000 / 5000)")
    g.add_argument("--acc-val", type=int, help="val images of its folder (default 500)")
    g.add_argument("--acc-epochs", type=int, help="epochs each side (default 4 / 6)")
    g.add_argument("--acc-crop", type=int, help="crop size (default 64 / 112)")
    g.add_argument("--acc-resize", type=int, help="test split's shorter side before the crop (default crop*9/8)")
    g.add_argument("--acc-batch", type=int, help="batch size (default 64)")
    a = ap.parse_args()
    skip_without_torch(a.quick, "image_bench")
    bin_dir = os.path.abspath(a.bin_dir)
    for b in ("zeus-pipe",) if a.only == "accuracy" else ("zeus-pipe", "zp-bench-jpeg"):
        if not os.access(os.path.join(bin_dir, b), os.X_OK):
            sys.exit("image_bench: %s/%s is missing: build first (cmake --build %s)" % (bin_dir, b, a.bin_dir))
    try:  # torch's own thread count, before (c) and (d) set 1: what (e)'s DataLoader side gets back
        import torch
        threads, gpu = torch.get_num_threads(), torch.cuda.is_available()
    except ImportError:  # a full run fails where it needs torch
        threads, gpu = 1, False
    os.makedirs(os.path.join(HERE, "out"), exist_ok=True)
    if a.only != "accuracy":
        speed(a, bin_dir)
    if a.only != "speed":
        if a.only is None:
            print()
        accuracy(bin_dir, acc_budget(a, a.quick, gpu), threads)


def speed(a, bin_dir):
    """Parts (a)-(d): generates the folder, measures, prints."""
    train, val = make_images.QUICK if a.quick else (a.train, a.val)
    reps = a.repeats or (1 if a.quick else 3)
    root = os.path.abspath(a.images or (make_images.quick_folder(HERE) if a.quick else
                                        os.path.join(HERE, "out", "images" if (train, val) == (5000, 500) else
                                                     "images-%dx%d" % (train, val))))
    n, size = make_images.make(root, train, val)
    print("image_bench: %s: %d images, %.0f KB average" % (root, n, size / n / 1024), flush=True)
    with tempfile.TemporaryDirectory(prefix="zp-image-bench-", dir=os.path.join(HERE, "out")) as d:
        got, runs, parts, cpu, sizes = measure_all(bin_dir, root, reps, d, not (a.quick or a.no_wait))
    best = {k: max(v)[0] for k, v in got.items()}
    c = best["ceiling"]
    images = parts["images"]

    cpu_name = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print()
    print("machine: %s, %d cores; %d train images, %.0f KB average JPEG; resize %d, crop %d, batch %d, shuffle"
          % (cpu_name, os.cpu_count(), images, parts["bytes"] / images / 1024, RESIZE, CROP, BATCH))
    print("each figure: the best of %d rounds; files in page cache; (N): cores other processes used meanwhile" % reps)
    print()
    print("%-64s %9s   %s" % ("", "images/s", "each round"))
    for key, name in ROWS:
        print("%-64s %9.0f   %s" % (name, best[key], "  ".join("%.0f (%.1f)" % x for x in got[key])))
    print("%-64s %9s   read %.0f/s, TurboJPEG decode %.0f/s, normalise %.0f/s"
          % ("     (a) in parts, one pass each", "", parts["read_per_s"], parts["decode_per_s"],
             parts["normalize_per_s"]))
    print()

    def target(name, v, goal):
        print("%-42s %6.2f   target >= %.2f  %s" % (name, v, goal, "met" if v >= goal else "MISSED"))
    target("zeus-pipe(1) / (1 x ceiling)", best["zp1"] / c, 0.90)
    target("zeus-pipe(2) / (2 x ceiling)", best["zp2"] / (2 * c), 0.90)
    target("zeus-pipe(1) / torchvision(1)", best["zp1"] / best["tv1"], 2.0)
    target("zeus-pipe(2) / torchvision(2)", best["zp2"] / best["tv2"], 2.0)
    print("%-42s %6.2f" % ("zeus-pipe(2) float32 / torchvision(2)", best["zp2f"] / best["tv2"]))
    for name, v in (("warm epoch / zeus-pipe(2) cache off", best["warm"] / best["zp2"]),
                    ("warm epoch / torchvision(2)", best["warm"] / best["tv2"]),
                    ("warm epoch / (2 x ceiling)", best["warm"] / (2 * c)),
                    ("cold epoch / zeus-pipe(2) cache off", best["cold"] / best["zp2"])):
        print("%-42s %6.2f" % (name, v))
    print()
    print("where the time goes, in the runs behind the best figures (CPU ms per image, all instances of a\n"
          "stage; busy share):")
    for key, name in (("zp1", "1 loader "), ("zp2", "2 loaders"), ("zp2f", "2, float32"), ("warm", "cache on ")):
        print("  %s  %s" % (name, share(runs[key])))
    for key, name in (("zp1", "1 loader"), ("zp2", "2 loaders"), ("zp2f", "2 loaders, float32")):
        run = runs[key]
        print("  %s: get() %.2f ms and normalise %.2f ms per image (wall, in the loaders); ceiling get() %.2f ms"
              % (name, region_ms(run, "loader", "read"), region_ms(run, "loader", "transform"), 1e3 / c))
    print()
    print("the recipe (RandomResizedCrop 224 + flip, uint8), 2 workers / loaders each side:")
    for name, v, goal in (("cache off / DataLoader", best["roff"] / best["rtv"], 2.0),
                          ("warm raw / DataLoader", best["rwarm"] / best["rtv"], 10.0),
                          ("warm jpeg / DataLoader", best["jwarm"] / best["rtv"], 3.0)):
        target(name, v, goal)
    print("  CPU, core-seconds per 1,000 images: DataLoader %.2f; zeus-pipe cache off %.2f, raw cache (3 epochs) "
          "%.2f, jpeg cache (3 epochs) %.2f" % (cpu.get("rtv", 0), cpu.get("roff", 0), cpu.get("rraw", 0),
                                                cpu.get("rjpeg", 0)))
    for enc, (b, n) in sorted(sizes.items()):
        print("  cache.encoding %-4s: %8.0f bytes per image (%d train images kept, longer side 320)" % (enc, b, n))
    run = runs["cold"]
    print("  cache on: lmdb_put %.2f ms per image of epoch 1 (cache stage); lmdb_get %.2f and collate %.2f ms per "
          "image (prefetch, 3 epochs)" % (region_ms(run, "cache", "lmdb_put", images), region_ms(run, "prefetch", "lmdb_get"),
                                         region_ms(run, "prefetch", "collate")))


if __name__ == "__main__":
    main()

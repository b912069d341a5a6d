#!/usr/bin/python3
"""A photo Dataset's random augmentation with the cache: zeus-pipe against DataLoader, in one run.

The workshop's Dataset: a folder of JPEGs (bench/make_images.py: about
500x375, 10 classes) whose __getitem__ decodes with PIL and applies
torchvision's RandomResizedCrop(96) + RandomHorizontalFlip + ToTensor +
Normalize. Side by side, 2 workers / loaders each, batch 64, shuffled, the
loop reading every batch (x.float().sum()):

  DataLoader      WorkshopPhotos (python/examples/custom_dataset.py): the
                  transforms inside __getitem__, DataLoader(num_workers=2,
                  persistent_workers=True); epochs after the first
  zeus-pipe cold  Photos (decode + resize to 128 x 128 in __getitem__) with
                  train_augment (RandomResizedCrop(96) + flip + normalise)
                  as dataset.python.augment.train, the cache on and empty:
                  the first epoch (every image decoded and cached), from its
                  first batch (the start-up not counted, as DataLoader's
                  first epoch is not)
  zeus-pipe warm  the same on the filled cache: epochs after the first (the
                  loaders read each cached 128 px image and run the step)

  zeus-pipe built-in  the same Photos with dataset.augment's resized_crop
                  and hflip on its image field (size 96) instead of the Python
                  step: made by the prefetch readers in C from the cached
                  record, the package normalising the uint8 crop; epochs after
                  the first, on the same warm cache

Accuracy (--only accuracy, or both by default): the ResNet-18 of
python/examples/image_resnet.py (build, train_epoch, test_epoch; SGD lr
0.05, cosine) trained the same epochs both ways from the same initial
weights (torch.manual_seed(1)) on --acc-crop px crops, test accuracy printed
per epoch side by side. The two sides draw different crops (different
generators; zeus-pipe crops the cached square), so they agree within the
run-to-run noise, not bit for bit.

Targets on a 2-core machine: warm with the Python step >= 2x DataLoader,
with the built-in ops >= 8x; accuracy within noise.

Run: /usr/bin/python3 bench/augment_bench.py [BUILD_DIR] [--quick] [--only speed|accuracy]
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = os.path.join(ROOT, "python", "examples")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, EXAMPLES)
sys.path.insert(0, HERE)

STEPS = '''
import custom_dataset as cd
def train_step(item):
    return cd.train_augment(item, {crop})
def test_step(item):
    return cd.test_augment(item, {crop})
'''
WORKERS, BATCH, SEED, LR = 2, 64, 1, 0.05


def loop(batches, after_first=False):
    """Every batch read; returns the samples (with after_first: those after
    the first batch, and the seconds since it came)."""
    n, t0 = 0, None
    for x, y in batches:
        x.float().sum()
        if t0 is None and after_first:
            t0 = time.perf_counter()
            continue
        n += len(y)
    return (n, time.perf_counter() - t0) if after_first else n


def dataloader(root, split, crop, shuffle=True):
    import torch
    from torch.utils.data import DataLoader
    from custom_dataset import WorkshopPhotos
    ds = WorkshopPhotos(root, split, crop=crop)
    return DataLoader(ds, batch_size=BATCH, shuffle=shuffle, num_workers=WORKERS,
                      persistent_workers=True, generator=torch.Generator().manual_seed(SEED))


def attach(tmp, root, crop, name, epochs, builtin=False):
    """zeus-pipe Python-first on Photos and the Python steps (or, builtin:
    dataset.augment's ops on its image field), the cache in tmp/cache."""
    import zeus_pipe
    from custom_dataset import MEAN, STD
    cfg = os.path.join(tmp, "augment.yaml")
    with open(cfg, "w") as f:
        f.write("seed: %d\ndataset:\n  source: python\n  python:\n    class: custom_dataset:Photos\n"
                "    path: [%s, %s]\n    args: {root: %s, size: %d}\n"
                "    splits: {train: {split: train}, test: {split: val}}\n    interpreter: %s\n"
                % (SEED, EXAMPLES, tmp, root, crop * 4 // 3, sys.executable))
        if builtin:  # the package hands the uint8 crop out normalised
            f.write("    normalize: image\n")
            f.write("  augment: {resized_crop: true, hflip: true, size: %d}\n  mean: %s\n  std: %s\n"
                    % (crop, list(MEAN), list(STD)))
        else:
            f.write("    augment: {train: 'zp_steps:train_step', test: 'zp_steps:test_step'}\n")
    over = {"run.dir": os.path.join(tmp, "runs"), "run.name": name, "loader.workers": WORKERS,
            "prefetch.batch_size": BATCH, "trainer.epochs": epochs, "cache.enabled": True,
            "cache.path": os.path.join(tmp, "cache")}
    return zeus_pipe.attach(config=cfg, overrides=over, timeout_s=900)


def speed(tmp, root, epochs):
    dl = dataloader(root, "train", 96)
    loop(dl)  # the workers start
    t0, n = time.perf_counter(), 0
    for _ in range(epochs - 1):
        n += loop(dl)
    rate_dl = n / (time.perf_counter() - t0)
    del dl
    rates = {}
    for name in ("cold", "warm", "builtin"):
        with attach(tmp, root, 96, name, epochs, builtin=name == "builtin") as zp:
            got = []
            for epoch in range(epochs):
                if epoch == 0 and name == "cold":  # from the first batch: not the start-up
                    got.append(loop(zp.train, after_first=True))
                else:
                    t0 = time.perf_counter()
                    got.append((loop(zp.train), time.perf_counter() - t0))
                loop(zp.test)
        if name == "cold":
            rates[name] = got[0][0] / got[0][1]
        else:
            rates[name] = sum(k for k, _ in got[1:]) / sum(s for _, s in got[1:])
    print("\nspeed: train images/s, %d workers / loaders each, batch %d, crop 96" % (WORKERS, BATCH))
    print("%-44s %10s %9s" % ("", "images/s", "ratio"))
    print("%-44s %10.0f %8.2fx" % ("DataLoader (transforms in __getitem__)", rate_dl, 1))
    print("%-44s %10.0f %8.2fx" % ("zeus-pipe cold (decode, cache, step)", rates["cold"],
                                   rates["cold"] / rate_dl))
    print("%-44s %10.0f %8.2fx   (target >= 2x)" % ("zeus-pipe warm (Python augment step)",
                                                     rates["warm"], rates["warm"] / rate_dl))
    print("%-44s %10.0f %8.2fx   (target >= 8x)" % ("zeus-pipe warm (built-in ops, C)",
                                                     rates["builtin"], rates["builtin"] / rate_dl))


def accuracy(tmp, root, crop, epochs):
    import torch
    import image_resnet as ir
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    prep = ir.DevicePrep(device, (0, 0, 0), (1, 1, 1), 0, seed=SEED)  # float batches: as they are
    classes = len(os.listdir(os.path.join(root, "train")))
    results = {}
    for side in ("DataLoader", "zeus-pipe", "built-in"):
        torch.manual_seed(SEED)  # the same initial weights
        model, opt, sched = ir.build(classes, epochs, LR, device)
        accs = []
        if side == "DataLoader":
            train, test = dataloader(root, "train", crop), dataloader(root, "val", crop, False)
            for _ in range(epochs):
                ir.train_epoch(model, opt, sched, train, prep, train=False)
                accs.append(ir.test_epoch(model, test, prep)[1])
            del train, test
        else:
            with attach(tmp, root, crop, side, epochs, builtin=side == "built-in") as zp:
                for _ in range(epochs):
                    ir.train_epoch(model, opt, sched, zp.train, prep, train=False)
                    accs.append(ir.test_epoch(model, zp.test, prep)[1])
        results[side] = accs
        print("augment_bench: accuracy, %s: %s" % (side, " ".join("%.4f" % a for a in accs)),
              flush=True)
    n_val = sum(len(f) for _, _, f in os.walk(os.path.join(root, "val")))
    a, z, c = results["DataLoader"][-1], results["zeus-pipe"][-1], results["built-in"][-1]
    se = max(a * (1 - a), z * (1 - z), c * (1 - c), 1e-9) ** 0.5 / max(n_val, 1) ** 0.5
    print("\naccuracy: ResNet-18 from scratch, %d epochs, crop %d, batch %d, SGD lr %g, seed %d"
          % (epochs, crop, BATCH, LR, SEED))
    print("%-8s %12s %16s %16s" % ("epoch", "DataLoader", "zeus-pipe step", "zeus-pipe built-in"))
    for e, (x, y, w) in enumerate(zip(results["DataLoader"], results["zeus-pipe"],
                                      results["built-in"])):
        print("%-8d %12.4f %16.4f %16.4f" % (e + 1, x, y, w))
    print("final difference %+.4f (step), %+.4f (built-in) (test-set standard error %.4f each; "
          "%d val images)" % (z - a, c - a, se, n_val))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--quick", action="store_true", help="40 train images, 2 epochs: seconds (CI)")
    ap.add_argument("--only", choices=("speed", "accuracy"), help="one part (default: both)")
    ap.add_argument("--images", type=int, default=2000, help="train images (default 2000)")
    ap.add_argument("--epochs", type=int, help="speed part's epochs (default 4; --quick 2)")
    ap.add_argument("--acc-epochs", type=int, help="accuracy part's epochs (default 4; --quick 1)")
    ap.add_argument("--acc-crop", type=int, default=64, help="accuracy part's crop (default 64)")
    args = ap.parse_args()
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
        import PIL  # noqa: F401
    except ImportError as e:
        print("skipped: %s has no %s" % (sys.executable, e.name))
        sys.exit(77)
    import make_images
    build = os.path.abspath(args.build)
    from dataset_bench import use_build
    use_build(build)
    if args.quick:
        root = make_images.quick_folder(HERE)
        make_images.make(root, *make_images.QUICK)
    else:
        root = os.path.join(HERE, "out", "images-%dx%d" % (args.images, args.images // 4))
        make_images.make(root, args.images, args.images // 4)
    epochs = args.epochs or (2 if args.quick else 4)
    acc_epochs = args.acc_epochs or (1 if args.quick else 4)
    print("machine: %d cores; %s" % (os.cpu_count() or 0, root), flush=True)
    for part in ("speed", "accuracy"):
        if args.only and args.only != part:
            continue
        tmp = tempfile.mkdtemp(prefix="zp-augbench-")
        sys.path.insert(0, tmp)
        with open(os.path.join(tmp, "zp_steps.py"), "w") as f:
            f.write(STEPS.format(crop=96 if part == "speed" else args.acc_crop))
        try:
            if part == "speed":
                speed(tmp, root, epochs)
            else:
                sys.modules.pop("zp_steps", None)
                accuracy(tmp, root, args.acc_crop, acc_epochs)
        finally:
            sys.path.remove(tmp)
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

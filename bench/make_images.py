#!/usr/bin/python3
"""A synthetic ImageNet-like folder for the image benchmark: OUT/train/CLASS/*.jpg
and OUT/val/CLASS/*.jpg, 10 classes, JPEG quality 90, about 500x375 (sizes vary
a little, one in five is portrait). The content is made for JPEG to work on as
it does on photos: a smooth background, soft-edged shapes, textured noise at a
few scales; files come out around 50-150 KB. Every image is a function of
(seed, split, class, number), so the same arguments give the same files.
Does nothing when OUT already holds the expected files.

usage: /usr/bin/python3 bench/make_images.py OUT [--train 5000] [--val 500] [--seed 0] [--jobs 2]
       /usr/bin/python3 bench/make_images.py OUT --quick   (what the test suite
       runs, and the benchmarks' --quick folders: QUICK's 40 train, 10 val)
"""
import argparse
import multiprocessing
import os
import sys
import time

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

CLASSES = ["n%02d_%s" % (i, name) for i, name in enumerate(
    ("tench", "goldfish", "shark", "ray", "hen", "ostrich", "finch", "junco", "robin", "jay"))]


def picture(seed, cls):
    """One RGB image as a PIL Image; `cls` tints the palette."""
    rng = np.random.default_rng(seed)
    w = int(rng.integers(440, 541))
    h = int(round(w * 3 / 4 * rng.uniform(0.92, 1.08)))
    if rng.random() < 0.2:
        w, h = h, w
    # smooth background: a 4x3 grid of colours blown up bicubically
    base = np.array([(37 * cls) % 256, (91 * cls + 60) % 256, (53 * cls + 120) % 256], np.float32)
    grid = np.clip(base + rng.normal(0, 60, (3, 4, 3)), 0, 255).astype(np.uint8)
    img = Image.fromarray(grid).resize((w, h), Image.BICUBIC)
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(15, 40))):  # shapes large and small, softened below
        x0, y0 = rng.integers(-w // 4, w), rng.integers(-h // 4, h)
        x1, y1 = x0 + rng.integers(w // 30, w // 2), y0 + rng.integers(h // 30, h // 2)
        fill = tuple(int(v) for v in np.clip(base + rng.normal(0, 80, 3), 0, 255))
        kind = rng.random()
        box = [int(x0), int(y0), int(x1), int(y1)]
        if kind < 0.4:
            draw.ellipse(box, fill=fill)
        elif kind < 0.8:
            draw.rectangle(box, fill=fill)
        else:
            draw.line(box, fill=fill, width=int(rng.integers(2, 8)))
    img = img.filter(ImageFilter.GaussianBlur(float(rng.uniform(0.8, 1.8))))
    a = np.asarray(img, np.float32)
    # texture at three scales (surface detail), then grain (sensor noise, mostly in luminance)
    for div, amp in ((16, 0.3), (4, 0.25), (2, 0.2)):
        n = Image.fromarray(rng.normal(128, 40, (h // div, w // div)).clip(0, 255).astype(np.uint8))
        a += (np.asarray(n.resize((w, h), Image.BICUBIC), np.float32) - 128)[..., None] * amp
    grain = rng.normal(0, float(rng.uniform(7.0, 14.0)), (h, w, 1)) + rng.normal(0, 3.0, (h, w, 3))
    a += grain.astype(np.float32)
    return Image.fromarray(a.clip(0, 255).astype(np.uint8))


def jobs(out, train, val, seed):
    """(path, seed, class) of every file, `n` images spread evenly over the classes."""
    todo = []
    for split, n, s in (("train", train, 0), ("val", val, 1)):
        for i in range(n):
            cls = i % len(CLASSES)
            path = os.path.join(out, split, CLASSES[cls], "%s_%06d.jpg" % (split, i))
            todo.append((path, (seed * 2 + s) * 10_000_000 + i, cls))
    return todo


def write(job):
    path, seed, cls = job
    tmp = path + ".tmp"
    picture(seed, cls).save(tmp, "JPEG", quality=90)
    os.rename(tmp, path)  # a killed run never leaves a half-written .jpg
    return os.path.getsize(path)


QUICK = (40, 10)  # train and val images of the benchmarks' --quick runs


def quick_folder(here):
    """The folder of the --quick images under bench/out (named by its counts,
    so that a folder of other counts is never mistaken for it)."""
    return os.path.join(here, "out", "images-quick-%dx%d" % QUICK)


def make(out, train, val, seed=0, n_jobs=2):
    """Writes what is missing; returns (files, bytes) of the whole folder."""
    todo = jobs(out, train, val, seed)
    for split in ("train", "val"):
        for c in CLASSES:
            os.makedirs(os.path.join(out, split, c), exist_ok=True)
    missing = [j for j in todo if not os.path.exists(j[0])]
    stamp = os.path.join(out, "params.txt")
    params = "train=%d val=%d seed=%d\n" % (train, val, seed)
    if os.path.exists(stamp) and open(stamp).read() != params:
        sys.exit("%s: made with %s, not %s: remove the folder or pick another"
                 % (out, open(stamp).read().strip(), params.strip()))
    names = [os.path.join(out, split, c, f) for split in ("train", "val") for c in CLASSES
             for f in os.listdir(os.path.join(out, split, c))]
    for f in names:
        if f.endswith(".tmp"):  # left by a killed run
            os.remove(f)
    extra = sum(not f.endswith(".tmp") for f in names) - len(todo)
    if extra > 0:
        sys.exit("%s: holds %d files this script did not make: remove them" % (out, extra))
    if missing:
        print("make_images: writing %d of %d images into %s" % (len(missing), len(todo), out), flush=True)
        t0, done, size = time.time(), 0, 0
        with multiprocessing.Pool(n_jobs) as pool:
            for b in pool.imap_unordered(write, missing, chunksize=16):
                done, size = done + 1, size + b
                if done % 500 == 0 or done == len(missing):
                    print("  %d/%d  %.0f KB average  %.0f s" % (done, len(missing), size / done / 1024,
                                                              time.time() - t0), flush=True)
        with open(stamp, "w") as f:
            f.write(params)
    total = sum(os.path.getsize(j[0]) for j in todo)
    return len(todo), total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--train", type=int, default=5000)
    ap.add_argument("--val", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="%d train and %d val images" % QUICK)
    a = ap.parse_args()
    if a.quick:
        a.train, a.val = QUICK
    n, size = make(a.out, a.train, a.val, a.seed, a.jobs)
    print("make_images: %s holds %d images, %.1f MB (%.0f KB average)" % (a.out, n, size / 1e6, size / n / 1024))


if __name__ == "__main__":
    main()

"""Datasets for test_python_dataset.py: every field a function of the index
(and of the seeded generators), so a consumer can check each sample it gets."""
import os
import random
import time
import sys

import numpy as np


class Fields:
    """A dict of fields: image uint8 3x8x8 = index % 256, target float32 [2] =
    index, label (a Python int) = index % 7, noise (a Python float) drawn from
    Python's random, seeded by the loader from (seed, split, epoch, index)."""

    def __init__(self, n=300, fail_at=-1, hang_at=-1, marker="", odd_at=-1, bad_type=False,
                 cost_ms=0):
        self.n, self.fail_at, self.hang_at, self.marker = n, fail_at, hang_at, marker
        self.cost = cost_ms / 1000
        self.odd_at, self.bad_type = odd_at, bad_type

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.cost:
            time.sleep(self.cost)
        if i == self.fail_at:
            raise KeyError("no sample %d here" % i)
        if i == self.hang_at and self.marker and not os.path.exists(self.marker):
            open(self.marker, "w").close()  # the first loader to get here hangs; the next goes on
            time.sleep(3600)
        image = np.full((3, 8, 8), i % 256, np.uint8)
        target = np.full((2,), i, np.float32)
        if i == self.odd_at:
            target = np.zeros((3,), np.float32)
        item = {"image": image, "target": target, "label": i % 7, "noise": random.random()}
        if self.bad_type:
            item["name"] = "sample-%d" % i
        return item


class Regression:
    """(x, y): x float32 1x4x4 = index, y a float32 1x4x4 image = 2 x index."""

    def __init__(self, n=200, split="train"):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return np.full((1, 4, 4), i, np.float32), np.full((1, 4, 4), 2.0 * i, np.float32)


class Raises:
    """A constructor that fails, as a wrong root would."""

    def __init__(self, **kw):
        raise FileNotFoundError("no such root: /nowhere/pets")


class Empty:
    def __init__(self, **kw):
        pass

    def __len__(self):
        return 0

    def __getitem__(self, i):
        raise IndexError(i)


class Waiting:
    """(image uint8 1x8x8 = index % 256, label = index % 4), each item after
    `wait_ms` of sleep: a loader bound by latency (a network file system, a
    remote store), not by a CPU, so that more loaders fetch more whatever the
    machine's cores."""

    def __init__(self, n=1000, wait_ms=2.0):
        self.n, self.wait = n, wait_ms / 1000

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.wait)
        return np.full((1, 8, 8), i % 256, np.uint8), i % 4


class Noisy:
    """(image uint8 3x8x8, label): the image is index % 256 plus a draw of
    NumPy's global generator in 0..2, inside __getitem__ (a random transform
    where the cache would freeze it)."""

    def __init__(self, n=100, split="train"):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return np.full((3, 8, 8), i % 250 + np.random.randint(0, 3), np.uint8), i % 5


class Pictures:
    """The workshop's shape in miniature: __getitem__ is the deterministic
    part (an image uint8 3x16x16 whose pixel c, y, x is (index + 16 y + x + c)
    % 256, 16x16x3 with hwc, and label index % 5); crop8 below is the random
    part. With
    `calls` a folder, each loader process counts its __getitem__ calls in a
    file of its own there."""

    def __init__(self, n=300, calls="", split="train", cost_ms=0, hwc=False):
        self.n, self.calls, self.mine, self.cost, self.hwc = n, calls, None, cost_ms / 1000, hwc

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.cost:
            time.sleep(self.cost)
        if self.calls and os.path.basename(sys.argv[0]) == "_loader_process.py":  # not the probe
            if self.mine is None:
                self.mine = open(os.path.join(self.calls, "%d" % os.getpid()), "a", buffering=1)
            self.mine.write("%d\n" % i)
        image = picture(i)
        return (np.ascontiguousarray(image.transpose(1, 2, 0)) if self.hwc else image), i % 5


def picture(i):
    c, y, x = np.meshgrid(np.arange(3), np.arange(16), np.arange(16), indexing="ij")
    return ((i + 16 * y + x + c) % 256).astype(np.uint8)


def crop8(item):
    """A random 8x8 crop and flip of Pictures' image, drawn from NumPy's
    global generator (seeded per sample by the loader); the draw goes with
    the sample, for the test to check."""
    image, label = item
    y, x, flip = np.random.randint(0, 9), np.random.randint(0, 9), np.random.randint(0, 2)
    out = image[:, y:y + 8, x:x + 8]
    if flip:
        out = out[:, :, ::-1]
    return np.ascontiguousarray(out), label, np.array([y, x, flip], np.int64)


def center8(item):
    """The test split's step: the center 8x8, no flip."""
    image, label = item
    return np.ascontiguousarray(image[:, 4:12, 4:12]), label, np.array([4, 4, 0], np.int64)


def counted_photos(root, calls, split="train", size=48):
    """python/examples/custom_dataset.py's Photos (decode + resize, cached),
    each loader process counting its __getitem__ calls in a file of `calls`."""
    from custom_dataset import Photos

    class Counted(Photos):
        def __getitem__(self, i):
            if os.path.basename(sys.argv[0]) == "_loader_process.py":
                with open(os.path.join(calls, "%d" % os.getpid()), "a") as f:
                    f.write("%d\n" % i)
            return Photos.__getitem__(self, i)

    return Counted(root, split, size=size, per_class=20)


def photo_crop32(item):
    """The workshop's random part with torchvision: RandomResizedCrop(32) and a
    random flip of the cached uint8 tensor, float32 normalised."""
    import torch
    import torchvision.transforms as T
    image, label = item
    tf = T.Compose([T.RandomResizedCrop(32, antialias=True), T.RandomHorizontalFlip(),
                    T.ConvertImageDtype(torch.float32), T.Normalize((0.5,) * 3, (0.25,) * 3)])
    return tf(image), label


def photo_center32(item):
    import torch
    import torchvision.transforms as T
    image, label = item
    return T.ConvertImageDtype(torch.float32)(T.CenterCrop(32)(image)), label


class Shifted:
    """(image uint8 3x8x8 = (index + shift) % 256, label index % 5), `cost_ms`
    a sample: two configs that differ in `shift` are two datasets."""

    def __init__(self, n=400, shift=0, cost_ms=0, split="train"):
        self.n, self.shift, self.cost = n, shift, cost_ms / 1000

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.cost:
            time.sleep(self.cost)
        return np.full((3, 8, 8), (i + self.shift) % 256, np.uint8), i % 5


class Chatty(Shifted):
    """Shifted, printing 12,000 bytes when built and a line per item: the
    probe's answer must not drown in them."""

    def __init__(self, **kw):
        Shifted.__init__(self, **kw)
        print("x" * 11999)
        print("built a chatty Dataset")

    def __getitem__(self, i):
        print("item %d" % i)
        return Shifted.__getitem__(self, i)


class Forky(Shifted):
    """Shifted, starting a helper process wherever it is built (`sleep 400`,
    its pid appended to `helpers`: the probe, each loader) and forking at
    sample `fork_at` (the child appends
    its pid to `forks`, then sys.exit(0) as a careless Dataset's child does,
    or returns with the item when `child_returns`)."""

    def __init__(self, helpers="", forks="", fork_at=-1, child_returns=False, **kw):
        Shifted.__init__(self, **kw)
        self.forks, self.fork_at, self.child_returns = forks, fork_at, child_returns
        if helpers:
            import subprocess
            p = subprocess.Popen(["sleep", "400"])
            with open(helpers, "a") as f:
                f.write("%d\n" % p.pid)

    def __getitem__(self, i):
        if i == self.fork_at and os.fork() == 0:
            with open(self.forks, "a") as f:
                f.write("%d\n" % os.getpid())
            if not self.child_returns:
                sys.exit(0)
        return Shifted.__getitem__(self, i)


class Deadly(Shifted):
    """Shifted whose __getitem__ kills its process (SIGSEGV, as a crash in
    C code does) at sample `crash_at`, and never returns at `hang_at`, in
    every loader, every time."""

    def __init__(self, crash_at=-1, hang_at=-1, **kw):
        Shifted.__init__(self, **kw)
        self.crash_at, self.hang_at = crash_at, hang_at

    def __getitem__(self, i):
        if os.path.basename(sys.argv[0]) == "_loader_process.py":  # not in the probe
            if i == self.crash_at:
                import signal
                os.kill(os.getpid(), signal.SIGSEGV)
            if i == self.hang_at:
                time.sleep(3600)
        return Shifted.__getitem__(self, i)

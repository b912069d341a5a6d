"""Datasets for test_python_dataset.py: every field a function of the index
(and of the seeded generators), so a consumer can check each sample it gets."""
import os
import random
import time

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

"""custom_dataset.py — your own map-style Dataset through zeus-pipe:

  SlowImages    a folder of JPEGs decoded and transformed in a deliberately
                slow __getitem__ (PIL decode, resize, a per-pixel Python
                transform): an (image uint8 3xSxS, label) classification set
  Photos        a folder of photos decoded and resized in __getitem__ (what
                the cache keeps), with train_augment (torchvision's
                RandomResizedCrop + flip) run after the cache, every epoch:
                configs/photos-augment.yaml; WorkshopPhotos is the same with
                the random part inside __getitem__, as DataLoader reads it
  H5Regression  an HDF5 file (h5py) of input images and target images: an
                (x float32 1xSxS, y float32 1xSxS) regression set

Both make their data the first time they are built (a generated folder of
JPEGs, a generated .h5 file), so the configs run as written:

    zeus-pipe up configs/custom-dataset.yaml        # SlowImages, cached
    zeus-pipe up configs/h5-regression.yaml         # H5Regression

or Python-first, the script starting the pipeline itself:

    python3 python/examples/custom_dataset.py --config configs/custom-dataset.yaml

The loaders (python3 -m zeus_pipe._loader_process, as many as loader.workers) import
this module and call the Dataset's __getitem__; the cache keeps what it
returned, so from the second epoch (and the next run) nothing is decoded.
The training loop below is the DataLoader loop with one line changed:

    # before
    loader = DataLoader(SlowImages(root, split="train"), batch_size=64, shuffle=True,
                        num_workers=8, persistent_workers=True)
    for epoch in range(epochs):
        for x, y in loader:
            ...
    # after
    with zeus_pipe.attach() as zp:
        for epoch in range(epochs):
            for x, y in zp.train:
                ..."""
import argparse
import os
import sys

import numpy as np

CLASSES = ("circle", "square", "stripes")


def _make_images(root, per_class, size=96):
    """root/{train,val}/CLASS/*.jpg: shapes of random colours, for SlowImages."""
    from PIL import Image, ImageDraw
    rng = np.random.default_rng(0)
    for split, n in (("train", per_class), ("val", max(1, per_class // 4))):
        for c, name in enumerate(CLASSES):
            folder = os.path.join(root, split, name)
            os.makedirs(folder, exist_ok=True)
            for i in range(n):
                img = Image.new("RGB", (size, size), tuple(int(v) for v in rng.integers(0, 80, 3)))
                d, col = ImageDraw.Draw(img), tuple(int(v) for v in rng.integers(120, 256, 3))
                a, b = rng.integers(5, size // 3, 2)
                if c == 0:
                    d.ellipse([a, b, a + size // 2, b + size // 2], fill=col)
                elif c == 1:
                    d.rectangle([a, b, a + size // 2, b + size // 2], fill=col)
                else:
                    for k in range(0, size, 12):
                        d.rectangle([k, 0, k + 5, size], fill=col)
                img.save(os.path.join(folder, "%05d.jpg" % i), quality=90)
    open(os.path.join(root, "done"), "w").close()


class SlowImages:
    """An ImageFolder-like Dataset whose __getitem__ is slow on purpose:
    decode a JPEG, resize it, then a per-pixel gamma curve in Python. Items:
    (image uint8 3 x size x size, label int)."""

    def __init__(self, root, split="train", size=64, per_class=200):
        if not os.path.exists(os.path.join(root, "done")):
            _make_images(root, per_class)
        self.size = size
        folder = os.path.join(root, split)
        self.files = [(os.path.join(folder, c, f), i) for i, c in enumerate(CLASSES)
                      for f in sorted(os.listdir(os.path.join(folder, c)))]
        self.gamma = [min(255, int(255 * (v / 255) ** 0.8)) for v in range(256)]

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        from PIL import Image
        path, label = self.files[i]
        with Image.open(path) as img:
            img = img.convert("RGB").resize((self.size, self.size), Image.BILINEAR)
        pixels = bytes(self.gamma[v] for v in img.tobytes())  # the slow part: Python per byte
        x = np.frombuffer(pixels, np.uint8).reshape(self.size, self.size, 3).transpose(2, 0, 1)
        return np.ascontiguousarray(x), label


MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class Photos:
    """A folder of photos (ROOT/SPLIT/CLASS/*.jpg, as torchvision's
    ImageFolder reads it) with the random part of the usual recipe taken out
    of __getitem__: it decodes a JPEG and resizes it to a fixed square
    (shorter side to `size`, centre crop), the deterministic part, which the
    cache keeps; train_augment and test_augment below are the random part,
    run after the cache on every sample of every epoch. Items: (image uint8
    tensor 3 x size x size, label)."""

    def __init__(self, root, split="train", size=128, per_class=200):
        if not os.path.isdir(os.path.join(root, split)):  # none: a generated folder, made once
            _make_images(root, per_class, size=400)
        folder = os.path.join(root, split)
        classes = sorted(os.listdir(folder))
        self.files = [(os.path.join(folder, c, f), i) for i, c in enumerate(classes)
                      for f in sorted(os.listdir(os.path.join(folder, c)))]
        self.size, self.split = size, split

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        import torch
        from PIL import Image
        path, label = self.files[i]
        with Image.open(path) as img:
            img = img.convert("RGB")
            w, h = img.size
            s = self.size / min(w, h)
            img = img.resize((max(self.size, round(w * s)), max(self.size, round(h * s))),
                             Image.BILINEAR)
            left, top = (img.size[0] - self.size) // 2, (img.size[1] - self.size) // 2
            img = img.crop((left, top, left + self.size, top + self.size))
        x = torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1).contiguous()
        return x, label


_STEPS = {}


def _steps(split, crop=96):
    """torchvision's transforms for the step of a split, built on first use
    (the loaders import this module; torchvision only where a step runs)."""
    if (split, crop) not in _STEPS:
        import torch
        import torchvision.transforms as T
        first = ([T.RandomResizedCrop(crop, antialias=True), T.RandomHorizontalFlip()]
                 if split == "train" else [T.CenterCrop(crop)])
        _STEPS[split, crop] = T.Compose(first + [T.ConvertImageDtype(torch.float32),
                                                 T.Normalize(MEAN, STD)])
    return _STEPS[split, crop]


def train_augment(item, crop=96):
    """dataset.python.augment.train: a random-resized crop to 96 px and a
    random flip of the cached image (torch's generator, seeded per sample by
    the loader), then float32 normalised. (image float32 3x96x96, label)."""
    image, label = item
    return _steps("train", crop)(image), label


def test_augment(item, crop=96):
    """dataset.python.augment.test: the centre 96 px, float32 normalised."""
    image, label = item
    return _steps("test", crop)(image), label


class WorkshopPhotos(Photos):
    """The same photos as most training scripts read them, the random part
    inside __getitem__: decode, RandomResizedCrop(96) of the whole image, flip,
    ToTensor, Normalize. For DataLoader (bench/augment_bench.py's peer); with
    zeus-pipe's cache on it is refused (the cache would keep one draw)."""

    def __init__(self, root, split="train", crop=96, per_class=200):
        Photos.__init__(self, root, split, size=crop * 4 // 3, per_class=per_class)
        self.crop = crop

    def __getitem__(self, i):
        import torchvision.transforms as T
        from PIL import Image
        if self.split != "train":  # the test split as Photos and test_augment make it
            return test_augment(Photos.__getitem__(self, i), self.crop)
        if not hasattr(self, "tf"):
            self.tf = T.Compose([T.RandomResizedCrop(self.crop), T.RandomHorizontalFlip(),
                                 T.ToTensor(), T.Normalize(MEAN, STD)])
        path, label = self.files[i]
        with Image.open(path) as img:
            return self.tf(img.convert("RGB")), label


def _make_h5(path, n, size):
    """x: smooth random fields; y: x blurred and brightened, the target image."""
    import h5py
    rng = np.random.default_rng(1)
    x = rng.random((n, 1, size, size), dtype=np.float32)
    for _ in range(2):  # smooth
        x = (x + np.roll(x, 1, 2) + np.roll(x, 1, 3) + np.roll(x, (1, 1), (2, 3))) / 4
    y = 0.5 * (x + np.roll(x, 1, 3)) + 0.1
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with h5py.File(path + ".tmp", "w") as f:
        f.create_dataset("x", data=x.astype(np.float32))
        f.create_dataset("y", data=y.astype(np.float32))
    os.replace(path + ".tmp", path)


class H5Regression:
    """(x, y) image pairs from an HDF5 file, read one sample at a time (the
    file is opened in each loader process, on first use). Items: (x float32
    1 x size x size, y float32 1 x size x size)."""

    def __init__(self, path, split="train", n=2000, size=32):
        if not os.path.exists(path):
            _make_h5(path, n, size)
        import h5py
        with h5py.File(path, "r") as f:
            total = len(f["x"])
        cut = total * 4 // 5
        self.path, self.lo, self.hi = path, (0 if split == "train" else cut), (cut if split == "train" else total)
        self.file = None

    def __len__(self):
        return self.hi - self.lo

    def __getitem__(self, i):
        if self.file is None:
            import h5py
            self.file = h5py.File(self.path, "r")
        return self.file["x"][self.lo + i], self.file["y"][self.lo + i]


def train(zp, task, epochs, lr):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    torch.manual_seed(0)
    if task == "images":
        model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(4),
                              nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                              nn.Flatten(), nn.Linear(32, len(CLASSES)))
    else:
        model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 1, 3, padding=1))
    opt = torch.optim.Adam(model.parameters(), lr=lr)

    def prep(x, y):
        if task == "images" and x.dtype == torch.uint8:  # SlowImages' pixels: scaled here
            return x.float().div_(255).sub_(0.5).div_(0.25), y.long()
        if task == "images":  # an augment step's or the package's float32, already normalised
            return x, y.long()
        return x, y

    for epoch in range(epochs):
        model.train()
        total = n = 0
        for x, y in zp.train:
            x, y = prep(x, y)
            out = model(x)
            loss = F.cross_entropy(out, y) if task == "images" else F.mse_loss(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, n = total + loss.item() * len(x), n + len(x)
        model.eval()
        tl = tn = right = 0
        with torch.no_grad():
            for x, y in zp.test:
                x, y = prep(x, y)
                out = model(x)
                tl += (F.cross_entropy(out, y, reduction="sum") if task == "images"
                       else F.mse_loss(out, y, reduction="sum") / out[0].numel()).item()
                right += (out.argmax(1) == y).sum().item() if task == "images" else 0
                tn += len(x)
        metrics = {"loss": tl / max(tn, 1)}
        if task == "images":
            metrics["accuracy"] = right / max(tn, 1)
        zp.log("train_epoch", epoch=epoch, loss=total / max(n, 1))
        zp.log("test_epoch", epoch=epoch, **metrics)
        print("epoch %d: train loss %.4f, test %s" % (epoch, total / max(n, 1), " ".join(
            "%s %.4f" % kv for kv in metrics.items())), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", choices=("images", "regression"), default=None,
                    help="the model: a classifier of SlowImages or a regression of H5Regression "
                         "(default: from the config's dataset.python.class)")
    ap.add_argument("--epochs", type=int, default=None, help="default: the run's trainer.epochs")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--config", help="start the pipeline of this config from here (Python-first)")
    ap.add_argument("overrides", nargs="*", help="KEY=VALUE overrides of --config")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import zeus_pipe
    overrides = dict(o.split("=", 1) for o in args.overrides)
    with zeus_pipe.attach(config=args.config, overrides=overrides or None) as zp:
        # a class label (an int) beside the image: a classifier; else a regression
        task = args.task or ("images" if zp.fields[-1][1] == "int64" else "regression")
        train(zp, task, args.epochs or zp.epochs or 10, args.lr)


if __name__ == "__main__":
    main()

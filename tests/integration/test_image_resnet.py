"""The image-folder example (configs/images-resnet.yaml running
python/examples/image_resnet.py) trains a torchvision ResNet-18 through
`zeus-pipe up` on a tiny folder made by bench/make_images.py: one epoch, every
train and val image exactly once, its epoch metrics logged; and its device
transform is what it says: each train sample a window of the sample padded by
P pixels, flipped or not, and every sample normalised with the config's mean
and std. Exits 77 (skipped) where /usr/bin/python3 has no torch or torchvision."""
import os
import subprocess
import sys
import zp
from test_python import PYTHON, python_command

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
CONFIG = os.path.join(ROOT, "configs", "images-resnet.yaml")
TRAIN, VAL, CLASSES = 30, 20, 10


def make_folder(w):
    root = os.path.join(w.path, "images")
    p = subprocess.run([PYTHON, os.path.join(ROOT, "bench", "make_images.py"), root, "--train", str(TRAIN),
                        "--val", str(VAL), "--jobs", "1"], capture_output=True, text=True)
    zp.check(p.returncode == 0, "make_images: %s" % p.stderr[-2000:])
    return root


def the_example_trains_one_epoch_with_every_image_exactly_once():
    with zp.Workdir() as w:
        over = ["dataset.path=" + make_folder(w), "run.dir=" + os.path.join(w.path, "runs"),
                "cache.path=" + os.path.join(w.path, "cache"), "trainer.epochs=1", "dataset.image.resize=40",
                "dataset.image.crop=32", "prefetch.batch_size=8", "loader.workers=2"]
        # the interpreter running this test (Debian's, with torch), not PATH's python3;
        # under `env` with the ASan runtime preloaded for a sanitizer build
        over.append("trainer.command=[%s, ../python/examples/image_resnet.py]" % python_command())
        rc, out, err = w.run("up", CONFIG, *over)
        zp.check(rc == 0, "exit %d:\n%s" % (rc, err[-3000:]))
        run = w.run_dir("images-resnet")
        for split, n in (("train", TRAIN), ("test", VAL)):
            ends = zp.epoch_ends(run, split)
            zp.check([(e["epoch"], e["samples"], e["distinct"], e["expected_samples"]) for e in ends]
                     == [(0, n, n, n)], "%s: %s" % (split, ends))
        logged = {m["event"]: m for m in zp.metrics(run) if m.get("event") in ("train_epoch", "test_epoch")}
        zp.check(sorted(logged) == ["test_epoch", "train_epoch"], "logged: %s" % sorted(logged))
        for m in logged.values():
            zp.check(m["epoch"] == 0 and 0 <= m["accuracy"] <= 1 and m["loss"] == m["loss"] and m["loss"] > 0, m)
        log = zp.text(os.path.join(run, "logs", "trainer-0.log"))
        zp.check("resnet18, %d classes, epochs 1, on" % CLASSES in log and "epoch 1: train loss" in log, log)


def the_device_transform_crops_flips_and_normalises_each_sample():
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.join(ROOT, "python", "examples"))
    from image_resnet import DevicePrep
    mean, std, pad = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225], 3
    x = torch.randint(0, 256, (64, 3, 10, 12), dtype=torch.uint8, generator=torch.Generator().manual_seed(4))
    y = torch.arange(64)
    prep = DevicePrep(torch.device("cpu"), mean, std, pad, seed=1)
    norm = lambda t: (t.float() / 255 - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(3, 1, 1)
    got, gy = prep(x, y, train=False)
    zp.check(torch.equal(gy, y) and torch.allclose(got, norm(x), atol=1e-5), "test batches: not x normalised")
    got, _ = prep(x, y, train=True)
    padded = F.pad(x, (pad, pad, pad, pad))
    shifts, flips = set(), 0
    for i in range(64):
        match = [(r, c, f) for r in range(2 * pad + 1) for c in range(2 * pad + 1) for f in (0, 1)
                 if torch.allclose(got[i], norm((lambda t: t.flip(2) if f else t)(padded[i, :, r:r + 10, c:c + 12])),
                                   atol=1e-5)]
        zp.check(match, "train sample %d is no padded window of its input, flipped or not" % i)
        shifts.add(match[0][:2])
        flips += match[0][2]
    # 64 draws of 49 offsets and a coin: all alike would be a broken draw (chance < 1e-12)
    zp.check(len(shifts) > 10 and 8 < flips < 56, "offsets %d distinct, %d flipped of 64" % (len(shifts), flips))


if __name__ == "__main__":
    for module in ("torch", "torchvision", "yaml"):
        if subprocess.run([PYTHON, "-c", "import " + module], capture_output=True).returncode:
            print("SKIP: %s has no %s (Debian: apt install python3-torch python3-torchvision)" % (PYTHON, module))
            sys.exit(77)
    zp.main([the_example_trains_one_epoch_with_every_image_exactly_once,
             the_device_transform_crops_flips_and_normalises_each_sample])

"""image_resnet.py — a torchvision ResNet-18 trained on a folder of JPEGs
(ImageFolder layout), fed by zeus-pipe through the zeus_pipe package. Run it
with `zeus-pipe up configs/images-resnet.yaml`, which starts it as the trainer
(trainer.command) with ZP_RUN and ZP_RANK set.

    image_resnet.py [--epochs E] [--lr LR] [--pad P] [--no-augment]

The batches come as uint8 N,3,H,W (the config's dataset.dtype: a quarter of
the bytes of float32 through the loaders, the cache and the ring). On the GPU
when there is one, else on the CPU, each train batch is augmented (a random
crop from the sample padded by P pixels, a random horizontal flip, drawn per
sample) and normalised with the config's dataset.mean and dataset.std (on a
GPU the zeus_pipe package normalises as it copies: attach(device="cuda"));
test batches are only normalised; --no-augment leaves the train batches' crop
and flip to the config (dataset.augment.resized_crop and hflip, made by the
pipeline) and only normalises them too. The classes are the run's (the train
folder's class folders). E defaults to the run's trainer.epochs.

Logs per epoch train_epoch {loss, accuracy} and test_epoch {loss, accuracy}
into the run's metrics.jsonl and prints them. build(), train_epoch() and
test_epoch() are the model and loops, for bench/image_bench.py to train the
same model from a DataLoader."""
import argparse
import contextlib
import os
import sys

import torch
import torch.nn.functional as F
import torchvision
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import zeus_pipe  # noqa: E402  (the checkout's python/, when not installed)


def run_settings(run):
    """{classes, mean, std, crop, epochs} of the run in folder `run`: from its
    dataset description (RUN/dataset/meta) and its resolved config
    (RUN/config.yaml). Raises ZeusPipeError naming the file it cannot read."""
    meta = os.path.join(run, "dataset", "meta")
    try:
        with open(meta) as f:
            classes = int(next(l.split()[1] for l in f if l.startswith("classes ")))
        with open(os.path.join(run, "config.yaml")) as f:
            cfg = yaml.safe_load(f)
    except (OSError, StopIteration, ValueError, yaml.YAMLError) as e:
        raise zeus_pipe.ZeusPipeError("image_resnet: %s: cannot read the run's description (%s): "
                                      "is it a zeus-pipe run?" % (run, e))
    ds = cfg["dataset"]
    return dict(classes=classes, mean=ds["mean"], std=ds["std"], crop=int(ds["image"]["crop"]),
                epochs=int(cfg["trainer"]["epochs"]))


class DevicePrep:
    """uint8 N,C,H,W batches on `device`: random crop with padding and flip
    (train), normalisation (both), each draw from a seeded generator."""

    def __init__(self, device, mean, std, pad, seed):
        self.device, self.pad = device, pad
        self.scale = 1 / (255 * torch.tensor(std, device=device).view(1, -1, 1, 1))
        self.shift = 255 * torch.tensor(mean, device=device).view(1, -1, 1, 1)
        self.gen = torch.Generator(device=device)
        self.gen.manual_seed(seed)

    def _rand(self, n, high):
        return torch.randint(0, high, (n,), generator=self.gen, device=self.device)

    def augment(self, x):
        n, c, h, w = x.shape
        if self.pad:
            p = self.pad
            padded = F.pad(x, (p, p, p, p))  # black borders, as torchvision's RandomCrop(padding=p)
            rows = self._rand(n, 2 * p + 1).view(n, 1) + torch.arange(h, device=self.device)
            cols = self._rand(n, 2 * p + 1).view(n, 1) + torch.arange(w, device=self.device)
            x = padded[torch.arange(n, device=self.device).view(n, 1, 1, 1),
                       torch.arange(c, device=self.device).view(1, c, 1, 1),
                       rows.view(n, 1, h, 1), cols.view(n, 1, 1, w)]
        flip = self._rand(n, 2).bool().view(n, 1, 1, 1)
        return torch.where(flip, x.flip(3), x)

    def __call__(self, x, y, train):
        x = x.to(self.device)  # CPU: a view of the ring slot, valid until the next batch
        if train:
            x = self.augment(x)
        if x.dtype == torch.uint8:  # on a GPU, attach(device=...) has normalised it already
            x = x.float().sub_(self.shift).mul_(self.scale)
        return x, y.to(self.device)


def build(classes, epochs, lr, device):
    """(model, optimizer, scheduler): ResNet-18, SGD with momentum, cosine
    over `epochs`. The weights draw from torch's global generator: seed it
    first (main: torch.manual_seed(1))."""
    model = torchvision.models.resnet18(num_classes=classes).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    return model, opt, sched


def train_epoch(model, opt, sched, batches, prep, train=True, region=None):
    """One pass of SGD over `batches` ((x, y) pairs, prep(x, y, train)
    before the forward pass), then a scheduler step; returns (loss,
    accuracy). region(name): a context manager around each part (zp.region)."""
    region = region or (lambda name: contextlib.nullcontext())
    model.train()
    loss_sum = correct = n = 0
    for x, y in batches:
        with region("transform"):
            x, y = prep(x, y, train=train)
        with region("forward"):
            out = model(x)
            loss = F.cross_entropy(out, y)
        with region("backward"):
            opt.zero_grad()
            loss.backward()
            opt.step()
        loss_sum += loss.item() * len(y)
        correct += (out.argmax(1) == y).sum().item()
        n += len(y)
    sched.step()
    return loss_sum / max(n, 1), correct / max(n, 1)


def test_epoch(model, batches, prep):
    """(loss, accuracy) of the model over `batches`, prep(x, y, False) each."""
    model.eval()
    loss_sum = correct = m = 0
    with torch.no_grad():
        for x, y in batches:
            x, y = prep(x, y, train=False)
            out = model(x)
            loss_sum += F.cross_entropy(out, y, reduction="sum").item()
            correct += (out.argmax(1) == y).sum().item()
            m += len(y)
    m = max(m, 1)
    return loss_sum / m, correct / m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=None, help="default: the run's trainer.epochs")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--pad", type=int, default=None, help="random-crop padding (default: crop / 8)")
    ap.add_argument("--no-augment", action="store_true",
                    help="no random crop or flip here: the config's dataset.augment makes them")
    args = ap.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(1)
    # on a GPU the package copies each batch ahead on a side stream, normalised
    # on the CPU the batches stay uint8 (raw) until DevicePrep has cropped them
    with zeus_pipe.attach(device=device if device.type == "cuda" else None,
                          raw=device.type != "cuda") as zp:
        run = run_settings(zp.run)
        epochs = args.epochs or run["epochs"]
        pad = args.pad if args.pad is not None else run["crop"] // 8
        prep = DevicePrep(device, run["mean"], run["std"], pad, seed=1)
        model, opt, sched = build(run["classes"], epochs, args.lr, device)
        print("image_resnet: resnet18, %d classes, epochs %d, on %s" % (run["classes"], epochs, device),
              flush=True)
        for epoch in range(epochs):
            train_loss, train_acc = train_epoch(model, opt, sched, zp.train, prep, train=not args.no_augment,
                                                region=zp.region)
            zp.log("train_epoch", epoch=epoch, loss=train_loss, accuracy=train_acc)
            test_loss, test_acc = test_epoch(model, zp.test, prep)
            zp.log("test_epoch", epoch=epoch, loss=test_loss, accuracy=test_acc)
            print("epoch %d: train loss %.4f, test loss %.4f, test accuracy %.4f"
                  % (epoch + 1, train_loss, test_loss, test_acc), flush=True)


if __name__ == "__main__":
    main()

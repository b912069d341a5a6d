"""switch_from_dataloader.py — README.md's "Switch from DataLoader" program:
a small CNN on an image folder, fed by zeus-pipe. `zeus-pipe up
configs/switch-from-dataloader.yaml` starts it as the trainer; run alone,
`python3 python/examples/switch_from_dataloader.py --config
configs/switch-from-dataloader.yaml` starts the pipeline itself.

What changed from the DataLoader version is marked `was:`. The transforms
(Resize, CenterCrop, RandomResizedCrop, RandomHorizontalFlip, Normalize),
batch size, shuffle and workers moved into the config; the batches come
normalised float32 N,3,64,64 with the config's augmentation applied, on the
CPU (move them where the model is)."""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import zeus_pipe  # noqa: E402  (the checkout's python/, when not installed)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", help="start the pipeline of this config from here")
    ap.add_argument("--epochs", type=int, default=3)
    args = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    # was: train = DataLoader(ImageFolder(root + "/train", transform=...), batch_size=32,
    #                         shuffle=True, num_workers=2); test = DataLoader(...)
    with zeus_pipe.attach(config=args.config) as zp:
        classes = zp.classes                       # was: len(train.dataset.classes)
        model = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
                              nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
                              nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                              nn.Linear(32, classes)).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        for epoch in range(zp.epoch, args.epochs):   # zp.epoch: 0, or where a resume left
            model.train()
            total = n = 0
            for x, y in zp.train:                   # was: for x, y in train:
                x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
                loss = F.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                total, n = total + loss.item() * len(y), n + len(y)
            model.eval()
            right = seen = 0
            tl = 0.0
            with torch.no_grad():
                for x, y in zp.test:                # was: for x, y in test:
                    x, y = x.to(dev), y.to(dev)
                    out = model(x)
                    tl += F.cross_entropy(out, y, reduction="sum").item()
                    right += (out.argmax(1) == y).sum().item()
                    seen += len(y)
            zp.log("train_epoch", epoch=epoch, loss=total / n)      # the report's epoch table
            zp.log("test_epoch", epoch=epoch, loss=tl / seen, accuracy=right / seen)
            print("epoch %d: train loss %.4f, test loss %.4f, accuracy %.4f" % (
                epoch, total / n, tl / seen, right / seen), flush=True)


if __name__ == "__main__":
    main()

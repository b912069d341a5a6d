"""fashion_cnn.py — a small PyTorch CNN (2 conv + pool, then 2 linear) on
Fashion-MNIST, fed by zeus-pipe through the zeus_pipe package instead of a
DataLoader. Run it with `zeus-pipe up configs/fashion-cnn.yaml`, which starts
it as the trainer (trainer.command) with ZP_RUN and ZP_RANK set.

    fashion_cnn.py [--epochs E] [--lr LR] [--device cuda|cpu]
        (E: at most the run's trainer.epochs; the device: the GPU when torch
        sees one, where the zeus_pipe package copies each batch, else the CPU)

Logs per epoch train_epoch {loss, accuracy} and test_epoch {loss, accuracy}
into the run's metrics.jsonl and prints them."""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import zeus_pipe  # noqa: E402  (the checkout's python/, when not installed)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.drop = nn.Dropout(0.25)
        self.fc1 = nn.Linear(64 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.drop(torch.flatten(x, 1))
        return self.fc2(self.drop(F.relu(self.fc1(x))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    device = torch.device(args.device)
    torch.manual_seed(1)
    model = Net().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, args.epochs)
    print("fashion_cnn: on %s" % device, flush=True)
    with zeus_pipe.attach(device=device if device.type == "cuda" else None) as zp:
        for epoch in range(args.epochs):
            model.train()
            loss_sum = correct = n = 0
            # x: on the CPU a view of the ring slot, valid until the next batch;
            # on a GPU the package's copy of it there
            for x, y in zp.train:
                with zp.region("forward"):
                    out = model(x)
                    loss = F.cross_entropy(out, y)
                with zp.region("backward"):
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                loss_sum += loss.detach() * len(y)  # summed on the device: no sync a step
                correct += (out.argmax(1) == y).sum()
                n += len(y)
            sched.step()
            train_loss, correct = float(loss_sum) / n, int(correct)
            zp.log("train_epoch", epoch=epoch, loss=train_loss, accuracy=correct / n)
            model.eval()
            loss_sum = correct = m = 0
            with torch.no_grad():
                for x, y in zp.test:
                    out = model(x)
                    loss_sum += F.cross_entropy(out, y, reduction="sum").item()
                    correct += (out.argmax(1) == y).sum().item()
                    m += len(y)
            zp.log("test_epoch", epoch=epoch, loss=loss_sum / m, accuracy=correct / m)
            print("epoch %d: train loss %.4f, test loss %.4f, test accuracy %.4f"
                  % (epoch + 1, train_loss, loss_sum / m, correct / m), flush=True)


if __name__ == "__main__":
    main()

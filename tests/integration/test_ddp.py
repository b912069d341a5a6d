"""Two ranks of a user's PyTorch program (trainer.gpus: 2, trainer.command)
training one model with DistributedDataParallel over gloo, fed by
zeus_pipe.attach(): each epoch of each split is split exactly once between
the ranks (their indices are disjoint and together the whole split), the run
records one epoch_end per split and epoch summed over both ranks (samples ==
distinct == the split's size, the index checksum of range(n)), len() is each
rank's batch count, and both ranks end with the same parameters (DDP
averaged their gradients). Exits 77 (skipped) where /usr/bin/python3 has no
torch or no gloo."""
import os
import subprocess
import sys
import zp
from test_python import PACKAGE, PYTHON, python_command

TRAIN, TEST, BATCH = 1000, 200, 50  # 500 and 100 a rank: 10 and 2 batches each

CONFIG = """
run: {{name: ddp}}
seed: 7
dataset:
  source: synthetic
  synthetic: {{train_samples: {train}, test_samples: {test}, shape: [1, 6, 5], classes: 4}}
loader: {{workers: 2, task_size: 25}}
prefetch: {{batch_size: {batch}, depth: 2, shuffle: true, drop_last: true}}
trainer:
  gpus: 2
  epochs: 2
  command: [{python}, ddp.py]
"""

# Each rank writes its batches' indices to batches-RANK.txt and its initial
# and final parameters to params-RANK.pt.
DDP_SCRIPT = """
import torch, torch.distributed as dist, torch.nn.functional as F
import zeus_pipe
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from zeus-pipe up
rank = dist.get_rank()
torch.manual_seed(rank)  # other weights on each rank: DDP must broadcast rank 0's
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(30, 16), torch.nn.ReLU(),
                            torch.nn.Linear(16, 4))
ddp = DDP(model)
start = [p.detach().clone() for p in model.parameters()]
opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
out = open("batches-%d.txt" % rank, "w")
with zeus_pipe.attach() as zp:
    print("len", len(zp.train), len(zp.test), file=out)
    for epoch in range(2):
        for x, y in zp.train:
            print("train", epoch, ",".join(map(str, zp.indices.tolist())), file=out)
            opt.zero_grad()
            F.cross_entropy(ddp(x), y).backward()
            opt.step()
        with torch.no_grad():
            for x, y in zp.test:
                print("test", epoch, ",".join(map(str, zp.indices.tolist())), file=out)
                model(x)
out.close()
torch.save({"start": start, "end": [p.detach().clone() for p in model.parameters()]},
           "params-%d.pt" % rank)
dist.destroy_process_group()
"""


def read_batches(w, rank):
    """(len line, {(split, epoch): [indices of each batch]})."""
    with open(os.path.join(w.path, "batches-%d.txt" % rank)) as f:
        lines = [l.split() for l in f]
    got = {}
    for split, epoch, idx in lines[1:]:
        got.setdefault((split, int(epoch)), []).append([int(i) for i in idx.split(",")])
    return lines[0], got


def params(w, rank):
    import torch
    return torch.load(os.path.join(w.path, "params-%d.pt" % rank))


def two_gloo_ranks_split_every_epoch_exactly_once_and_train_one_model():
    import torch
    with zp.Workdir() as w:
        w.write("ddp.py", DDP_SCRIPT)
        cfg = w.write("ddp.yaml", CONFIG.format(train=TRAIN, test=TEST, batch=BATCH,
                                                python=python_command()))
        env = dict(os.environ, PYTHONPATH=os.path.abspath(PACKAGE))
        p = w.start("up", cfg, env=env)
        out, err = p.communicate(timeout=240)
        zp.check(p.returncode == 0, "exit %d:\n%s" % (p.returncode, err[-3000:]))
        run = w.run_dir("ddp")
        per_rank = [read_batches(w, r) for r in (0, 1)]
        for r, (length, got) in enumerate(per_rank):
            zp.check(length == ["len", "10", "2"], "rank %d: len() %s, want 10 and 2" % (r, length))
            for epoch in range(2):
                zp.check(len(got["train", epoch]) == 10 and len(got["test", epoch]) == 2,
                         "rank %d epoch %d: %d train and %d test batches" % (
                             r, epoch, len(got["train", epoch]), len(got["test", epoch])))
        for split, n in (("train", TRAIN), ("test", TEST)):
            for epoch in range(2):
                mine = [sorted(i for b in per_rank[r][1][split, epoch] for i in b) for r in (0, 1)]
                zp.check(not set(mine[0]) & set(mine[1]),
                         "%s epoch %d: the ranks share %d indices" % (
                             split, epoch, len(set(mine[0]) & set(mine[1]))))
                zp.check(sorted(mine[0] + mine[1]) == list(range(n)),
                         "%s epoch %d: the ranks got %d samples (%d distinct) of %d" % (
                             split, epoch, len(mine[0] + mine[1]), len(set(mine[0] + mine[1])), n))
            ends = zp.epoch_ends(run, split)
            zp.check([e["epoch"] for e in ends] == [0, 1],
                     "%s: epoch_end records of epochs %s, want one each of 0 and 1" % (
                         split, [e["epoch"] for e in ends]))
            for e in ends:
                zp.check(e["samples"] == e["distinct"] == e["expected_samples"] == n and
                         e["skipped"] == 0 and e["index_checksum"] == zp.index_checksum(range(n)),
                         "%s: not the whole split summed over both ranks: %r" % (split, e))
        a, b = params(w, 0), params(w, 1)
        zp.check(all(torch.equal(x, y) for x, y in zip(a["end"], b["end"])),
                 "the ranks' final parameters differ: DDP did not average their gradients")
        zp.check(not all(torch.equal(x, y) for x, y in zip(a["start"], a["end"])),
                 "the parameters never changed: nothing trained")
        zp.check(not zp.stage_pids(w.path), "stages left: %r" % zp.stage_pids(w.path))


def require_gloo():
    """Exits 77 (skipped) where PYTHON has no torch with torch.distributed's gloo."""
    probe = "import torch.distributed as d, sys; sys.exit(0 if d.is_available() and d.is_gloo_available() else 1)"
    if subprocess.run([PYTHON, "-c", probe], capture_output=True).returncode:
        print("SKIP: %s has no torch with torch.distributed's gloo (Debian: apt install "
              "python3-torch)" % PYTHON)
        sys.exit(77)


if __name__ == "__main__":
    require_gloo()
    zp.main([two_gloo_ranks_split_every_epoch_exactly_once_and_train_one_model])

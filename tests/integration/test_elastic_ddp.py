"""A user's DDP program (gloo, trainer.command) resumed with another number
of ranks: 2 ranks save the package's state_dict() at batch 7 of train epoch
1 and die; a new run of the same config with trainer.gpus 1 (batch size 40:
the same global batch) or 3 loads it (every rank the same state, rank 0's)
and trains on. The cut epoch is every sample exactly once over both runs
(the indices each rank printed, and the resumed run's one epoch_end record
of it, summed over its ranks), and so is the next epoch among the new
ranks. And 3 ranks that were not in step (rank 2 a batch ahead, every rank
saving its own state) go on with 2 from the list of the 3 states: rank 2's
batch past the position is trained again, logged and counted as repeats.
Exits 77 (skipped) where /usr/bin/python3 has no torch or no gloo."""
import os
import zp
from test_ddp import require_gloo
from test_python import PACKAGE, python_command

TRAIN, TEST, BATCH = 1200, 120, 20  # 2 ranks: 30 train batches each

CONFIG = """
run: {{name: {name}}}
seed: 9
dataset:
  source: synthetic
  synthetic: {{train_samples: {train}, test_samples: {test}, shape: [1, 6, 5], classes: 4}}
loader: {{workers: 2, task_size: 20}}
prefetch: {{batch_size: {batch}}}
trainer:
  gpus: {gpus}
  epochs: 3
  command: [{python}, elastic.py, {mode}]
"""

# Each rank prints its train batches' indices to <run name>-RANK.txt. Mode
# cut: rank 0 saves after batch 7 of train epoch 1 and every rank dies;
# mode resume: every rank loads that save and trains to the end. Mode ahead
# (no DDP): every rank saves its own state after batch 7, rank 2 after batch
# 8, and dies; mode resume_all loads the list of the 3 states.
SCRIPT = """
import os, sys, torch, torch.distributed as dist, torch.nn.functional as F
import zeus_pipe
from torch.nn.parallel import DistributedDataParallel as DDP

mode = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(30, 8), torch.nn.ReLU(),
                            torch.nn.Linear(8, 4))
ddp = model if mode == "ahead" else DDP(model)  # ahead: a rank trains a batch more
opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
with zeus_pipe.attach() as zp:
    out = open("%s-%d.txt" % (mode, rank), "w")
    if mode == "resume":
        saved = torch.load("state.pt")
        model.load_state_dict(saved["model"])
        zp.load_state_dict(saved["data"])
    if mode == "resume_all":
        zp.load_state_dict([torch.load("state-%d.pt" % r)["data"] for r in range(3)])
    for epoch in range(zp.epoch, 3):
        for i, (x, y) in enumerate(zp.train):
            print(epoch, ",".join(map(str, zp.indices.tolist())), file=out, flush=True)
            opt.zero_grad()
            F.cross_entropy(ddp(x), y).backward()
            opt.step()
            if mode == "cut" and epoch == 1 and i == 6:
                if rank == 0:
                    torch.save({"model": model.state_dict(), "data": zp.state_dict()}, "state.pt")
                dist.barrier()
                os._exit(3)
            if mode == "ahead" and epoch == 1 and i == 6 + (rank == 2):
                torch.save({"data": zp.state_dict()}, "state-%d.pt" % rank)
                dist.barrier()
                os._exit(3)
        for x, y in zp.test:
            pass
    out.close()
dist.destroy_process_group()
"""


def indices(w, mode, ranks, epoch):
    got = []
    for r in range(ranks):
        with open(os.path.join(w.path, "%s-%d.txt" % (mode, r))) as f:
            for line in f:
                e, idx = line.split()
                if int(e) == epoch:
                    got += [int(i) for i in idx.split(",")]
    return got


def up(w, name, gpus, mode, batch=BATCH):
    cfg = w.write(name + ".yaml", CONFIG.format(name=name, train=TRAIN, test=TEST, batch=batch,
                                                gpus=gpus, python=python_command(), mode=mode))
    p = w.start("up", cfg, env=dict(os.environ, PYTHONPATH=os.path.abspath(PACKAGE)))
    out, err = p.communicate(timeout=240)
    return p.returncode, err


def two_ranks_saved_mid_epoch_go_on_with_1_and_with_3():
    for n in (1, 3):
        with zp.Workdir() as w:
            w.write("elastic.py", SCRIPT)
            rc, err = up(w, "cut", 2, "cut")
            zp.check(rc != 0 and os.path.exists(os.path.join(w.path, "state.pt")),
                     "the cut run: exit %d, no state.pt\n%s" % (rc, err[-2000:]))
            before = indices(w, "cut", 2, 1)
            zp.check(len(before) == 2 * 7 * BATCH, "cut: %d samples of epoch 1" % len(before))
            batch = 2 * BATCH // n if n == 1 else BATCH  # 1 rank: the same global batch
            rc, err = up(w, "resume", n, "resume", batch)
            zp.check(rc == 0, "resumed with %d: exit %d\n%s" % (n, rc, err[-3000:]))
            zp.check("saved by 2 ranks (batch size 20, at batch 7,7), this run has %d (batch size "
                     "%d): train epoch 1 goes on at entry %d" % (n, batch, len(before)) in err,
                     err[-2000:])
            after = indices(w, "resume", n, 1)
            zp.check(sorted(before + after) == list(range(TRAIN)),
                     "with %d: epoch 1 over both runs: %d samples, %d distinct, of %d" % (
                         n, len(before + after), len(set(before + after)), TRAIN))
            zp.check(sorted(indices(w, "resume", n, 2)) == list(range(TRAIN)),
                     "with %d: epoch 2 is not every sample once" % n)
            ends = zp.epoch_ends(w.run_dir("resume"), "train")
            zp.check([e["epoch"] for e in ends] == [1, 2] and
                     all(e["samples"] == e["distinct"] == e["expected_samples"] == TRAIN and
                         e["index_checksum"] == zp.index_checksum(range(TRAIN)) for e in ends),
                     "with %d: %s" % (n, [(e["epoch"], e["samples"], e["distinct"]) for e in ends]))


def three_ranks_not_in_step_go_on_with_2_and_count_the_repeats():
    with zp.Workdir() as w:
        w.write("elastic.py", SCRIPT)
        rc, err = up(w, "ahead", 3, "ahead")
        zp.check(rc != 0 and all(os.path.exists(os.path.join(w.path, "state-%d.pt" % r))
                                 for r in range(3)), "the cut run: exit %d\n%s" % (rc, err[-2000:]))
        before = indices(w, "ahead", 3, 1)
        zp.check(len(before) == (7 + 7 + 8) * BATCH, "cut: %d samples of epoch 1" % len(before))
        rc, err = up(w, "resume_all", 2, "resume_all")
        zp.check(rc == 0, "resumed: exit %d\n%s" % (rc, err[-3000:]))
        at = 7 * BATCH * 3  # every rank had trained its first 7 batches: 420 entries
        zp.check("saved by 3 ranks (batch size 20, at batch 7,7,8), this run has 2 (batch size "
                 "20): train epoch 1 goes on at entry %d of its %d; %d samples a rank had read "
                 "past it are read again" % (at, TRAIN, BATCH) in err, err[-2000:])
        after = indices(w, "resume_all", 2, 1)
        twice = sorted(i for i in set(after) if i in set(before))
        with open(os.path.join(w.path, "ahead-2.txt")) as f:
            rank2_last = [int(i) for i in f.read().split("\n")[-2].split()[1].split(",")]
        zp.check(len(before + after) == TRAIN + BATCH and set(before + after) == set(range(TRAIN))
                 and twice == sorted(rank2_last),
                 "epoch 1 over both runs: %d samples, %d distinct, twice: %s" % (
                     len(before + after), len(set(before + after)), twice))
        ends = zp.epoch_ends(w.run_dir("resume_all"), "train")
        e1 = [e for e in ends if e["epoch"] == 1]
        zp.check(len(e1) == 1 and e1[0]["samples"] == TRAIN + BATCH and
                 e1[0]["distinct"] == TRAIN and e1[0].get("repeats") == BATCH and
                 e1[0]["index_checksum"] == zp.index_checksum(range(TRAIN)), e1)
        zp.check(all("repeats" not in e and e["samples"] == e["distinct"] == TRAIN
                     for e in ends if e["epoch"] == 2), ends)
        report = zp.text(os.path.join(w.run_dir("resume_all"), "report.html"))
        zp.check("<span class=\"ok\">ok: every index once</span>, and %d trained again after a "
                 "resume" % BATCH in report, "report.html's coverage of epoch 2 (from 1)")


if __name__ == "__main__":
    require_gloo()
    zp.main([two_ranks_saved_mid_epoch_go_on_with_1_and_with_3,
             three_ranks_not_in_step_go_on_with_2_and_count_the_repeats])

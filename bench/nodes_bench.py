#!/usr/bin/python3
"""Scaling out under Slurm, on one machine: 1, 2 and 4 "nodes", each a network
namespace whose link to the others is limited to 1 Gbit/s with tc
(tests/integration/netns.py), one Slurm-like task per node (the variables
srun sets), large synthetic samples (3 x 112 x 112 float32, 147 KiB), cache
off, a null trainer (the data path alone), 1 loader per node.

Two designs, side by side in one run:
- per-node: this build, where every node runs its own cache stage and loaders
  and samples stay on their node;
- central: the design before it, where every sample of rank r went from
  rank r's loaders to rank 0's cache stage and back to rank r's prefetch. It
  is measured with a binary built from the last commit before the change
  (--central BINARY; without it only per-node is measured), since keeping a
  switch for it would not cost nothing.

Printed per design and node count: aggregate train samples/s of all ranks
(sum of samples over the sum of epoch seconds, epochs after the first), the
ratio per-node/central, and the bytes each node's link carried (both ways,
from the veth counters) against the sample bytes its rank consumed.

On a 2-core machine the nodes share the cores, so the aggregate cannot grow
with the node count here; what the links carry is the point. Needs root.

Run: /usr/bin/python3 bench/nodes_bench.py build [--central /tmp/zp-central/build/zeus-pipe]
     /usr/bin/python3 bench/nodes_bench.py build --quick   (what the test suite
     runs: 1 and 2 nodes, 64 samples a rank, 2 epochs; exit 77, skipped, where
     namespaces cannot be made; its figures mean nothing)
Build the central binary with:
  git worktree add /tmp/zp-central a9aa941 && cmake -S /tmp/zp-central -B /tmp/zp-central/build \\
      -DZP_CUDA=OFF && cmake --build /tmp/zp-central/build -j2 --target zeus-pipe
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from netns import Nodes  # noqa: E402

SHAPE, SAMPLE_BYTES = "[3, 112, 112]", 3 * 112 * 112 * 4
PER_RANK, EPOCHS = 600, 3
CONFIG = """
run: {{name: nodes}}
seed: 1
dataset:
  source: synthetic
  synthetic: {{train_samples: {train}, test_samples: 0, shape: {shape}, classes: 10}}
loader: {{workers: 1, task_size: 16}}
prefetch: {{batch_size: 32, depth: 4}}
trainer: {{backend: "null", epochs: {epochs}}}
cache: {{enabled: false}}
transport: {{bind: "0.0.0.0:{port}"}}
"""


def run(binary, n, port):
    """One run of n tasks on n nodes: (samples/s, [link bytes], [sample bytes per rank])."""
    work = tempfile.mkdtemp(prefix="zp-nodes-")
    try:
        cfg = os.path.join(work, "nodes.yaml")
        with open(cfg, "w") as f:
            f.write(CONFIG.format(train=PER_RANK * n, shape=SHAPE, epochs=EPOCHS, port=port))
        with Nodes(n, "1gbit") as nodes:
            before = [nodes.link_bytes(i) for i in range(n)]
            procs = []
            for r in range(n):
                env = dict(os.environ)
                env.pop("OPENBLAS_CORETYPE", None)
                if n > 1:
                    env.update(nodes.slurm_env(r, n, r, 0, job=str(port)))
                procs.append(subprocess.Popen(nodes.wrap(r, [binary, "up", cfg]), cwd=work, env=env,
                                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
            errs = [p.communicate(timeout=600)[1] for p in procs]
            for r, (p, err) in enumerate(zip(procs, errs)):
                if p.returncode:
                    raise RuntimeError("%s, %d nodes: rank %d exit %d:\n%s" % (binary, n, r, p.returncode, err[-3000:]))
            carried = [nodes.link_bytes(i) - before[i] for i in range(n)]
        with open(os.path.join(work, "runs", "nodes", "metrics.jsonl")) as f:
            ends = [json.loads(l) for l in f if '"epoch_end"' in l]
        ends = [e for e in ends if e["split"] == "train" and e["epoch"] >= 1]
        rate = sum(e["samples"] for e in ends) / sum(e["seconds"] for e in ends)
        return rate, carried, PER_RANK * EPOCHS * SAMPLE_BYTES
    finally:
        shutil.rmtree(work, ignore_errors=True)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", nargs="?", default="build", metavar="BUILD_DIR",
                    help="the build directory of zeus-pipe (default: %(default)s)")
    ap.add_argument("--quick", action="store_true",
                    help="the test suite's run: 1 and 2 nodes, 2 short epochs")
    ap.add_argument("--central", metavar="BINARY",
                    help="zeus-pipe built at a9aa941 (central design), measured too")
    return ap.parse_args()


def main():
    global PER_RANK, EPOCHS
    args = parse_args()
    quick = args.quick
    if quick:
        PER_RANK, EPOCHS = 64, 2
    central = os.path.abspath(args.central) if args.central else None
    build = args.build
    why = Nodes.available()
    if why:
        print("nodes_bench: network namespaces: " + why, file=sys.stderr)
        sys.exit(77 if quick else 1)
    mine = os.path.abspath(os.path.join(build, "zeus-pipe"))
    designs = [("per-node", mine)] + ([("central", central)] if central else [])
    print("%d samples of %d bytes per rank and epoch, %d epochs (the first left out), 1 Gbit/s links"
          % (PER_RANK, SAMPLE_BYTES, EPOCHS))
    print("| nodes | design | samples/s | vs central | MB on each node's link | sample MB per rank |")
    print("| --- | --- | --- | --- | --- | --- |")
    port = 21000 + os.getpid() % 1000 * 4
    for n in (1, 2) if quick else (1, 2, 4):
        got = {}
        for name, binary in designs:
            port += 4
            got[name] = run(binary, n, port)
        for name, _ in designs:
            rate, carried, per_rank = got[name]
            ratio = "%.2fx" % (rate / got["central"][0]) if "central" in got else "-"
            print("| %d | %s | %.0f | %s | %s | %.0f |" % (n, name, rate, ratio,
                                                           " / ".join("%.1f" % (b / 1e6) for b in carried),
                                                           per_rank / 1e6), flush=True)


if __name__ == "__main__":
    main()

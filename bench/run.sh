#!/bin/sh
# Installs the benchmark's extra packages (PyTorch), builds, and runs the data-path
# benchmark and the PyTorch training loop fed by DataLoader and by zeus-pipe.
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh --bench
scripts/build.sh
/usr/bin/python3 bench/bench.py build
/usr/bin/python3 bench/torch_bench.py build

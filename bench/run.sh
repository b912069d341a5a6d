#!/bin/sh
# Installs the benchmark's extra packages (PyTorch), builds, and runs every benchmark.
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh --bench
scripts/build.sh
/usr/bin/python3 bench/bench.py build

#!/bin/sh
# Installs what is missing, then configures and builds zeus-pipe into build/.
# Extra arguments go to CMake's configure step (e.g. -DZP_SANITIZE=ON).
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build build -j"$(nproc)"

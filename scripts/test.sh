#!/bin/sh
# Installs what is missing, builds, and runs the whole test suite under ctest.
set -eu
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir build --output-on-failure -j2 "$@"

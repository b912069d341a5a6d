#!/bin/sh
# Installs what is missing, builds, and runs the whole test suite under ctest:
# once on the normal build, once on an AddressSanitizer + UBSan build (the
# integration tests fail on any sanitizer report in a stage's log), then every
# libFuzzer target for a short while (scripts/fuzz.sh).
set -eu
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir build --output-on-failure -j2 "$@"
cmake -S . -B build-asan -DZP_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-asan -j"$(nproc)"
ctest --test-dir build-asan --output-on-failure -j2 "$@"
scripts/fuzz.sh 15

#!/bin/sh
# Installs what is missing, builds, and runs the whole test suite under ctest:
# once on the normal build, once on an AddressSanitizer + UBSan build (the
# integration tests fail on any sanitizer report in a stage's log), then every
# libFuzzer target for a short while (scripts/fuzz.sh). The Release build
# (-O3, what packagers and users make; GCC warns there of things -O2 does not
# see) is built too, and its unit tests run.
#
# scripts/test.sh --quick: the edit-compile-test loop, under a minute — builds
# build/, runs the unit tests (ctest -L unit) and one real pipeline: the
# default Fashion-MNIST config for one epoch in a temporary folder, which must
# exit 0 having delivered every train and test sample exactly once (count,
# distinct count and index checksum of each split). No ASan build, no
# integration tests, no fuzzing: run the whole suite before you push.
# Extra arguments go to ctest in both modes.
set -eu
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--quick" ]; then
    shift
    scripts/build.sh
    ctest --test-dir build -L unit --output-on-failure -j2 "$@"
    tmp=$(mktemp -d /tmp/zp-quick.XXXXXX)
    trap 'echo "zeus-pipe: quick tests failed; the run is kept in $tmp" >&2' EXIT
    echo "zeus-pipe: one epoch of configs/fashion-mnist.yaml in $tmp"
    if ! build/zeus-pipe up configs/fashion-mnist.yaml run.dir="$tmp/runs" \
        cache.path="$tmp/cache" trainer.epochs=1 >"$tmp/up.log" 2>&1; then
        cat "$tmp/up.log" >&2
        exit 1
    fi
    /usr/bin/python3 - "$tmp/runs/fashion-mnist" <<'PY'
import math, sys
sys.path.insert(0, "tests/integration")
import zp
run = sys.argv[1]
for split, n in (("train", 60000), ("test", 10000)):
    ends = zp.epoch_ends(run, split)
    zp.check(len(ends) == 1, "%s: %d epoch records, want 1" % (split, len(ends)))
    r = ends[0]
    zp.check(r["samples"] == n and r["distinct"] == n and r["expected_samples"] == n,
             "%s: %d samples, %d distinct, want %d" % (split, r["samples"], r["distinct"], n))
    zp.check(r["index_checksum"] == zp.index_checksum(range(n)), "%s: index checksum differs" % split)
    zp.check(math.isfinite(r["loss"]), "%s: loss %r" % (split, r["loss"]))
    print("zeus-pipe: %s: %d samples, each once; loss %.4f accuracy %.4f" %
          (split, n, r["loss"], r["accuracy"]))
PY
    trap - EXIT
    rm -rf "$tmp"
    echo "zeus-pipe: quick tests passed"
    exit 0
fi

scripts/build.sh
ctest --test-dir build --output-on-failure -j2 "$@"
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release -j"$(nproc)"
ctest --test-dir build-release -L unit --output-on-failure -j2
cmake -S . -B build-asan -DZP_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-asan -j"$(nproc)"
# the benchmarks' quick modes run on the normal build only: they guard the scripts
# against rot, and run the same stages the integration tests run here
ctest --test-dir build-asan --output-on-failure -j2 -LE bench "$@"
scripts/fuzz.sh 10

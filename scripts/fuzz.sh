#!/bin/sh
# Builds the libFuzzer targets (clang, with AddressSanitizer and UBSan) and runs
# each for SECONDS (default 20; CI runs them briefly, run them longer by hand:
# scripts/fuzz.sh 3600). A crash leaves its input in build-fuzz/ and fails.
# Targets: fuzz_msg (every wire message's decoder), fuzz_config (the config loader).
set -eu
cd "$(dirname "$0")/.."
secs=${1:-20}
command -v clang >/dev/null || { echo "zeus-pipe: fuzz: clang is missing (scripts/deps.sh installs it)" >&2; exit 1; }
out=build-fuzz
mkdir -p "$out"
flags="-g -O1 -std=gnu11 -I. -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
$(pkg-config --cflags msgpack yaml-0.1 libzmq)"
libs="$(pkg-config --libs msgpack yaml-0.1 libzmq) -lm"
clang $flags -o "$out/fuzz_msg" tests/fuzz/fuzz_msg.c schemas/msg.c $libs
clang $flags -o "$out/fuzz_config" tests/fuzz/fuzz_config.c pipeline/config.c pipeline/config_print.c pipeline/log.c $libs
rm -rf "$out/corpus" && mkdir -p "$out/corpus/msg" "$out/corpus/config" "$out/seeds-msg"
"$out/fuzz_msg" --write-seeds="$out/seeds-msg"
cp tests/configs/good/*.yaml tests/configs/bad/*.yaml "$out/corpus/config/"
cp "$out"/seeds-msg/* "$out/corpus/msg/"
for t in msg config; do
    echo "zeus-pipe: fuzzing $t for ${secs}s" >&2
    (cd "$out" && ./fuzz_$t -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 \
        -print_final_stats=1 "corpus/$t" 2>"fuzz_$t.log") || {
        tail -40 "$out/fuzz_$t.log" >&2
        echo "zeus-pipe: fuzz_$t found a crash; the input is in $out/" >&2
        exit 1
    }
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$out/fuzz_$t.log" | sed "s/^/  fuzz_$t /" >&2
done

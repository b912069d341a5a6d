#!/bin/sh
# Builds the libFuzzer targets (clang, with AddressSanitizer and UBSan) and runs
# each for SECONDS (default 20; CI runs them briefly, run them longer by hand:
# scripts/fuzz.sh 3600). A crash leaves its input in build-fuzz/ and fails.
# Targets: fuzz_msg (every wire message's decoder), fuzz_config (the config loader),
# and the readers of the files a run writes and reads back: fuzz_events
# (events.msgpack through the report, the page and the trace), fuzz_jsonl
# (metrics.jsonl and stats.jsonl), fuzz_dataset (RUN/dataset/), fuzz_ckpt (a
# checkpoint's header and payload) and fuzz_cache (a cached value); and
# fuzz_jpeg, the region decoder and the resampler held to the whole decode; and
# fuzz_npy, a .npy file probed and read as dataset.source: npy does.
# Their seed corpora (a real run's files; small JPEGs; numpy.save files) are in
# tests/fuzz/seeds/<name>.
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
clang $flags $(pkg-config --cflags libxxhash) -o "$out/fuzz_config" tests/fuzz/fuzz_config.c \
    pipeline/config/config.c pipeline/config/config_print.c pipeline/config/config_check.c \
    pipeline/base/log.c $libs $(pkg-config --libs libxxhash) # libxxhash: the default cache folder's name
# The run-file readers need much of the runtime and the report: they are
# compiled once (the sources of CMakeLists.txt's runtime floors, ZP_RUNTIME_SOURCES_*,
# of zp_report and of zp_schemas) into an archive, from which each target takes what it calls.
runtime=$(sed -n -e '/^set(ZP_RUNTIME_SOURCES_/,/)/p' -e '/^add_library(zp_report STATIC/,/)/p' \
    CMakeLists.txt | tr ' ()' '\n\n\n' | grep '[.]c$')
rm -rf "$out/obj" # no object of a file since moved or gone
mkdir -p "$out/obj"
for src in $runtime schemas/msg.c schemas/records.c; do
    clang $(echo "$flags" | sed 's/-fsanitize=fuzzer,/-fsanitize=fuzzer-no-link,/') \
        $(pkg-config --cflags lmdb libxxhash) -c -o "$out/obj/$(echo "$src" | tr / _).o" "$src"
done
rm -f "$out/libzp-fuzz.a" && ar rcs "$out/libzp-fuzz.a" "$out"/obj/*.o
rlibs="$out/libzp-fuzz.a $(pkg-config --libs lmdb libxxhash libturbojpeg libjpeg libpng zlib) $libs -lpthread"
readers="events jsonl dataset ckpt cache jpeg npy"
for t in $readers; do
    clang $flags -o "$out/fuzz_$t" "tests/fuzz/fuzz_$t.c" $rlibs
done
rm -rf "$out/corpus" && mkdir -p "$out/corpus/msg" "$out/corpus/config" "$out/seeds-msg"
"$out/fuzz_msg" --write-seeds="$out/seeds-msg"
cp tests/configs/good/*.yaml tests/configs/bad/*.yaml "$out/corpus/config/"
cp "$out"/seeds-msg/* "$out/corpus/msg/"
for t in $readers; do
    mkdir -p "$out/corpus/$t" && cp tests/fuzz/seeds/"$t"/* "$out/corpus/$t/"
done
for t in msg config $readers; do
    echo "zeus-pipe: fuzzing $t for ${secs}s" >&2
    (cd "$out" && ./fuzz_$t -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 \
        -print_final_stats=1 "corpus/$t" 2>"fuzz_$t.log") || {
        tail -40 "$out/fuzz_$t.log" >&2
        echo "zeus-pipe: fuzz_$t found a crash; the input is in $out/" >&2
        exit 1
    }
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$out/fuzz_$t.log" | sed "s/^/  fuzz_$t /" >&2
done

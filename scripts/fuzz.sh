#!/usr/bin/env bash
# libFuzzer over the datagram receive path (tests/fuzz/datagram_fuzz.cpp: udp/'s receive path into datagram/'s dispatch), with ASan+UBSan.
#   scripts/fuzz.sh [seconds]     default 60
# Builds build-fuzz with clang, runs the fuzzer on a working corpus (build-fuzz/fuzz-corpus, seeded
# from tests/fuzz/corpus), and prints libFuzzer's figures. A crash is saved as
# build-fuzz/crash-*; reproduce it with build-fuzz/tests/fuzz/datagram_fuzz <file>.
# Environment: BUILD_DIR (default build-fuzz), JOBS (default 2), FUZZ_ARGS (extra libFuzzer options).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
build=${BUILD_DIR:-$root/build-fuzz}
jobs=${JOBS:-2}
cc=${CC:-clang}
cxx=${CXX:-clang++}
command -v "$cxx" >/dev/null || { echo "fuzz.sh: $cxx not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DOPTIREDUCE_BUILD_FUZZERS=ON -DOPTIREDUCE_SANITIZE=address,undefined \
  -DOPTIREDUCE_BUILD_EXAMPLES=OFF -DOPTIREDUCE_MPI_FLAVORS=openmpi >/dev/null
cmake --build "$build" -j"$jobs" --target datagram_fuzz

corpus=$build/fuzz-corpus
mkdir -p "$corpus"
cp -n "$root"/tests/fuzz/corpus/* "$corpus"/ 2>/dev/null || true
log=$build/fuzz.log
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
(cd "$build" && ./tests/fuzz/datagram_fuzz -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 \
  -print_final_stats=1 ${FUZZ_ARGS:-} "$corpus") >"$log" 2>&1 || status=$?

echo "== datagram_fuzz, $seconds s (log: $log)"
grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)" "$log" | tail -n 2 || true
grep -E "^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)" "$log" || true
echo "corpus: $(ls "$corpus" | wc -l) inputs in $corpus"
if [ "$status" -ne 0 ]; then
  echo "FAILED (exit $status):"
  grep -E "ERROR: |SUMMARY: |invariant violated|runtime error|Test unit written" "$log" | head -n 20
  exit "$status"
fi
echo "OK: no crash, no leak, no invariant violation"

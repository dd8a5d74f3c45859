#!/usr/bin/env bash
# profile.sh: where the CPU of an allreduce job goes, per call. Runs optireduce-bench
# with 4 ranks over TCP on this host's loopback (Open MPI ob1/tcp; OptiReduce contenders preloaded),
# each rank under `perf record -e cpu-clock` (software clock: no hardware counters needed), then
# sums every rank's samples by shared object and symbol (perf_by_symbol.py) and divides by the
# calls. CPU per call, unlike latency, hardly moves with the load other users put on the machine.
#   scripts/bench/profile.sh OUT_DIR SIZE [VAR=VALUE ...]   no VAR: Open MPI alone
#   e.g. scripts/bench/profile.sh /tmp/p-udp 16M OPTIREDUCE_TRANSPORT=udp
# Environment: BUILD_DIR (default build), WARMUP (25), ITERS (100).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$1 size=$2
shift 2
build=${BUILD_DIR:-$root/build}
warmup=${WARMUP:-25} iters=${ITERS:-100}
command -v perf >/dev/null || { echo "profile.sh: perf not found (apt-get install linux-perf)" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
x=()
[ $# -eq 0 ] || x=(-x LD_PRELOAD="$build/lib/liboptireduce.so")
for a in "$@"; do x+=(-x "$a"); done
rm -rf "$out" && mkdir -p "$out"
echo "profile.sh: load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/load"
# shellcheck disable=SC2016  # expanded by each rank's shell
mpirun -np 4 --oversubscribe --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
  "${x[@]}" sh -c 'exec perf record -q -e cpu-clock -F 1000 -o "$0/perf.data.$OMPI_COMM_WORLD_RANK" "$@"' "$out" \
  "$build/bin/optireduce-bench" --warmup "$warmup" --iters "$iters" latency --sizes "$size" | tee "$out/bench.txt"
/usr/bin/python3 "$root/scripts/bench/perf_by_symbol.py" "$out" "$((warmup + iters))" | tee "$out/profile.md"

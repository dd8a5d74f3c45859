#!/usr/bin/env bash
# The tail probe: Open MPI over TCP (ob1, btl tcp,self on lo: no shared memory), 4 ranks, a 4 MiB
# float32 allreduce timed call by call (max over ranks), run in the current network namespace.
# Writes {"ranks", "calls", "p50_ms", "p99_ms", "p99_over_p50", "samples_ms"} to OUT_JSON.
# scripts/netem.sh --measure-tail runs it inside the emulated network.
#   probe.sh BUILD_DIR CALLS OUT_JSON
set -uo pipefail
build=$1 calls=$2 out=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp /tmp/probe.XXXXXX.json) || exit 1
trap 'rm -f "$tmp"' EXIT
mpirun -np 4 --oversubscribe --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo \
  --mca oob_tcp_if_include lo "$build/bin/optireduce-bench" --json "$tmp" --label tail-probe \
  --iters "$calls" --warmup 5 latency --sizes 4M >/dev/null 2>"$tmp.err" || {
  echo "probe.sh: the probe job failed:" >&2; tail -n 5 "$tmp.err" >&2; rm -f "$tmp.err"; exit 1; }
rm -f "$tmp.err"
/usr/bin/python3 - "$tmp" "$out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
e = d["entries"][0]
samples = e["iteration_ms"][e["warmup"]:]
json.dump({"what": "Open MPI ob1/tcp, 4 ranks, 4 MiB float32 allreduce, max over ranks per call",
           "ranks": d["ranks"], "calls": len(samples), "p50_ms": e["p50_ms"], "p99_ms": e["p99_ms"],
           "p99_over_p50": e["p99_ms"] / e["p50_ms"], "samples_ms": samples}, open(sys.argv[2], "w"))
PY

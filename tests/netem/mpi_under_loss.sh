#!/usr/bin/env bash
# netem.mpi_*_loss1: a 2-rank optireduce-bench job with the library preloaded, inside a
# scripts/netem.sh namespace of the given profile, everything over TCP, in the OPTIREDUCE_MODE
# given by NETEM_TEST_MODE (default bounded).
# It must exit 0 before the timeout, the engine must have run every call over UCX tcp (never shared
# memory, which would bypass the lossy loopback) and the loopback must have dropped packets.
#   mpi_under_loss.sh NETEM_SH PROFILE TIMEOUT SECONDS MPIEXEC LIBRARY BENCH WORKDIR
set -uo pipefail
netem=$1 profile=$2 timeout_exe=$3 seconds=$4 mpiexec=$5 lib=$6 bench=$7 work=$8
. "$(dirname "$0")/skip_unless_netns.sh"
. "$(dirname "$0")/run_job.sh"

rm -rf "$work" && mkdir -p "$work" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# 25 warm-up calls per size cover the 20 calibration calls: the 20 timed calls per size are the
# engine's own choice (bounded, or exact after a loss-budget fallback). Every result is checked
# against the exact sum by the bench.
# shellcheck disable=SC2054  # "--sizes 1M,4M" is one argument
cmd=("$netem" --profile "$profile" --stats "$work/netem.json" --
  "$timeout_exe" -k 10 "$seconds" "$mpiexec" -np 2 --oversubscribe
  --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo
  -x LD_PRELOAD="$lib" -x OPTIREDUCE_UCX_TLS=tcp -x OPTIREDUCE_MODE="${NETEM_TEST_MODE:-bounded}"
  -x OPTIREDUCE_REPORT="$work/report.json" -x OPTIREDUCE_TRACE="$work/trace.txt"
  "$bench" --iters 20 --warmup 25 --json "$work/bench.json" latency --sizes 1M,4M)
run_job "$seconds" "${cmd[@]}"

/usr/bin/python3 - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
def load(name):
    with open(os.path.join(work, name)) as f:
        return json.load(f)
bad = []
bench, report, netem = load("bench.json"), load("report.json"), load("netem.json")
for e in bench["entries"]:
    if e["kinds_timed"]["none"] or e["kinds_timed"]["mpi"]:
        bad.append(f"{e['name']}: timed calls not run by the engine: {e['kinds_timed']}")
    if e["check"]["wrong"] or e["check"]["failed"]:
        bad.append(f"{e['name']}: {e['check']['wrong']} wrong result(s), {e['check']['failed']} failed call(s)")
for r in report["ranks"]:
    if r["engine_failures"]:
        bad.append(f"rank {r['rank']}: {r['engine_failures']} engine failure(s)")
    if "tcp" not in r["transports"] or any(t in r["transports"] for t in ("sysv", "posix", "cma", "xpmem", "knem")):
        bad.append(f"rank {r['rank']}: transports {r['transports']!r}, expected tcp only")
    print(f"rank {r['rank']}: {r['intercepted_calls']} engine calls, {r.get('bounded_calls')} bounded, "
          f"{r.get('fallback_calls')} exact after loss-budget fallbacks, dropped fraction {r['dropped_fraction']}, "
          f"transports {r['transports']}")
print(f"loopback: {netem['lo_input_packets']} packets, {netem['lo_input_dropped']} dropped "
      f"({netem['measured_drop_fraction']:.4f}, configured {netem['drop_permille'] / 1000:g})")
if netem["drop_permille"] > 0 and netem["lo_input_dropped"] == 0:
    bad.append("no packet was dropped: the job did not cross the lossy loopback")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY

#!/usr/bin/env bash
# cluster.mpi_hierarchy_*: the three-stage call over scripts/cluster.sh --ranks-per-host (a
# smaller -np fills hosts in order: 2 hosts x 3 slots -np 5 is 3 + 2), bounded mode, every link
# losing PERMILLE per direction (0: clean). allreduce_check's hierarchy case checks every result
# (replicas bitwise identical; exact where no exchange was bounded, else within 0.3 relative RMS
# error); with KIND half, its hierarchy_half case: fp16 then bf16 calls of 2-byte elements; with
# KIND reduce_scatter, its hierarchy_reduce_scatter case: float32 reduce-scatters, each rank's
# block exact where no exchange was bounded, else every entry its host's part of the sum plus
# other hosts', every wrong one counted (reduce_scatter_half: the same in fp16, then bf16). Then:
#   - the report: every rank ran its calls through the engine, in three stages, no failure;
#   - each host's eth0 sent at most 1.2 x what the call needs per call, plus 5 % for headers and
#     4 MiB for the job's start and checks, counted over the whole job (calibration included): an
#     allreduce 2·B·(H−1)/H (B the call's bytes: 2 per element in 16 bits), a reduce-scatter
#     B − B_h (B_h the blocks of the host's ranks: B·(H−1)/H where they are even); a flat call
#     would send L times it from a host of L ranks.
#   mpi_hierarchy.sh CLUSTER_SH TIMEOUT_EXE LIBRARY CHECK_EXE WORKDIR HOSTS RANKS_PER_HOST NP PERMILLE [float32|half|reduce_scatter|reduce_scatter_half]
set -uo pipefail
cluster=$1 timeout_exe=$2 lib=$3 check=$4 work=$5 hosts=$6 per_host=$7 np=$8 permille=$9 kind=${10:-float32}
. "$(dirname "$0")/skip_unless_root_netns.sh"
. "$(dirname "$0")/../netem/run_job.sh"
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found"; exit 77; }

elements=$((1 << 20))
case $kind in
  float32) calls=30 element_bytes=4 job=(-x MPITEST_FLOATS=$elements -x MPITEST_CALLS=$calls "$check" hierarchy) ;;
  half) calls=30 element_bytes=2 job=(-x MPITEST_ELEMENTS=$elements -x MPITEST_CALLS=$((calls / 2)) "$check" hierarchy_half) ;;
  reduce_scatter) calls=30 element_bytes=4 job=(-x MPITEST_FLOATS=$elements -x MPITEST_CALLS=$calls "$check" hierarchy_reduce_scatter) ;;
  reduce_scatter_half) calls=40 element_bytes=2
    job=(-x MPITEST_FLOATS=$elements -x MPITEST_CALLS=$calls -x MPITEST_FORMAT=half "$check" hierarchy_reduce_scatter) ;;
  *) echo "mpi_hierarchy.sh: KIND must be float32, half, reduce_scatter or reduce_scatter_half, not '$kind'" >&2; exit 2 ;;
esac
rm -rf "$work" && mkdir -p "$work" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmd=("$timeout_exe" -k 10 200 "$cluster" --hosts "$hosts" --ranks-per-host "$per_host" --drop "$permille"
  --stats "$work/links.json" --mpirun -- -np "$np" -x LD_PRELOAD="$lib" -x OPTIREDUCE_UCX_NET_DEVICES=eth0
  -x OPTIREDUCE_MODE=bounded -x OPTIREDUCE_CALIBRATION_CALLS=3 -x OPTIREDUCE_LOSS_BUDGET=0.5
  -x OPTIREDUCE_REPORT="$work/report.json" "${job[@]}")
run_job 200 "${cmd[@]}"

/usr/bin/python3 - "$work" "$kind" "$hosts" "$np" "$elements" "$calls" "$element_bytes" "$per_host" <<'PY'
import json, os, sys
work, kind = sys.argv[1], sys.argv[2]
hosts, np, elements, calls, element_bytes, per_host = map(int, sys.argv[3:])
report = json.load(open(os.path.join(work, "report.json")))
links = json.load(open(os.path.join(work, "links.json")))
bad = []
for r in sorted(report["ranks"], key=lambda r: r["rank"]):
    tiered = r["hierarchy"]["calls"]
    print(f"rank {r['rank']} on {r['host']}: {r['intercepted_calls']} engine calls ({tiered} in three stages), "
          f"{r['engine_failures']} failures")
    if r["intercepted_calls"] < calls or r["engine_failures"] or tiered < calls:
        bad.append(f"rank {r['rank']}: {r['intercepted_calls']} engine calls, {tiered} in three stages, "
                   f"{r['engine_failures']} failures")
b = elements * element_bytes
for h, l in enumerate(links["links"]):
    if kind.startswith("reduce_scatter"):  # the host's ranks own B_h of the B bytes: it sends out the rest
        local = min(per_host, np - h * per_host)
        need, what = b * (np - local) / np, "B-B_h"
    else:
        need, what = 2 * b * (hosts - 1) / hosts, "2B(H-1)/H"
    bound = calls * need * 1.2 * 1.05 + (4 << 20)
    per_call = l["eth0_tx_bytes"] / calls
    print(f"link {l['host']}: eth0 tx {l['eth0_tx_bytes']} B, {per_call / need:.2f}x of {what} per call")
    if l["eth0_tx_bytes"] > bound:
        bad.append(f"link {l['host']}: sent {l['eth0_tx_bytes']} B over {calls} calls, beyond {bound:.0f}")
    if l["eth0_tx_bytes"] < calls * need * 0.9:
        bad.append(f"link {l['host']}: sent only {l['eth0_tx_bytes']} B: the calls did not cross it")
for x in bad:
    print("FAIL:", x)
print("PASS" if not bad else "")
sys.exit(1 if bad else 0)
PY

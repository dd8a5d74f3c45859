#!/usr/bin/env bash
# cluster.torch_hierarchy_*: a torch job (the "optireduce" process group, no MPI) on
# scripts/cluster.sh --each-host: HOSTS hosts x RANKS_PER_HOST ranks, each host's ranks started by
# python3 -m optireduce.launch with torchrun's environment (the store on host 0), every link losing
# PERMILLE per direction (0: clean), bounded mode past a short calibration.
# torch_hierarchy_job.py checks every result (replicas bitwise identical; exact where no call was
# bounded, else within 0.3 relative RMS error). Then:
#   - the report: every rank ran its calls through the engine, every one in three stages
#     (hierarchy.calls: float32, float16 and bfloat16), with bytes over the network and over
#     shared memory, and no failure;
#   - each host's eth0 sent at most 1.2 x 2·B·(H−1)/H per float32 call (a 16-bit call half that)
#     plus 5 % for headers and 6 MiB for the job's start and checks (a flat call sends L times it).
#   torch_hierarchy.sh CLUSTER_SH TIMEOUT_EXE PYTHON PYTHONPATH WORKDIR HOSTS RANKS_PER_HOST PERMILLE [HALF_CALLS]
set -uo pipefail
cluster=$1 timeout_exe=$2 python=$3 pythonpath=$4 work=$5 hosts=$6 per_host=$7 permille=$8 half_calls=${9:-0}
. "$(dirname "$0")/skip_unless_root_netns.sh"
. "$(dirname "$0")/../netem/run_job.sh"
"$python" -c 'import torch' 2>/dev/null || { echo "SKIP: torch not importable by $python"; exit 77; }

floats=$((1 << 19)) calls=16
rm -rf "$work" && mkdir -p "$work" || exit 1
export PYTHONPATH="$pythonpath" PYTHONDONTWRITEBYTECODE=1 GLOO_SOCKET_IFNAME=eth0
export OPTIREDUCE_UCX_NET_DEVICES=eth0 OPTIREDUCE_MODE=bounded OPTIREDUCE_CALIBRATION_CALLS=3
export OPTIREDUCE_LOSS_BUDGET=0.5 OPTIREDUCE_MIN_BYTES=0 OPTIREDUCE_REPORT="$work/report.json"
export TEST_FLOATS=$floats TEST_CALLS=$calls TEST_HALF_CALLS=$half_calls
# Every host runs its launcher; host i's ranks are i*L..i*L+L-1, the store is rank 0's on h0.
launch='exec "$0" -m optireduce.launch --nnodes "$CLUSTER_SIZE" --node-rank "$CLUSTER_HOST_INDEX" --nproc-per-node "$1"'
launch+=' --master-addr 10.213.0.1 --master-port 29500 "$2"'
job="$(cd "$(dirname "$0")" && pwd)/torch_hierarchy_job.py"
cmd=("$timeout_exe" -k 10 150 "$cluster" --hosts "$hosts" --drop "$permille" --stats "$work/links.json" --each-host --
  /bin/sh -c "$launch" "$python" "$per_host" "$job")
run_job 150 "${cmd[@]}"

"$python" - "$work" "$hosts" "$per_host" "$floats" "$calls" "$half_calls" <<'PY'
import json, os, sys
work, hosts, per_host, floats, calls, half_calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
report = json.load(open(os.path.join(work, "report.json")))
links = json.load(open(os.path.join(work, "links.json")))
bad = []
ranks = sorted(report["ranks"], key=lambda r: r["rank"])
if len(ranks) != hosts * per_host:
    bad.append(f"the report has {len(ranks)} ranks, not {hosts * per_host}")
if len({r["host"] for r in ranks}) != hosts:
    bad.append(f"the ranks are on {len({r['host'] for r in ranks})} hosts, not {hosts}")
for r in ranks:
    h = r["hierarchy"]
    print(f"rank {r['rank']} on {r['host']}: {r['intercepted_calls']} engine calls, {h['calls']} in three stages "
          f"(placement {h['placement']}), {h['network_bytes']} B over the network, {h['shared_memory_bytes']} B over "
          f"shared memory, {r['bounded_calls']} bounded, {r['engine_failures']} failures")
    all_calls = calls + 2 * half_calls  # float32, then float16 and bfloat16: every one in three stages
    if r["intercepted_calls"] < all_calls or r["engine_failures"]:
        bad.append(f"rank {r['rank']}: {r['intercepted_calls']} engine calls, {r['engine_failures']} failures")
    if h["calls"] < all_calls or h["network_bytes"] <= 0 or h["shared_memory_bytes"] <= 0:
        bad.append(f"rank {r['rank']}: {h['calls']} calls in three stages (of {all_calls}), {h['network_bytes']} B "
                   f"over the network, {h['shared_memory_bytes']} B over shared memory")
b = floats * 4
need = 2 * b * (hosts - 1) / hosts
bound = (calls * need + 2 * half_calls * need / 2) * 1.2 * 1.05 + (6 << 20)  # a 16-bit call needs half the bytes
for l in links["links"]:
    print(f"link {l['host']}: eth0 tx {l['eth0_tx_bytes']} B, {l['eth0_tx_bytes'] / bound:.2f} of the bound {bound:.0f} B")
    if l["eth0_tx_bytes"] > bound:
        bad.append(f"link {l['host']}: sent {l['eth0_tx_bytes']} B, beyond {bound:.0f}")
    if l["eth0_tx_bytes"] < calls * need * 0.9:
        bad.append(f"link {l['host']}: sent only {l['eth0_tx_bytes']} B: the calls did not cross it")
for x in bad:
    print("FAIL:", x)
print("PASS" if not bad else "")
sys.exit(1 if bad else 0)
PY

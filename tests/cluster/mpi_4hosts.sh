#!/usr/bin/env bash
# cluster.mpi_4hosts_loss: a 4-host scripts/cluster.sh cluster, one rank per host through the rsh
# agent, optireduce-bench with the library preloaded, engine on UCX tcp over eth0, Open MPI on
# ob1/tcp, host 2's link losing 10 per mille each way, exact engine calls (OPTIREDUCE_MODE=reliable:
# the bench checks every result against the exact sum). It must exit 0 in time and:
#   - every result is exact and the engine ran every call;
#   - the report has 4 ranks on 4 distinct hosts h0..h3, tcp-only transports, no engine failure;
#   - every link carried the job's traffic (bytes on each host's eth0), and the switch dropped
#     packets on host 2's link in both directions and on no other link.
#   mpi_4hosts.sh CLUSTER_SH TIMEOUT_EXE LIBRARY BENCH WORKDIR
set -uo pipefail
cluster=$1 timeout_exe=$2 lib=$3 bench=$4 work=$5
. "$(dirname "$0")/skip_unless_root_netns.sh"
. "$(dirname "$0")/../netem/run_job.sh"
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found"; exit 77; }

rm -rf "$work" && mkdir -p "$work" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# shellcheck disable=SC2054  # "--sizes 1M,4M" is one argument
cmd=("$timeout_exe" -k 10 130 "$cluster" --hosts 4 --drop-host 2=10 --stats "$work/links.json" --mpirun --
  -x LD_PRELOAD="$lib" -x OPTIREDUCE_UCX_TLS=tcp -x OPTIREDUCE_UCX_NET_DEVICES=eth0
  -x OPTIREDUCE_MODE=reliable -x OPTIREDUCE_REPORT="$work/report.json"
  "$bench" --iters 5 --warmup 2 --json "$work/bench.json" latency --sizes 1M,4M)
run_job 130 "${cmd[@]}"

/usr/bin/python3 - "$work" "$(dirname "$0")" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
from bench_job import load, bench_problems
work = sys.argv[1]
bench, report, links = load(work, "bench.json"), load(work, "report.json"), load(work, "links.json")
bad = bench_problems(bench)
ranks = report["ranks"]
hosts = sorted(r["host"] for r in ranks)
print("ranks on hosts:", hosts)
if hosts != ["h0", "h1", "h2", "h3"]:
    bad.append(f"ranks on hosts {hosts}, expected one on each of h0..h3")
for r in ranks:
    print(f"rank {r['rank']} on {r['host']}: {r['intercepted_calls']} engine calls, transports {r['transports']}")
    if r["intercepted_calls"] == 0 or r["engine_failures"]:
        bad.append(f"rank {r['rank']}: {r['intercepted_calls']} engine calls, {r['engine_failures']} failures")
    ts = r["transports"].split(",")
    if not ts or any(not t.startswith("tcp/eth0") for t in ts):
        bad.append(f"rank {r['rank']}: transports {r['transports']!r}, expected tcp over eth0 only")
for l in links["links"]:
    print(f"link {l['host']} ({l['drop_permille']} per mille): up {l['up_packets']} packets, {l['up_dropped']} dropped; "
          f"down {l['down_packets']} packets, {l['down_dropped']} dropped; eth0 rx {l['eth0_rx_bytes']} B, tx {l['eth0_tx_bytes']} B")
    # Each rank sends and receives at least 3/4 of every engine call's bytes (7 calls of 5 MiB).
    if min(l["eth0_rx_bytes"], l["eth0_tx_bytes"]) < 8 << 20:
        bad.append(f"link {l['host']}: only {l['eth0_rx_bytes']}/{l['eth0_tx_bytes']} bytes: the job did not cross it")
    lossy = l["host"] == "h2"
    for d in ("up", "down"):
        if lossy and l[f"{d}_dropped"] == 0:
            bad.append(f"link h2 ({d}): nothing dropped on the lossy link")
        if not lossy and l[f"{d}_dropped"] != 0:
            bad.append(f"link {l['host']} ({d}): {l[f'{d}_dropped']} dropped on a clean link")
    if lossy:
        f = l["measured_drop_fraction"]
        if not 0.003 <= f <= 0.03:
            bad.append(f"link h2: measured drop fraction {f:.4f}, configured 0.010")
for b in bad:
    print("FAIL:", b)
print("PASS" if not bad else "")
sys.exit(1 if bad else 0)
PY

#!/usr/bin/env bash
# cluster.mpi_*_per_host: scripts/cluster.sh --ranks-per-host places several ranks on each emulated
# host, and with nothing but OPTIREDUCE_UCX_NET_DEVICES=eth0 the engine's UCX reaches the ranks of
# its own host through shared memory and every other host over TCP on eth0, never through shared
# memory. optireduce-bench with the library preloaded, exact engine calls (OPTIREDUCE_MODE=reliable:
# the bench checks every result against the exact sum). It must exit 0 in time and:
#   - every result is exact and the engine ran every call;
#   - the report places the ranks on h0, h1, ... filling each host in order (the expected counts);
#   - each rank's UCX lanes: tcp over eth0 (other hosts), plus shared memory exactly when its
#     host holds another rank; nothing else (no tcp over lo);
#   - every link carried the job's traffic.
#   mpi_ranks_per_host.sh CLUSTER_SH TIMEOUT_EXE LIBRARY BENCH WORKDIR HOSTS RANKS_PER_HOST NP
set -uo pipefail
cluster=$1 timeout_exe=$2 lib=$3 bench=$4 work=$5 hosts=$6 per_host=$7 np=$8
. "$(dirname "$0")/skip_unless_root_netns.sh"
. "$(dirname "$0")/../netem/run_job.sh"
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found"; exit 77; }

rm -rf "$work" && mkdir -p "$work" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmd=("$timeout_exe" -k 10 100 "$cluster" --hosts "$hosts" --ranks-per-host "$per_host" --stats "$work/links.json"
  --mpirun -- -np "$np" -x LD_PRELOAD="$lib" -x OPTIREDUCE_UCX_NET_DEVICES=eth0
  -x OPTIREDUCE_MODE=reliable -x OPTIREDUCE_REPORT="$work/report.json"
  "$bench" --sizes 1M --iters 3 --warmup 1 --json "$work/bench.json")
run_job 100 "${cmd[@]}"

/usr/bin/python3 - "$(dirname "$0")" "$work" "$hosts" "$per_host" "$np" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from bench_job import load, bench_problems
work, hosts, per_host, np = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
bench, report, links = load(work, "bench.json"), load(work, "report.json"), load(work, "links.json")
bad = bench_problems(bench)
# Hosts filled in order: rank r on host r // per_host.
expected = [f"h{r // per_host}" for r in range(np)]
ranks = sorted(report["ranks"], key=lambda r: r["rank"])
placed = [r["host"] for r in ranks]
print("ranks on hosts:", placed)
if placed != expected:
    bad.append(f"ranks on hosts {placed}, expected {expected}")
shared_memory = {"posix", "sysv", "cma", "xpmem", "knem"}
for r in ranks:
    lanes = r["transports"].split(",")
    kinds = {l.split("/")[0] for l in lanes}
    print(f"rank {r['rank']} on {r['host']}: {r['intercepted_calls']} engine calls, transports {r['transports']}")
    if r["intercepted_calls"] == 0 or r["engine_failures"]:
        bad.append(f"rank {r['rank']}: {r['intercepted_calls']} engine calls, {r['engine_failures']} failures")
    mates = placed.count(r["host"]) - 1
    over_link = [l for l in lanes if l.startswith("tcp/eth0")]
    if not over_link:
        bad.append(f"rank {r['rank']}: no tcp/eth0 lane in {r['transports']!r}: other hosts not over the link")
    if mates and not kinds & shared_memory:
        bad.append(f"rank {r['rank']}: {mates} rank(s) on its host but no shared memory in {r['transports']!r}")
    if not mates and kinds & shared_memory:
        bad.append(f"rank {r['rank']}: alone on its host yet shared memory in {r['transports']!r}: another host reached through memory")
    other = [l for l in lanes if l not in over_link and l.split("/")[0] not in shared_memory | {"self"}]
    if other:
        bad.append(f"rank {r['rank']}: unexpected lanes {other}")
for l in links["links"]:
    print(f"link {l['host']}: eth0 rx {l['eth0_rx_bytes']} B, tx {l['eth0_tx_bytes']} B")
    if min(l["eth0_rx_bytes"], l["eth0_tx_bytes"]) < 1 << 20:
        bad.append(f"link {l['host']}: only {l['eth0_rx_bytes']}/{l['eth0_tx_bytes']} bytes: the job did not cross it")
for b in bad:
    print("FAIL:", b)
print("PASS" if not bad else "")
sys.exit(1 if bad else 0)
PY

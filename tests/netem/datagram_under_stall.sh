#!/usr/bin/env bash
# Bounded calls over a datagram transport on a clean network whose ranks stall: a loop beside the
# job stops a random rank with SIGSTOP for 20 to 200 ms, again and again, as a loaded host
# deschedules a process (only longer). A stalled rank sends nothing, not even its heartbeats, so
# its peers must wait for what it owes rather than count it as lost. No call may lose more than
# the loss budget (the default 10 %; a stalled owner's whole shard is 25 %), at most 2 % of the
# calls may lose anything (a peer starved of CPU past its resend waits can still cost a slice),
# and no result may be wrong. The run must also show that the stalls hit it: enough stops while
# the job ran, calls that waited one out, and (nearly) every timed call bounded, not a fallback.
#
#   datagram_under_stall.sh --transport udp|ofi TIMEOUT_EXE SECONDS MPIEXEC LIBRARY BENCH WORKDIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
transport=""
while [[ ${1:-} == --* ]]; do
  case $1 in
    --transport) transport=$2; shift 2 ;;
    *) echo "datagram_under_stall.sh: unknown option $1"; exit 2 ;;
  esac
done
[ $# -eq 6 ] && [ -n "$transport" ] || { sed -n '2,10p' "$0"; exit 2; }
timeout_exe=$1 seconds=$2 mpiexec=$3 lib=$4 bench=$5 work=$6
. "$here/skip_unless_netns.sh"
. "$here/run_job.sh"
rm -rf "$work" && mkdir -p "$work" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# The stopper picks among the job's ranks by process name (the kernel keeps its first 15 bytes),
# only in this run's network namespace, so another job of the same program on the host is left alone.
name=$(basename "$bench" | cut -c1-15)
job=("$timeout_exe" -k 10 "$seconds" "$mpiexec" -np 4 --oversubscribe --mca pml ob1 --mca btl tcp,self
  --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x LD_PRELOAD="$lib" -x OPTIREDUCE_TRANSPORT="$transport"
  -x OPTIREDUCE_MODE=bounded -x OPTIREDUCE_HADAMARD=off ${OPTIREDUCE_LOG:+-x OPTIREDUCE_LOG="$OPTIREDUCE_LOG"} "$bench" --warmup 30 --iters 600 --json "$work/bench.json"
  latency --sizes 4M)
job_line=${job[*]@Q}
stopper="while [ ! -e '$work/stop' ]; do
    pids=(\$(pgrep --ns \$\$ --nslist net -x ${name@Q}))
    if [ \${#pids[@]} -eq 4 ]; then
      kill -STOP \${pids[RANDOM % 4]} 2>/dev/null && echo stop >> '$work/stops'
      sleep \$(awk -v r=\$RANDOM 'BEGIN { print (20 + r % 181) / 1000 }')
      pkill -CONT --ns \$\$ --nslist net -x ${name@Q}
    fi
    sleep \$(awk -v r=\$RANDOM 'BEGIN { print (100 + r % 200) / 1000 }')
  done"
cmd=("$root/scripts/netem.sh" --drop 0 --only udp -- bash -c "($stopper) & $job_line; rc=\$?; touch '$work/stop'; wait; exit \$rc")
run_job "$seconds" "${cmd[@]}"
/usr/bin/python3 - "$work" <<'EOF'
import json, os, sys
work = sys.argv[1]
entry = json.load(open(os.path.join(work, "bench.json")))["entries"][0]
check, kinds, calls = entry["check"], entry["kinds_timed"], entry["calls"]
stops = sum(1 for _ in open(os.path.join(work, "stops"))) if os.path.exists(os.path.join(work, "stops")) else 0
stalled = sum(1 for ms in calls["ms"] if ms >= 20)
print(f"{check['calls']} calls, {check['not_exact']} not exact (worst relative RMS error {check['max_rel_rms_error']:.3g}), "
      f"{check['wrong']} wrong, {check['failed']} failed; timed kinds {kinds}; {stops} stops, {stalled} calls of 20 ms or more")
worst = max(d / n for d, n in zip(calls["dropped"], calls["entries"]))
print(f"worst call dropped {worst:.4f} of its entries")
problems = []
if check["wrong"] or check["failed"]:
    problems.append("a result was wrong or a call failed")
if worst > 0.10:
    problems.append("a call lost more than the loss budget: a stalled rank's data was counted as lost")
if check["not_exact"] > 0.02 * check["calls"]:
    problems.append("more than 2 % of the calls lost data")
if kinds["bounded"] < 0.9 * entry["iters"]:
    problems.append("fewer than 90 % of the timed calls were bounded (the case would prove nothing)")
if stops < 10 or stalled < 3:
    problems.append("the stalls did not hit the job (fewer than 10 stops or 3 calls that waited one out)")
for p in problems:
    print("FAIL:", p)
sys.exit(1 if problems else 0)
EOF

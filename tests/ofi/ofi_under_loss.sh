#!/usr/bin/env bash
# ofi.*: the datagram transport (OPTIREDUCE_TRANSPORT=ofi) in a network namespace whose loopback
# drops PERMILLE of its packets (scripts/netem.sh, nftables). 4 ranks run allreduce_check's
# bounded_loss case with MPITEST_NETWORK_DROP set to the same rate: every wrong entry must be
# counted as dropped (calls that report no loss are exact), the dropped fraction must follow the
# rate, the error must be explained by it, and the job must finish before the timeout.
# With --stranger, a process in the namespace sprays random UDP datagrams at every socket the
# engines bound during the run: nothing may crash or be corrupted, and the report must show the
# rejected datagrams by reason.
#   ofi_under_loss.sh [--stranger] NETEM_SH PERMILLE TIMEOUT SECONDS MPIEXEC LIBRARY CHECK WORKDIR
set -uo pipefail
stranger=0
if [[ ${1:-} == --stranger ]]; then stranger=1; shift; fi
netem=$1 permille=$2 timeout_exe=$3 seconds=$4 mpiexec=$5 lib=$6 check=$7 work=$8
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../netem/skip_unless_netns.sh"

rm -rf "$work" && mkdir -p "$work" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
drop=$(awk -v p="$permille" 'BEGIN { printf "%g", p / 1000 }')
job=("$timeout_exe" -k 10 "$seconds" "$mpiexec" -np 4 --oversubscribe
  --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo
  -x LD_PRELOAD="$lib" -x OPTIREDUCE_TRANSPORT=ofi -x OPTIREDUCE_MODE=bounded -x OPTIREDUCE_MIN_BYTES=0
  -x OPTIREDUCE_CALIBRATION_CALLS=5 -x OPTIREDUCE_CHUNK_BYTES=1K -x OPTIREDUCE_LOSS_BUDGET=1
  -x OPTIREDUCE_HADAMARD=off -x MPITEST_NETWORK_DROP="$drop" -x OPTIREDUCE_REPORT="$work/report.json"
  "$check" bounded_loss)
if ((stranger)); then
  # The stranger lives inside the namespace too: started first, stopped when the job ends.
  inner="/usr/bin/python3 '$here/stranger.py' '$work/stranger.txt' & s=\$!; ${job[*]@Q}; rc=\$?; kill -TERM \$s; wait \$s; exit \$rc"
  cmd=("$netem" --drop "$permille" --stats "$work/netem.json" -- bash -c "$inner")
else
  cmd=("$netem" --drop "$permille" --stats "$work/netem.json" -- "${job[@]}")
fi
echo "+ ${cmd[*]}"
start=$(date +%s)
"${cmd[@]}"
rc=$?
echo "exit $rc after $(($(date +%s) - start)) s"
case $rc in
  0) ;;
  124|137) echo "FAIL: the job did not finish within $seconds s (hang under loss)"; exit 1 ;;
  *) echo "FAIL: the job exited $rc"; exit 1 ;;
esac

/usr/bin/python3 - "$work" "$permille" "$stranger" <<'PY'
import json, os, sys
work, permille, stranger = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "1"
def load(name):
    with open(os.path.join(work, name)) as f:
        return json.load(f)
bad = []
report, netem = load("report.json"), load("netem.json")
for r in report["ranks"]:
    if r["engine_failures"] or r["engines_created"] < 1:
        bad.append(f"rank {r['rank']}: {r['engines_created']} engines, {r['engine_failures']} failures")
    if "udp/" not in r["transports"]:
        bad.append(f"rank {r['rank']}: transports {r['transports']!r}, expected the udp datagram provider")
    c = r.get("transport_counters", {})
    print(f"rank {r['rank']}: dropped fraction {r['dropped_fraction']}, transports {r['transports']}, "
          f"rejected {r['rejected_messages']} {r.get('rejected_by_reason')}, messages sent {c.get('messages_sent')} "
          f"received {c.get('messages_received')}")
    if stranger:
        reasons = r.get("rejected_by_reason", {})
        if reasons.get("unauthenticated", 0) + reasons.get("malformed", 0) == 0:
            bad.append(f"rank {r['rank']}: the stranger's datagrams do not show among the rejected ones: {reasons}")
print(f"loopback: {netem['lo_input_packets']} packets, {netem['lo_input_dropped']} dropped "
      f"({netem['measured_drop_fraction']:.4f}, configured {permille / 1000:g})")
if permille > 0 and netem["lo_input_dropped"] == 0:
    bad.append("no packet was dropped: the job did not cross the lossy loopback")
if stranger:
    with open(os.path.join(work, "stranger.txt")) as f:
        sent = int(f.read())
    print(f"stranger: {sent} datagrams sent")
    if sent == 0:
        bad.append("the stranger found no socket to send to")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY

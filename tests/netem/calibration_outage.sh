#!/usr/bin/env bash
# One direction between two ranks down at the end of a calibration call, for longer than the call
# waits for its peers' word, under MPI_ERRORS_RETURN: allreduce_check's outage case, 3 ranks, udp
# in a scripts/netem.sh namespace (a clean loopback), each rank on a UDP port of its own
# (OPTIREDUCE_UDP_PORTS per rank, one app context each). Before the case's outage call, nftables
# drops what rank 1's port sends rank 0's except full data datagrams: the call's data crosses,
# every word that ends it (lists of missing chunks, "decided", answers, heartbeats, flow
# confirmations) is lost, until the job ends. That is the moment where a rank that decided and a
# rank that never hears the decision could end the call apart; deterministic, since the data
# always crosses whole. The case checks that the call fails with MPI_ERR_OTHER on every rank,
# the same call everywhere, that later calls go to the MPI with exact results and that
# MPI_Barrier completes; here the job must end normally within SECONDS and the rule must have
# dropped datagrams. With --stall, rank 0 (the rank that never learns whether the call was exact)
# also stops for 0.8 s as it gives up, before its failure notice leaves (OPTIREDUCE_FAULT_STALL,
# as a loaded host or SIGSTOP may stop it just then): its peers must still hear of its failure
# and fail the same call, not leave it as exact and hang the job in their next collective.
#
#   calibration_outage.sh [--stall] TIMEOUT_EXE SECONDS MPIEXEC LIBRARY CHECK WORKDIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# Ports of ranks 0, 1, 2; the cut direction is rank 1 to rank 0.
ports=(41000 41001 41002)
# Data datagrams carry a 32 KiB chunk (OPTIREDUCE_CHUNK_BYTES; the case's shards are whole
# chunks); every other datagram of the engine is far smaller than this.
small=16384

if [ "${1:-}" = --inside ]; then
  # In the namespace: the job, and beside it the outage once the case asks for it.
  work=$2 seconds=$3
  shift 3
  (
    until=$((SECONDS + seconds))
    while [ ! -e "$work/request" ]; do
      if [ -e "$work/stop" ] || [ "$SECONDS" -ge "$until" ]; then exit 0; fi
      sleep 0.02
    done
    nft -f - <<EOF || { echo "FAIL: nftables rejected the outage rule"; exit 1; }
table inet optireduce_outage {
  chain input {
    type filter hook input priority filter - 1; policy accept;
    udp sport ${ports[1]} udp dport ${ports[0]} udp length < $small counter drop
  }
}
EOF
    echo "outage: from $(date +%T.%3N), udp ${ports[1]} -> ${ports[0]} (rank 1 to rank 0), datagrams under $small bytes dropped"
    touch "$work/ready"
  ) &
  "$@"
  rc=$?
  touch "$work/stop"
  wait
  dropped=$(nft list table inet optireduce_outage 2>/dev/null | awk '/counter packets/ { for (i = 1; i <= NF; i++) if ($i == "packets") print $(i + 1) }')
  echo "outage: ${dropped:-no} datagrams of rank 1 to rank 0 dropped"
  if [ "$rc" -eq 0 ] && [ "${dropped:-0}" -eq 0 ]; then
    echo "FAIL: the outage dropped nothing: it did not cut the call"
    exit 1
  fi
  exit "$rc"
fi

stall=()
if [ "${1:-}" = --stall ]; then
  stall=(-x OPTIREDUCE_FAULT_STALL=0:800)
  shift
fi
[ $# -eq 6 ] || { sed -n '2,19p' "$0"; exit 2; }
timeout_exe=$1 seconds=$2 mpiexec=$3 lib=$4 check=$5 work=$6
. "$here/skip_unless_netns.sh"
. "$here/run_job.sh"
rm -rf "$work" && mkdir -p "$work" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# Every call of the case is a calibration call (20 by default), made exact by resends over udp.
# A calibration run's hard deadline is OPTIREDUCE_TIMEOUT_MS: 5 s keeps the failing call short.
# Open MPI's -x applies to the app context it is in: each rank's context gets every setting.
env=(-x LD_PRELOAD="$lib" -x OPTIREDUCE_MODE=bounded -x OPTIREDUCE_TRANSPORT=udp -x OPTIREDUCE_MIN_BYTES=0
  -x OPTIREDUCE_STEP_ASIDE=off -x OPTIREDUCE_CHUNK_BYTES=32K -x OPTIREDUCE_TIMEOUT_MS=5000
  ${OPTIREDUCE_LOG:+-x OPTIREDUCE_LOG="$OPTIREDUCE_LOG"} "${stall[@]}"
  -x MPITEST_CALLS=6 -x MPITEST_OUTAGE_CALL=3 -x MPITEST_OUTAGE_DIR="$work")
job=("$timeout_exe" -k 10 "$seconds" "$mpiexec" --oversubscribe --mca pml ob1 --mca btl tcp,self
  --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
for rank in 0 1 2; do
  [ "$rank" -eq 0 ] || job+=(:)
  job+=(-np 1 "${env[@]}" -x OPTIREDUCE_UDP_PORTS="${ports[rank]}-${ports[rank]}" "$check" outage)
done
run_job "$seconds" "$root/scripts/netem.sh" --drop 0 --only udp -- "$here/$(basename "$0")" --inside "$work" "$seconds" "${job[@]}"

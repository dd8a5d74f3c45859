#!/usr/bin/env bash
# A datagram transport (OPTIREDUCE_TRANSPORT=udp or ofi) under real packet loss: allreduce_check's
# bounded_loss case, 4 ranks, bounded mode, on one of
#   --net loopback           a scripts/netem.sh namespace whose loopback drops PERMILLE of the
#                            UDP packets entering it (MTU 65536: udp's 64 KB datagram path); the
#                            launcher's TCP control traffic crosses it whole (netem.sh --only)
#   --net cluster:H:R        scripts/cluster.sh with H hosts and R ranks per host, every link
#                            dropping PERMILLE per direction (veth MTU 1500: udp's GSO path);
#                            ranks of one host reach each other without crossing a link
# MPITEST_NETWORK_DROP is set to the loss one chunk message meets on average, so the case checks
# that every wrong entry is counted as dropped, that the dropped fraction follows the loss, that
# the error is explained by it and that the job finishes. check_datagram_run.py then checks the
# report (transport, counters, no engine failure) and that the loss hit the job.
# With --stranger, every namespace of the job runs tests/netem/stranger.py, spraying random
# datagrams at every UDP socket bound there: nothing may crash or be corrupted, and the report
# must show the rejected datagrams on every rank. With --small-buffers CAP_LIBRARY the ranks
# see an unprivileged user's socket buffers (socket_buffer_cap.cpp, the kernel's default
# limits), and the transport must say which datagram size it chose (--expect TEXT). With --fec G
# the transport sends a parity datagram per G (OPTIREDUCE_FEC): the case then expects the loss of
# a clean network (what the parity cannot repair stays within its 1 % slack), and every rank
# must have repaired datagrams; a rank whose losses the parity all repaired never asks for a
# chunk again, so resend requests are not required there. With --resend R the bounded calls ask for lost chunks again up to
# R times per phase (OPTIREDUCE_RESEND_ROUNDS; the default is the library's): 0 leaves the loss
# to the model above; otherwise the case expects at most a tenth of it in the calls no rank ran to
# a deadline (MPITEST_RESENDS; in the others lateness loses data no resend repairs) and every
# rank must have asked for chunks again.
#
#   datagram_under_loss.sh [--stranger] [--small-buffers CAP_LIBRARY --expect TEXT] [--fec G] [--resend R]
#       --transport udp|ofi --net loopback|cluster:H:R --permille P [--chunk BYTES]
#       TIMEOUT_EXE SECONDS MPIEXEC LIBRARY CHECK WORKDIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
stranger=0 transport="" net="" permille="" chunk=1K cap_lib="" expect="" fec=0 resend=""
while [[ ${1:-} == --* ]]; do
  case $1 in
    --stranger) stranger=1; shift ;;
    --transport) transport=$2; shift 2 ;;
    --net) net=$2; shift 2 ;;
    --permille) permille=$2; shift 2 ;;
    --chunk) chunk=$2; shift 2 ;;
    --small-buffers) cap_lib=$2; shift 2 ;;
    --expect) expect=$2; shift 2 ;;
    --fec) fec=$2; shift 2 ;;
    --resend) resend=$2; shift 2 ;;
    *) echo "datagram_under_loss.sh: unknown option $1"; exit 2 ;;
  esac
done
[ $# -eq 6 ] && [ -n "$transport" ] && [ -n "$net" ] && [ -n "$permille" ] || { sed -n '2,30p' "$0"; exit 2; }
timeout_exe=$1 seconds=$2 mpiexec=$3 lib=$4 check=$5 work=$6
extra=()  # settings of --small-buffers and --fec
[ -z "$cap_lib" ] || extra=(-x EMULATED_RMEM_MAX=212992 -x EMULATED_WMEM_MAX=212992)
hosts=1 per_host=4
if [[ $net =~ ^cluster:([0-9]+):([0-9]+)$ ]]; then
  hosts=${BASH_REMATCH[1]} per_host=${BASH_REMATCH[2]}
  . "$here/../cluster/skip_unless_root_netns.sh"
elif [ "$net" = loopback ]; then
  . "$here/skip_unless_netns.sh"
else
  echo "datagram_under_loss.sh: --net $net: loopback or cluster:HOSTS:RANKS_PER_HOST"; exit 2
fi
ranks=$((hosts * per_host))
. "$here/run_job.sh"

rm -rf "$work" && mkdir -p "$work" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The loss of one chunk message, averaged over the messages of a shard (each has N-1 senders and
# N-1 receivers): on loopback the configured rate; in the cluster a message between hosts crosses
# two links and one within a host none, and the case's model counts 2(N-1) messages per chunk.
# Of those, a flat call sends 2(N-R) between hosts; where hosts hold several ranks the call runs
# in three stages (OPTIREDUCE_HIERARCHY=auto), and only its slice exchanges cross hosts, 2(H-1)
# messages per chunk (the in-host stages lose nothing).
drop=$(awk -v pm="$permille" -v h="$hosts" -v r="$per_host" 'BEGIN {
  p = pm / 1000
  if (h == 1) { printf "%.6g", p; exit }
  n = h * r; remote = (r > 1 ? h - 1 : n - r); path = 1 - (1 - p) ^ 2
  printf "%.6g", 1 - (1 - path) ^ (remote / (n - 1)) }')
[ "$fec" = 0 ] || { drop=0; extra+=(-x OPTIREDUCE_FEC="$fec"); }
[ -z "$resend" ] || extra+=(-x OPTIREDUCE_RESEND_ROUNDS="$resend")
# Every rank asks for lost chunks again unless resends are off or the parity repairs every loss.
asks_resends=1
{ [ "$resend" = 0 ] || [ "$fec" != 0 ]; } && asks_resends=0
((asks_resends)) && extra+=(-x MPITEST_RESENDS=1)
settings=(-x LD_PRELOAD="$lib${cap_lib:+:$cap_lib}" "${extra[@]}" -x OPTIREDUCE_TRANSPORT="$transport" -x OPTIREDUCE_MODE=bounded
  -x OPTIREDUCE_MIN_BYTES=0 -x OPTIREDUCE_CALIBRATION_CALLS=5 -x OPTIREDUCE_CHUNK_BYTES="$chunk"
  -x OPTIREDUCE_LOSS_BUDGET=1 -x OPTIREDUCE_HADAMARD=off -x MPITEST_NETWORK_DROP="$drop"
  -x OPTIREDUCE_REPORT="$work/report.json")
stranger_cmd="/usr/bin/python3 ${here@Q}/stranger.py"
if [ "$hosts" = 1 ]; then
  job=("$timeout_exe" -k 10 "$seconds" "$mpiexec" -np "$ranks" --oversubscribe
    --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo
    "${settings[@]}" "$check" bounded_loss)
  job_line=${job[*]@Q}
  strangers="$stranger_cmd '$work/stranger.0' 127. '$work/stop' &"
  wrapper=("$root/scripts/netem.sh" --drop "$permille" --only udp --stats "$work/netem.json" --)
else
  # mpirun with the cluster's options, then this job's rank count (the last -np counts;
  # --map-by node alternates the hosts). Host i's stranger runs there through the rsh agent.
  job_line="${timeout_exe@Q} -k 10 $seconds mpirun \$CLUSTER_MPIRUN_ARGS -np $ranks --oversubscribe ${settings[*]@Q} ${check@Q} bounded_loss"
  strangers="for i in \$(seq 0 $((hosts - 1))); do \"\$CLUSTER_RSH_AGENT\" h\$i $stranger_cmd '$work/stranger.'\$i 10.213. '$work/stop' & done;"
  wrapper=("$root/scripts/cluster.sh" --hosts "$hosts" --drop "$permille" --stats "$work/links.json" --)
fi
((stranger)) || strangers=""
# The strangers start first and stop (one file stops them all) when the job ends.
cmd=("${wrapper[@]}" bash -c "$strangers $job_line; rc=\$?; touch '$work/stop'; wait; exit \$rc")
run_job "$seconds" "${cmd[@]}"
[ -n "$expect" ] || expect=$([ "$transport" = ofi ] && echo "udp/" || { [ "$hosts" = 1 ] && echo "udp lo " || echo "udp eth0 gso "; })
/usr/bin/python3 "$here/check_datagram_run.py" --work "$work" --permille "$permille" --ranks "$ranks" \
  --hosts "$hosts" --transport-prefix "$expect" $( ((stranger)) && echo --stranger) $([ "$fec" = 0 ] || echo --fec) \
  $([ "$resend" = 0 ] && echo --no-resends) $( ((asks_resends)) && echo --resends)

#!/usr/bin/env bash
# local-slurm.sh: a throwaway single-node Slurm (Debian's slurm-wlm: munged, slurmctld, slurmd)
# for trying the sbatch example on one machine, and for its test.
#
#   scripts/slurm/local-slurm.sh [--cpus N] [--logs DIR] [--ready-timeout S] -- command [args...]
#
# Everything lives in a temporary directory (munge key and socket, slurm.conf, state, spool, logs)
# and in private namespaces made for the run: a PID namespace (when the run ends, every daemon,
# slurmstepd and job process left in it is killed by the kernel), a mount namespace (its own
# /proc), a network namespace (its own loopback: the daemons' ports never appear on the machine's
# interfaces and cannot clash with anything; a veth holds 10.213.255.1, which exists only
# there, because Slurm resolves with AI_ADDRCONFIG) and a UTS namespace (host name "ornode", the node's
# name). Nothing is written to /etc, /var or /run: the Debian binaries get every path through
# their options (munged --socket/--key-file/..., slurmctld/slurmd -f) and the clients through
# SLURM_CONF, which the command sees. The command runs inside, once the node is idle; its exit code
# is this script's. Setup failures: exit 2 with a message (and the daemons' logs).
#
# The node has --cpus CPUs (default 4) whatever the hardware has (SlurmdParameters=
# config_overrides), so a 4-task job fits on a 2-core machine (oversubscribed). MPI: srun
# --mpi=pmix works with Debian's Open MPI; pmi2 does not (that Open MPI has no PMI-2 client).
set -uo pipefail

prog=local-slurm.sh
die() { echo "$prog: $*" >&2; exit 2; }
need_arg() { [ $# -ge 2 ] || die "$1 needs a value (see --help)"; }
usage() {
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}

cpus=4
logs=""
ready_timeout=40
inner=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cpus) need_arg "$@"; [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "--cpus \"$2\" is not a positive integer"; cpus=$2; shift 2 ;;
    --logs) need_arg "$@"; logs=$2; shift 2 ;;
    --ready-timeout) need_arg "$@"; [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "--ready-timeout \"$2\" is not a positive integer"; ready_timeout=$2; shift 2 ;;
    --inner) need_arg "$@"; inner=$2; shift 2 ;;   # internal: the part that runs in the namespaces
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option \"$1\" (the command goes after --; see --help)" ;;
  esac
done
[ $# -gt 0 ] || die "no command given (usage: $prog [options] -- command [args...])"

if [ -z "$inner" ]; then
  # --- outside: checks, temporary directory, namespaces ---------------------------------------
  [ "$(id -u)" -eq 0 ] || die "must run as root (slurmd starts jobs as their user; the namespaces need CAP_SYS_ADMIN)"
  for tool in munged munge slurmctld slurmd sbatch srun sinfo scontrol unshare hostname ip; do
    command -v "$tool" >/dev/null 2>&1 || die "\`$tool\` not found (apt-get install slurm-wlm munge util-linux iproute2)"
  done
  tmp=$(mktemp -d /tmp/optireduce-slurm.XXXXXX) || die "cannot create a temporary directory"
  child=""
  final_rc=""
  cleanup() {
    local rc=${final_rc:-$?}
    trap - EXIT INT TERM HUP
    if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
      kill -TERM "$child" 2>/dev/null                  # the inner part stops the daemons ...
      for _ in $(seq 1 50); do kill -0 "$child" 2>/dev/null || break; sleep 0.2; done
      kill -KILL "$child" 2>/dev/null                  # ... or unshare --kill-child ends the namespace
      wait "$child" 2>/dev/null
    fi
    if [ -n "$logs" ]; then mkdir -p "$logs" && cp -f "$tmp"/log/*.log "$logs"/ 2>/dev/null; fi
    rm -rf "$tmp"
    exit "$rc"
  }
  on_signal() { final_rc=$((128 + $1)); echo "$prog: interrupted (signal $1): stopping the local Slurm" >&2; exit "$final_rc"; }
  trap cleanup EXIT
  trap 'on_signal 2' INT
  trap 'on_signal 15' TERM
  trap 'on_signal 1' HUP
  # --kill-child: if unshare dies, the namespace's init gets SIGKILL, and with it everything inside.
  unshare --pid --fork --kill-child --mount-proc --net --uts -- \
    "$0" --cpus "$cpus" --ready-timeout "$ready_timeout" --inner "$tmp" -- "$@" <&0 &
  child=$!
  wait "$child"
  final_rc=$?
  child=""
  exit "$final_rc"
fi

# --- inside: PID 1 of a fresh PID namespace, own network and host name ---------------------------
tmp=$inner
node=ornode
hostname "$node" || die "cannot set the host name in the UTS namespace"
ip link set lo up || die "cannot bring up the namespace's loopback"
# An address that exists only in this namespace, on one end of a veth pair (the dummy module is
# not always there): with loopback alone, getaddrinfo(AI_ADDRCONFIG) finds no IPv4 configured and
# the daemons cannot bind their ports.
ip link add or0 type veth peer name or1 && ip addr add 10.213.255.1/32 dev or0 && ip link set or0 up \
  || die "cannot create the namespace's veth interface"
chmod 755 "$tmp"                                       # munged wants the socket's directory o+x
mkdir -p "$tmp/log" "$tmp/state" "$tmp/spool" "$tmp/munge-key" "$tmp/munge" || die "cannot create directories in $tmp"
chmod 700 "$tmp/munge-key"; chmod 755 "$tmp/munge"
export SLURM_CONF="$tmp/slurm.conf"
pids=()

show_logs() {
  local f
  for f in "$tmp"/log/*.log; do
    [ -s "$f" ] || continue
    echo "--- last lines of $(basename "$f") ---" >&2
    tail -n 15 "$f" >&2
  done
}
stop_all() {
  local rc=${final_rc:-$?}
  trap - EXIT INT TERM HUP
  if [ "${#pids[@]}" -gt 0 ]; then
    scancel --full --quiet --user root 2>/dev/null   # jobs of this (namespaced) cluster only
    kill -TERM "${pids[@]}" 2>/dev/null
    for _ in $(seq 1 25); do
      kill -0 "${pids[@]}" 2>/dev/null || break
      sleep 0.2
    done
    kill -KILL "${pids[@]}" 2>/dev/null
  fi
  exit "$rc"                                         # PID 1 exits: the kernel kills the rest
}
final_rc=""
trap stop_all EXIT
trap 'final_rc=143; exit 143' TERM
trap 'final_rc=130; exit 130' INT
trap 'final_rc=129; exit 129' HUP
setup_fail() { echo "$prog: $*" >&2; show_logs; final_rc=2; exit 2; }

# munge: a fresh key, every path in the temporary directory
head -c 1024 /dev/urandom > "$tmp/munge-key/munge.key" && chmod 400 "$tmp/munge-key/munge.key" || setup_fail "cannot write the munge key"
munged --foreground --socket="$tmp/munge/munge.socket" --key-file="$tmp/munge-key/munge.key" \
  --log-file="$tmp/log/munged.log" --pid-file="$tmp/munge/munged.pid" --seed-file="$tmp/munge/munged.seed" \
  </dev/null >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 1 50); do [ -S "$tmp/munge/munge.socket" ] && break; sleep 0.1; done
munge -S "$tmp/munge/munge.socket" -n 2>/dev/null | unmunge -S "$tmp/munge/munge.socket" >/dev/null 2>&1 \
  || setup_fail "munged does not answer on $tmp/munge/munge.socket"

: > "$tmp/plugstack.conf"
cat > "$SLURM_CONF" <<EOF
# Generated by $prog: a single-node cluster in $tmp, removed when the run ends.
ClusterName=optireduce
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=6817
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$tmp/munge/munge.socket
CredType=cred/munge
MailProg=/bin/true
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
PlugStackConfig=$tmp/plugstack.conf
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
InactiveLimit=0
KillWait=5
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=60 State=UP OverSubscribe=YES
EOF

slurmctld -D -i -c -f "$SLURM_CONF" </dev/null >/dev/null 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" -N "$node" </dev/null >/dev/null 2>&1 &
pids+=($!)
state=""
for _ in $(seq 1 $((ready_timeout * 2))); do
  state=$(sinfo -h -n "$node" -o %T 2>/dev/null)
  [ "$state" = idle ] && break
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || setup_fail "a daemon exited during start-up (pid $p)"; done
  sleep 0.5
done
[ "$state" = idle ] || setup_fail "node $node is not idle after ${ready_timeout} s (state: \"${state:-no answer}\")"
echo "$prog: single-node Slurm up in $tmp (node $node, $cpus CPUs, SLURM_CONF=$SLURM_CONF)" >&2

"$@" <&0 &
cmd=$!
wait "$cmd"
final_rc=$?
[ "$final_rc" = 0 ] || show_logs
exit "$final_rc"

#!/usr/bin/env bash
# cluster.sh: a small cluster of "hosts" on one machine, one network namespace per host, each
# linked by a veth pair to a switch (a Linux bridge in a namespace of its own), with per-link loss
# (nftables random drop in the switch) and per-link shaping (tc tbf), and an MPI job with one or
# more ranks per host (--ranks-per-host) launched through Open MPI's rsh agent replaced by a script
# that enters the host.
#
#   scripts/cluster.sh [options] -- command [args...]      run a command on host 0 (the head node)
#   scripts/cluster.sh [options] --mpirun -- [mpirun args...]  the same, mpirun with the cluster's
#                                                          hostfile, rsh agent and TCP-only options
#   scripts/cluster.sh [options] --each-host -- command [args...]  the command on every host at
#                                                          once (a job without MPI: torchrun's ranks)
#   scripts/cluster.sh [options] --self-test               check the links: loss per path, isolation
#
# Run with --help for the options. Needs root (network and UTS namespaces, nftables, tc).
#
# Topology (nothing is created in the machine's own namespace; its interfaces, addresses and
# routes are never touched):
#
#   namespace orcl-<pid>-h<i> (host i, hostname h<i>, eth0 = 10.213.0.<i+1>/24, lo)
#        eth0 ===veth=== port h<i> of bridge br0 in namespace orcl-<pid>-sw (no address)
#
# The only addresses are 10.213.0.1..N, and they exist only inside the host namespaces, whose only
# route is 10.213.0.0/24 on eth0: a process in a host cannot reach anything else.
#
# Link i is the veth of host i. In the switch, every IPv4 frame that comes up link i (from host i)
# and every one that goes down link i (to host i) is counted and dropped with the link's
# probability (nftables bridge family, forward hook: the sender sees a real loss in the network,
# not a local send error). A packet from host i to host j therefore crosses link i up and link j
# down: with loss p on both, it is lost with probability 1-(1-p)^2. ARP is never dropped. Shaping:
# tc tbf on host i's eth0 (uplink) and on switch port h<i> (downlink), so incast onto one host is
# limited by that host's downlink. GSO is capped to one segment on every link so that loss and
# shaping apply to wire-sized packets (a veth carries 64 KiB TSO super-packets otherwise).
# Receive offload (GRO) is off by default: every frame is received alone. --gro on turns it on at
# each host's eth0, as a real host's NIC has it, and never in the switch: frames are still dropped
# and shaped one by one on their way, and only those that reached a host may be joined there. A
# veth joins frames only with GRO on (which gives it a NAPI context) and only frames from a peer
# without TSO, so the switch's ports then have TSO off (every frame is one segment anyway).
#
# Host identity: every command entered into host i (the command on host 0, every process Open MPI
# starts there) runs in a UTS namespace whose host name is h<i>, and in a mount namespace whose
# /dev/shm is a directory of host i's own (/dev/shm/orcl-<pid>-h<i>, removed at the end) and whose
# boot id (/proc/sys/kernel/random/boot_id) is host i's own. So Open MPI and the engine (which
# group ranks by host name) see N distinct nodes; the ranks of one host share memory with each
# other; UCX, which puts two processes on shared memory only when their boot ids match, never
# does so across hosts; and no file in one host's /dev/shm is seen in another. /tmp, the rest of
# the file system and the process table stay shared. Holding UCX's network lanes to the links is
# then enough for the engine: -x OPTIREDUCE_UCX_NET_DEVICES=eth0 (shared memory inside a host, TCP
# over eth0 across). Open MPI: --mca pml ob1 --mca btl tcp,self; --mpirun adds this.
#
# The command runs on host 0 with these variables set (names without the OPTIREDUCE_ prefix, which
# the library would reject as unknown settings):
#   CLUSTER_HOSTFILE    Open MPI hostfile: one "10.213.0.<i+1> slots=L" line per host
#   CLUSTER_RANKS_PER_HOST  L (--ranks-per-host)
#   CLUSTER_RSH_AGENT   the rsh agent: `agent <address|h<i>> command...` runs the command in host i
#   CLUSTER_HOSTS       the addresses, space-separated;  CLUSTER_SIZE  the number of hosts
#   CLUSTER_MPIRUN_ARGS the options --mpirun adds (space-separated, no quoting needed)
#   CLUSTER_HOST_INDEX  with --each-host: i on host i (the command runs on every host)
# e.g.
#   scripts/cluster.sh --hosts 4 --drop-host 2=10 --rate 1gbit --stats stats.json --mpirun -- \
#     -x LD_PRELOAD=$PWD/build/lib/liboptireduce.so -x OPTIREDUCE_UCX_NET_DEVICES=eth0 \
#     build/bin/optireduce-bench latency --sizes 16M
#
# Cleanup: when the command ends, or on INT/TERM/HUP, every process in every namespace of the
# cluster is killed and the namespaces, the hosts' /dev/shm directories and the temporary directory
# are removed. Namespaces left by
# a cluster.sh killed with SIGKILL are removed by the next run. Exit code: the command's (128 +
# signal when interrupted); 2 with one line on stderr when the cluster cannot be set up.
set -uo pipefail

prog=cluster.sh
usage() {
  cat <<'EOF'
usage: scripts/cluster.sh [options] -- command [args...]
       scripts/cluster.sh [options] --mpirun -- [mpirun args...]
       scripts/cluster.sh [options] --each-host -- command [args...]
       scripts/cluster.sh [options] --self-test

Builds N network namespaces ("hosts" h0..h<N-1>, 10.213.0.1..N on eth0) linked by veth pairs to
a bridge in a namespace of its own, with per-link loss (nftables) and shaping (tc tbf), runs the
command on host 0 and removes everything afterwards. Each host has its own host name, /dev/shm and
boot id: its ranks share memory with each other, never with another host's. Root only. Exit code:
the command's.

options (a per-host option overrides the all-hosts one whatever their order):
  --hosts N            number of hosts, 2..32 (default 4)
  --ranks-per-host L   MPI ranks on each host, 1..64 (default 1): the hostfile's slots; --mpirun
                       starts N x L ranks filling each host in order (a later -np below N x L
                       fills hosts in order: --hosts 2 --ranks-per-host 3 -np 5 gives 3 + 2)
  --drop PERMILLE      loss of every link, per direction, per mille (0..1000, decimals allowed)
  --drop-host I=PERMILLE   loss of host I's link (repeatable)
  --rate RATE          shape every link, both directions, with tc tbf (tc syntax: 1gbit, 500mbit)
  --rate-host I=RATE   shape host I's link (repeatable)
  --burst SIZE         tbf bucket (tc syntax, default 64kb)
  --gro on|off         receive offload (GRO) on each host's eth0, as a real NIC has it (default
                       off; on needs ethtool): frames that reached a host may be joined for its
                       sockets (TCP, and UDP sockets that ask with UDP_GRO); loss and shaping stay
                       per frame
  --stats FILE         write the links' counters as JSON to FILE at the end
  --mpirun             the command is mpirun's arguments: runs `mpirun --hostfile H
                       --mca plm_rsh_agent A --mca plm_rsh_no_tree_spawn 1 --mca pml ob1
                       --mca btl tcp,self --mca btl_tcp_if_include 10.213.0.0/24
                       --mca oob_tcp_if_include 10.213.0.0/24 -np N --map-by node <args>`
                       (one rank per host unless the arguments say otherwise after it); with
                       --ranks-per-host L: -np N*L --map-by slot --bind-to none (the hosts share
                       this machine's cores: binding would pile every host's first rank on one)
  --each-host          run the command on every host at once, host i's with CLUSTER_HOST_INDEX=i
                       (a job without MPI, e.g. a torch job's launcher on each host: node rank
                       $CLUSTER_HOST_INDEX, store on host 0 at 10.213.0.1); the first to fail
                       ends the others (SIGTERM); exit code: the first failure's, else 0
  --self-test          instead of a command: UDP datagrams between every pair of hosts; checks
                       the loss of each path against the configured links, and that the hosts
                       have no route outside 10.213.0.0/24
  --self-test-packets N  datagrams per ordered pair of hosts (default 500)
  -q, --quiet          no per-link summary on stderr at the end
  -h, --help           this text

The command sees CLUSTER_HOSTFILE, CLUSTER_RSH_AGENT, CLUSTER_HOSTS, CLUSTER_SIZE,
CLUSTER_RANKS_PER_HOST and CLUSTER_MPIRUN_ARGS (and CLUSTER_HOST_INDEX with --each-host). OptiReduce needs only -x
OPTIREDUCE_UCX_NET_DEVICES=eth0: UCX's network lanes go over the links and its shared memory
stays inside each host (hosts differ in boot id and /dev/shm). Open MPI: --mpirun holds it to TCP
(--mca pml ob1 --mca btl tcp,self).
EOF
}

die_setup() {  # one line, exit 2: the cluster could not be set up
  echo "$prog: $*" >&2
  exit 2
}
need_arg() { [ $# -ge 2 ] || die_setup "$1 needs a value (see --help)"; }
# per mille (decimal) -> ppm integer, or failure when invalid
permille_to_ppm() {
  awk -v v="$1" 'BEGIN { if (v !~ /^[0-9]+(\.[0-9]+)?$/ || v + 0 > 1000) exit 1; printf "%d\n", v * 1000 + 0.5 }'
}

hosts=4
ranks_per_host=1
all_ppm=0
all_rate=""
burst="64kb"
gro=off
stats_file=""
mode=command
self_test_packets=500
quiet=0
declare -A host_ppm=() host_rate=()

while [ $# -gt 0 ]; do
  case "$1" in
    --hosts)
      need_arg "$@"
      [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge 2 ] && [ "$2" -le 32 ] || die_setup "--hosts \"$2\" must be an integer from 2 to 32"
      hosts=$2; shift 2 ;;
    --ranks-per-host)
      need_arg "$@"
      [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] && [ "$2" -le 64 ] || die_setup "--ranks-per-host \"$2\" must be an integer from 1 to 64"
      ranks_per_host=$2; shift 2 ;;
    --drop)
      need_arg "$@"
      all_ppm=$(permille_to_ppm "$2") || die_setup "--drop \"$2\" is not a per mille value from 0 to 1000"
      shift 2 ;;
    --drop-host)
      need_arg "$@"
      [[ "$2" =~ ^([0-9]+)=(.+)$ ]] || die_setup "--drop-host \"$2\" is not HOST=PERMILLE"
      host_ppm[${BASH_REMATCH[1]}]=$(permille_to_ppm "${BASH_REMATCH[2]}") \
        || die_setup "--drop-host \"$2\": \"${BASH_REMATCH[2]}\" is not a per mille value from 0 to 1000"
      shift 2 ;;
    --rate) need_arg "$@"; all_rate=$2; shift 2 ;;
    --rate-host)
      need_arg "$@"
      [[ "$2" =~ ^([0-9]+)=(.+)$ ]] || die_setup "--rate-host \"$2\" is not HOST=RATE"
      host_rate[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}; shift 2 ;;
    --burst) need_arg "$@"; burst=$2; shift 2 ;;
    --gro)
      need_arg "$@"
      [[ "$2" =~ ^(on|off)$ ]] || die_setup "--gro \"$2\" must be on or off"
      gro=$2; shift 2 ;;
    --stats) need_arg "$@"; stats_file=$2; shift 2 ;;
    --mpirun) mode=mpirun; shift ;;
    --each-host) mode=each-host; shift ;;
    --self-test) mode=self-test; shift ;;
    --self-test-packets)
      need_arg "$@"
      [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge 50 ] || die_setup "--self-test-packets \"$2\" must be an integer >= 50"
      self_test_packets=$2; shift 2 ;;
    -q|--quiet) quiet=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) die_setup "unknown option \"$1\" (the command goes after --; see --help)" ;;
  esac
done

for i in "${!host_ppm[@]}" "${!host_rate[@]}"; do
  [ "$i" -lt "$hosts" ] || die_setup "host $i does not exist (--hosts $hosts: hosts 0..$((hosts - 1)))"
done
case $mode in
  command|each-host) [ $# -gt 0 ] || die_setup "no command given (usage: $prog [options] -- command [args...]; see --help)" ;;
  self-test) [ $# -eq 0 ] || die_setup "--self-test takes no command" ;;
  mpirun) ;;
esac

[ "$(id -u)" -eq 0 ] || die_setup "must run as root (network and UTS namespaces, nftables and tc need CAP_NET_ADMIN and CAP_SYS_ADMIN)"
for tool in ip bridge nft tc unshare nsenter hostname mount; do
  command -v "$tool" >/dev/null 2>&1 || die_setup "\`$tool\` not found (apt-get install iproute2 nftables util-linux hostname)"
done
[ "$gro" = off ] || command -v ethtool >/dev/null 2>&1 || die_setup "\`ethtool\` not found (apt-get install ethtool): --gro on needs it"
if [ "$mode" = mpirun ]; then command -v mpirun >/dev/null 2>&1 || die_setup "\`mpirun\` not found (apt-get install openmpi-bin)"; fi

ppm_of() { echo "${host_ppm[$1]:-$all_ppm}"; }
rate_of() { echo "${host_rate[$1]:-$all_rate}"; }
addr_of() { echo "10.213.0.$(($1 + 1))"; }

prefix="orcl-$$"
sw="$prefix-sw"
shm_root=/dev/shm  # host i's /dev/shm is $shm_root/$prefix-h<i>
created=()     # namespaces to delete
tmp=""
child=""
started=0      # the command was started: the counters mean something

# Namespaces of a cluster.sh that was killed with SIGKILL (no trap): remove them and what runs in them.
for stale in $(ip netns list 2>/dev/null | awk '$1 ~ /^orcl-[0-9]+-(sw|h[0-9]+)$/ { print $1 }'); do
  pid=${stale#orcl-}; pid=${pid%%-*}
  kill -0 "$pid" 2>/dev/null && continue
  echo "cluster: removing stale namespace $stale (its cluster.sh is gone)" >&2
  # shellcheck disable=SC2046
  kill -KILL $(ip netns pids "$stale" 2>/dev/null) 2>/dev/null
  ip netns del "$stale" 2>/dev/null
done
for stale in "$shm_root"/orcl-*-h*; do
  [ -d "$stale" ] || continue
  pid=${stale#"$shm_root"/orcl-}; pid=${pid%%-*}
  [[ "$pid" =~ ^[0-9]+$ ]] && ! kill -0 "$pid" 2>/dev/null && rm -rf "$stale"
done

kill_namespace_processes() {  # $@ = namespaces; TERM for 2 s, then KILL
  local pids i ns
  for i in $(seq 1 20); do
    pids=""
    for ns in "$@"; do pids+=" $(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')"; done
    [ -n "${pids// /}" ] || return 0
    # shellcheck disable=SC2086
    if [ "$i" -le 10 ]; then kill -TERM $pids 2>/dev/null; else kill -KILL $pids 2>/dev/null; fi
    sleep 0.2
  done
}

# "name packets" for every counter of the switch's table
switch_counters() {
  ip netns exec "$sw" nft list table bridge optireduce_cluster 2>/dev/null | awk '
    $1 == "counter" && $3 == "{" { c = $2 }
    $1 == "packets" && c != "" { print c, $2; c = "" }'
}
link_bytes() {  # $1 = host: "rx_bytes tx_bytes" of its eth0
  local ns="$prefix-h$1"
  ip netns exec "$ns" sh -c 'echo $(cat /sys/class/net/eth0/statistics/rx_bytes) $(cat /sys/class/net/eth0/statistics/tx_bytes)' 2>/dev/null || echo "0 0"
}

# One JSON object: the configuration and counters of every link
stats_json() {  # $1 = exit code
  local i counters rx tx
  counters=$(switch_counters)
  {
    printf '{"hosts": %d, "ranks_per_host": %d, "exit_code": %d, "links": [' "$hosts" "$ranks_per_host" "$1"
    for ((i = 0; i < hosts; i++)); do
      read -r rx tx < <(link_bytes "$i")
      [ "$i" -gt 0 ] && printf ', '
      awk -v i="$i" -v addr="$(addr_of "$i")" -v ppm="$(ppm_of "$i")" -v rate="$(rate_of "$i")" \
          -v rx="${rx:-0}" -v tx="${tx:-0}" -v counters="$counters" 'BEGIN {
        n = split(counters, l, "\n")
        for (k = 1; k <= n; k++) { split(l[k], f, " "); v[f[1]] = f[2] }
        us = v["up_seen_" i] + 0; ud = v["up_dropped_" i] + 0
        ds = v["down_seen_" i] + 0; dd = v["down_dropped_" i] + 0
        printf "{\"host\": \"h%d\", \"address\": \"%s\", \"drop_permille\": %g, \"rate\": \"%s\", ", i, addr, ppm / 1000, rate
        printf "\"up_packets\": %d, \"up_dropped\": %d, \"down_packets\": %d, \"down_dropped\": %d, ", us, ud, ds, dd
        printf "\"measured_drop_fraction\": %.6g, \"eth0_rx_bytes\": %d, \"eth0_tx_bytes\": %d}", \
          (us + ds > 0 ? (ud + dd) / (us + ds) : 0), rx, tx }'
    done
    printf ']}\n'
  }
}

summary() {
  local i counters
  counters=$(switch_counters)
  for ((i = 0; i < hosts; i++)); do
    awk -v i="$i" -v counters="$counters" -v ppm="$(ppm_of "$i")" -v rate="$(rate_of "$i")" 'BEGIN {
      n = split(counters, l, "\n")
      for (k = 1; k <= n; k++) { split(l[k], f, " "); v[f[1]] = f[2] }
      printf "cluster: link h%d (drop %g per mille, rate %s): up %d packets, %d dropped; down %d packets, %d dropped\n",
        i, ppm / 1000, (rate == "" ? "unlimited" : rate), v["up_seen_" i], v["up_dropped_" i], v["down_seen_" i], v["down_dropped_" i] }' >&2
  done
}

final_rc=""
cleanup() {
  local rc=${final_rc:-$?}
  trap - EXIT INT TERM HUP
  if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then kill -TERM "$child" 2>/dev/null; fi
  if [ "${#created[@]}" -gt 0 ]; then
    if [ "$mode" != self-test ] && [ "$started" = 1 ]; then
      [ "$quiet" = 1 ] || summary
      if [ -n "$stats_file" ]; then
        stats_json "$rc" > "$stats_file" || echo "$prog: warning: cannot write --stats $stats_file" >&2
      fi
    fi
    kill_namespace_processes "${created[@]}"
    local ns
    for ns in "${created[@]}"; do
      ip netns del "$ns" 2>/dev/null || echo "$prog: warning: could not delete namespace $ns" >&2
    done
  fi
  [ -n "$tmp" ] && rm -rf "$tmp"
  rm -rf "$shm_root/$prefix"-h*
  exit "$rc"
}
on_signal() {
  final_rc=$((128 + $1))
  echo "$prog: interrupted (signal $1): killing what runs in the cluster" >&2
  exit "$final_rc"
}
trap cleanup EXIT
trap 'on_signal 2' INT
trap 'on_signal 15' TERM
trap 'on_signal 1' HUP

tmp=$(mktemp -d /tmp/optireduce-cluster.XXXXXX) || die_setup "cannot create a temporary directory"

# --- the switch ---------------------------------------------------------------------------------
ip netns add "$sw" 2>/dev/null || die_setup "cannot create network namespace $sw (ip netns add failed: no netns support?)"
created+=("$sw")
ip -n "$sw" link set lo up || die_setup "cannot bring lo up in $sw"
ip -n "$sw" link add br0 type bridge || die_setup "cannot create a bridge in $sw"
ip netns exec "$sw" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 2>/dev/null

# --- the hosts ------------------------------------------------------------------------------------
for ((i = 0; i < hosts; i++)); do
  ns="$prefix-h$i"
  ip netns add "$ns" 2>/dev/null || die_setup "cannot create network namespace $ns"
  created+=("$ns")
  # What tells the host's processes apart from other hosts' beyond the network: /dev/shm, boot id.
  mkdir -m 1777 "$shm_root/$ns" || die_setup "cannot create $shm_root/$ns (the /dev/shm of host $i)"
  cat /proc/sys/kernel/random/uuid > "$tmp/boot_id-h$i" || die_setup "cannot make a boot id for host $i"
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 2>/dev/null
  # Both ends are created inside namespaces: nothing ever appears in the machine's own namespace.
  ip -n "$sw" link add "h$i" type veth peer name eth0 netns "$ns" || die_setup "cannot create the veth pair of host $i"
  ip -n "$sw" link set "h$i" gso_max_segs 1 2>/dev/null
  ip -n "$ns" link set eth0 gso_max_segs 1 2>/dev/null
  ip -n "$sw" link set "h$i" master br0 && ip -n "$sw" link set "h$i" up || die_setup "cannot attach host $i to the bridge"
  ip -n "$ns" link set lo up && ip -n "$ns" addr add "$(addr_of "$i")/24" dev eth0 && ip -n "$ns" link set eth0 up \
    || die_setup "cannot configure eth0 of host $i"
  # --gro on: see the top of this file.
  [ "$gro" = off ] || { ip netns exec "$ns" ethtool -K eth0 gro on >/dev/null 2>&1 && ip netns exec "$sw" ethtool -K "h$i" tso off >/dev/null 2>&1; } \
    || die_setup "cannot turn receive offload on at eth0 of host $i (ethtool -K eth0 gro on, and tso off at switch port h$i)"
  rate=$(rate_of "$i")
  if [ -n "$rate" ]; then
    ip -n "$ns" link set eth0 txqueuelen 1000 2>/dev/null
    tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 100ms \
      && tc -n "$sw" qdisc add dev "h$i" root tbf rate "$rate" burst "$burst" latency 100ms \
      || die_setup "tc rejected rate \"$rate\" burst \"$burst\" for host $i"
  fi
done
ip -n "$sw" link set br0 up || die_setup "cannot bring the bridge up"
# Static neighbours: no ARP resolution (whose queue drops the first burst to a new neighbour) and
# no broadcast; every frame on a link is an IPv4 unicast between two hosts.
for ((i = 0; i < hosts; i++)); do
  mac[i]=$(ip -n "$prefix-h$i" -o link show eth0 | awk '{ for (k = 1; k < NF; k++) if ($k == "link/ether") print $(k + 1) }')
done
for ((i = 0; i < hosts; i++)); do
  # ... and a static forwarding entry per port: the bridge never floods a frame to other hosts.
  bridge -n "$sw" fdb replace "${mac[i]}" dev "h$i" master static || die_setup "cannot add the bridge entry of host $i"
  for ((j = 0; j < hosts; j++)); do
    [ "$i" = "$j" ] && continue
    ip -n "$prefix-h$i" neigh replace "$(addr_of "$j")" lladdr "${mac[j]}" dev eth0 nud permanent \
      || die_setup "cannot add the neighbour entry of host $j on host $i"
  done
done

# --- loss: one table in the switch, counters per link and direction -------------------------------
{
  echo "table bridge optireduce_cluster {"
  for ((i = 0; i < hosts; i++)); do
    echo "  counter up_seen_$i { }"; echo "  counter up_dropped_$i { }"
    echo "  counter down_seen_$i { }"; echo "  counter down_dropped_$i { }"
  done
  echo "  chain forward {"
  echo "    type filter hook forward priority 0; policy accept;"
  for ((i = 0; i < hosts; i++)); do
    p=$(ppm_of "$i")
    echo "    ether type ip iifname \"h$i\" counter name \"up_seen_$i\""
    [ "$p" -gt 0 ] && echo "    ether type ip iifname \"h$i\" numgen random mod 1000000 < $p counter name \"up_dropped_$i\" drop"
    echo "    ether type ip oifname \"h$i\" counter name \"down_seen_$i\""
    [ "$p" -gt 0 ] && echo "    ether type ip oifname \"h$i\" numgen random mod 1000000 < $p counter name \"down_dropped_$i\" drop"
  done
  echo "  }"
  echo "}"
} > "$tmp/switch.nft"
ip netns exec "$sw" nft -f "$tmp/switch.nft" || die_setup "nftables rejected the switch's rules (kernel without nf_tables bridge / numgen?)"

# --- entering a host, hostfile and rsh agent ------------------------------------------------------
# `enter I command...` runs the command in host I: its network namespace, and a UTS and mount
# namespace of its own with host I's name, /dev/shm and boot id. It starts from this script's
# mount namespace, so that entering a host from inside another (Open MPI's agent, on host 0) sees
# the machine's /dev/shm, not the other host's.
cat > "$tmp/enter" <<EOF
#!/bin/sh
i=\$1; shift
exec nsenter --mount=/proc/$$/ns/mnt --wd="\$PWD" ip netns exec "$prefix-h\$i" unshare --uts --mount -- /bin/sh -c \
  'hostname "h\$0" && mount --bind "$shm_root/$prefix-h\$0" /dev/shm &&
   mount --bind "$tmp/boot_id-h\$0" /proc/sys/kernel/random/boot_id && exec "\$@"' "\$i" "\$@"
EOF
chmod 755 "$tmp/enter"
"$tmp/enter" 0 true || die_setup "cannot enter host 0 (unshare --uts --mount, or a bind mount over /dev/shm or the boot id, failed)"
: > "$tmp/hostfile"
addresses=""
{
  echo '#!/bin/sh'
  echo '# Open MPI rsh agent of one cluster.sh run: `agent HOST command...` runs the command the way ssh'
  echo '# would (words joined, read by a shell) in host HOST (address or h<i>), through the enter script.'
  echo 'while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done  # ssh-style options: none apply'
  echo 'host=$1; shift'
  echo 'case "$host" in'
  for ((i = 0; i < hosts; i++)); do
    echo "  $(addr_of "$i")|h$i) i=$i ;;"
  done
  echo '  *) echo "cluster rsh agent: unknown host \"$host\"" >&2; exit 255 ;;'
  echo 'esac'
  echo "exec $tmp/enter \"\$i\" /bin/sh -c \"\$*\""
} > "$tmp/rsh-agent"
chmod 755 "$tmp/rsh-agent"
for ((i = 0; i < hosts; i++)); do
  echo "$(addr_of "$i") slots=$ranks_per_host" >> "$tmp/hostfile"
  addresses+="${addresses:+ }$(addr_of "$i")"
done
mpirun_args="--hostfile $tmp/hostfile --mca plm_rsh_agent $tmp/rsh-agent --mca plm_rsh_no_tree_spawn 1"
mpirun_args+=" --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include 10.213.0.0/24"
mpirun_args+=" --mca oob_tcp_if_include 10.213.0.0/24"
if [ "$ranks_per_host" = 1 ]; then
  mpirun_args+=" -np $hosts --map-by node"
else
  mpirun_args+=" -np $((hosts * ranks_per_host)) --map-by slot --bind-to none"
fi
export CLUSTER_HOSTFILE="$tmp/hostfile" CLUSTER_RSH_AGENT="$tmp/rsh-agent" CLUSTER_HOSTS="$addresses"
export CLUSTER_SIZE="$hosts" CLUSTER_RANKS_PER_HOST="$ranks_per_host" CLUSTER_MPIRUN_ARGS="$mpirun_args"

describe() {
  local i out=""
  for ((i = 0; i < hosts; i++)); do
    out+=" h$i=$(addr_of "$i")($(awk -v p="$(ppm_of "$i")" 'BEGIN { printf "%g", p / 1000 }')‰"
    [ -n "$(rate_of "$i")" ] && out+=",$(rate_of "$i")"
    out+=")"
  done
  echo "cluster: $hosts hosts ($prefix-h*) of $ranks_per_host rank slot(s), switch $sw, link drop per direction, rate:$out" >&2
}
describe

# --- self-test -----------------------------------------------------------------------------------
if [ "$mode" = self-test ]; then
  py=/usr/bin/python3
  [ -x "$py" ] || py=$(command -v python3) || die_setup "--self-test needs python3"
  rc=0
  # Isolation: a host's only route is the cluster's subnet; nothing else is reachable.
  for ((i = 0; i < hosts; i++)); do
    routes=$(ip -n "$prefix-h$i" -4 route show | awk '{ print $1 }' | sort -u | tr '\n' ' ')
    if [ "$routes" != "10.213.0.0/24 " ]; then
      echo "cluster self-test: FAIL: host h$i has routes \"$routes\", expected only 10.213.0.0/24"; rc=1
    fi
  done
  # Host identity: each host its own boot id (not the machine's) and its own /dev/shm, which every
  # entry into that host shares and no other host sees.
  declare -A boot_ids=()
  for ((i = 0; i < hosts; i++)); do
    id=$("$tmp/enter" "$i" sh -c 'touch "/dev/shm/self-test-$(hostname)" && cat /proc/sys/kernel/random/boot_id')
    [ -n "$id" ] && [ -z "${boot_ids[$id]:-}" ] && [ "$id" != "$(cat /proc/sys/kernel/random/boot_id)" ] \
      || { echo "cluster self-test: FAIL: host h$i's boot id \"$id\" is not its own"; rc=1; }
    boot_ids[$id]=1
  done
  for ((i = 0; i < hosts; i++)); do
    seen=$("$tmp/enter" "$i" sh -c 'cd /dev/shm && echo self-test-*')
    if [ "$seen" != "self-test-h$i" ]; then
      echo "cluster self-test: FAIL: host h$i's /dev/shm holds \"$seen\", expected only its own self-test-h$i"; rc=1
    fi
  done
  [ "$rc" = 0 ] && echo "cluster self-test: each host has its own host name, boot id and /dev/shm: ok"
  # Per path i -> j: datagrams from host i to host j; the receiver counts them. Receivers first.
  for ((j = 0; j < hosts; j++)); do
    ip netns exec "$prefix-h$j" "$py" - "$(addr_of "$j")" "$((hosts - 1))" > "$tmp/rx$j" <<'EOF' &
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
s.bind((sys.argv[1], 5999))
s.settimeout(10.0)
got, done = {}, set()
while len(done) < int(sys.argv[2]):
    try:
        d = s.recv(64).decode()
    except socket.timeout:
        break
    src, kind = d.split()[:2]
    if kind == "end":
        done.add(src)
    elif src not in done:
        got[src] = got.get(src, 0) + 1
for k, v in sorted(got.items()):
    print(k, v)
EOF
  done
  sleep 0.5
  for ((i = 0; i < hosts; i++)); do
    targets=""
    for ((j = 0; j < hosts; j++)); do [ "$j" = "$i" ] || targets+=" $(addr_of "$j")"; done
    # shellcheck disable=SC2086
    ip netns exec "$prefix-h$i" "$py" - "$(addr_of "$i")" "$self_test_packets" $targets <<'EOF' &
import socket, sys, time
me, n, targets = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for k in range(n):
    for t in targets:
        s.sendto(f"{me} data {k}".encode(), (t, 5999))
    if k % 50 == 49:
        time.sleep(0.01)
time.sleep(0.3)
for _ in range(20):   # end markers, repeated: they cross lossy links too
    for t in targets:
        s.sendto(f"{me} end".encode(), (t, 5999))
    time.sleep(0.01)
EOF
  done
  wait
  for ((j = 0; j < hosts; j++)); do
    for ((i = 0; i < hosts; i++)); do
      [ "$i" = "$j" ] && continue
      got=$(awk -v a="$(addr_of "$i")" '$1 == a { print $2 }' "$tmp/rx$j"); got=${got:-0}
      awk -v i="$i" -v j="$j" -v pi="$(ppm_of "$i")" -v pj="$(ppm_of "$j")" -v n="$self_test_packets" -v got="$got" 'BEGIN {
        p = 1 - (1 - pi / 1e6) * (1 - pj / 1e6)      # up link i, then down link j
        m = (n - got) / n
        sd = sqrt(p * (1 - p) / n); tol = 0.5 * p; if (5 * sd > tol) tol = 5 * sd
        lo = p - tol; if (lo < 0) lo = 0; hi = p + tol
        if (p == 0) { lo = 0; hi = 0.005 }   # a clean path: at most the odd datagram (a full socket buffer)
        ok = m >= lo - 1e-12 && m <= hi + 1e-12
        printf "cluster self-test: path h%d -> h%d: expected loss %.1f per mille, %d of %d datagrams arrived: %.1f per mille: %s\n",
          i, j, 1000 * p, got, n, 1000 * m, ok ? "ok" : "FAIL"
        exit ok ? 0 : 1 }' || rc=1
    done
  done
  summary
  echo "cluster self-test: $([ "$rc" = 0 ] && echo PASS || echo FAIL)"
  final_rc=$rc
  exit "$rc"
fi

# --- the command, on host 0 ----------------------------------------------------------------------
if [ "$mode" = mpirun ]; then
  # shellcheck disable=SC2206  # the arguments are words without spaces
  set -- mpirun $mpirun_args "$@"
  echo "cluster: + $*" >&2
fi
# --each-host: one copy per host; the first to fail ends the others (cleanup kills the rest).
if [ "$mode" = each-host ]; then
  started=1
  declare -A host_of_pid=()
  for ((i = 0; i < hosts; i++)); do
    CLUSTER_HOST_INDEX=$i "$tmp/enter" "$i" "$@" </dev/null &
    host_of_pid[$!]=$i
  done
  final_rc=0
  while [ "${#host_of_pid[@]}" -gt 0 ]; do
    wait -n -p done_pid "${!host_of_pid[@]}"
    rc=$?
    [ -n "${done_pid:-}" ] || break
    host=${host_of_pid[$done_pid]}
    unset "host_of_pid[$done_pid]"
    if [ "$rc" != 0 ] && [ "$final_rc" = 0 ]; then
      final_rc=$rc
      echo "$prog: the command on host h$host exited $rc: ending the others" >&2
      kill -TERM "${!host_of_pid[@]}" 2>/dev/null
    fi
  done
  exit "$final_rc"
fi
# Like netem.sh: the command keeps this script's stdin and runs in the background so a signal
# reaches the trap at once.
started=1
"$tmp/enter" 0 "$@" <&0 &
child=$!
wait "$child"
final_rc=$?
child=""
exit "$final_rc"

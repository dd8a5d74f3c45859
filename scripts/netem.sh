#!/usr/bin/env bash
# netem.sh: runs a command inside a fresh network namespace whose only link, the loopback, loses
# packets at random (nftables), is optionally rate-limited (tc tbf) and optionally carries
# background traffic (iperf3 bursts). netem itself is not available on this kind of machine; this
# is the emulation the project measures with.
#
#   scripts/netem.sh [--drop PERMILLE | --drop-percent P | --profile NAME] [--rate RATE] [--bg-* ...] -- command [args...]
#   scripts/netem.sh [--drop PERMILLE | --drop-percent P | --profile NAME] --self-test
#   scripts/netem.sh --profile NAME --measure-tail [--build-dir DIR]
#
# Run with --help for the options. Needs root (network namespaces, nftables, tc).
#
# What the command sees: a namespace "optireduce-<pid>" with only `lo`, up, so every socket it
# opens to 127.0.0.0/8 crosses the lossy loopback. Each packet entering lo (nftables hook input of
# a table created inside the namespace) is dropped with the configured probability, independently;
# a TCP segment or a UDP datagram crosses input exactly once, so the drop rate per packet is the
# configured one. The namespace is deleted, and every process left in it is killed, when the
# command ends or when this script is interrupted (INT, TERM, HUP). The exit code is the
# command's (128 + signal if it was killed); 2 with a one-line message on stderr when the
# namespace cannot be set up (not root, no `ip netns`, no nftables, no iperf3 for a profile that
# needs it).
#
# Tail profiles (tail-3, tail-6): a shared cloud's tail comes from other tenants' traffic, not
# from loss. Inside the namespace an iperf3 server runs and a generator starts iperf3 bursts
# against it: each burst sends --bg-burst bytes over --bg-flows TCP streams at --bg-rate per
# stream, then the generator sleeps an exponentially distributed gap of mean --bg-gap-ms (random,
# so bursts do not lock to the measured job's period). A collective that meets a burst queues
# behind it (in tbf's queue when --rate is set, else in the sockets and on the CPU), which is the
# rare slow call the profiles are about. The profiles were calibrated on the project's 2-core
# machine so that Open MPI over TCP, 4 ranks, 4 MiB allreduce (the "tail probe", see
# --measure-tail) shows P99/P50 of about 3 and 6; a quiet loopback there shows about 2. Load from
# other users of the machine moves these figures: measure them with every result (scripts/bench.sh
# gives Open MPI's p99/p50 of each run: it is the baseline).
#
# WARNING: a network namespace isolates sockets only. Processes in it share /dev/shm, /tmp, the
# host name and the file system with the host, so shared-memory transports never touch the lossy
# loopback and make a measurement meaningless. Force TCP:
#   Open MPI: --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo
#   OptiReduce (UCX): -x OPTIREDUCE_UCX_TLS=tcp   (and OPTIREDUCE_UCX_NET_DEVICES=lo if needed)
#   UCX-based MPI or anything else using UCX: UCX_TLS=tcp
# e.g.
#   scripts/netem.sh --profile loss-1 -- mpirun -np 4 --oversubscribe \
#     --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
#     -x LD_PRELOAD=$PWD/build/lib/liboptireduce.so -x OPTIREDUCE_UCX_TLS=tcp build/bin/optireduce-bench latency
set -uo pipefail

prog=netem.sh
usage() {
  cat <<'EOF'
usage: scripts/netem.sh [options] -- command [args...]
       scripts/netem.sh [options] --self-test

Runs the command in a fresh network namespace (optireduce-<pid>) whose loopback drops packets at
random (nftables) and is optionally shaped (tc tbf). Root only. Exit code: the command's.

options (later ones override earlier ones):
  --profile NAME       clean (no loss), loss-0.1 (1 per mille), loss-1 (10 per mille),
                       loss-3 (30 per mille), tail-3, tail-6 (no loss; lo shaped to 4gbit and
                       shared with iperf3 bursts: 8 streams, 128M, 100 ms tbf queue, mean gap
                       800 ms; 24 streams, 384M, 300 ms queue, gap 700 ms; calibrated so Open
                       MPI/TCP, 4 ranks, 4 MiB allreduce shows P99/P50 about 3 and 6)
  --drop PERMILLE      drop this many packets per 1000 entering lo (0..1000, decimals allowed)
  --drop-percent P     the same in percent (0..100, decimals allowed, e.g. 0.1)
  --only PROTO         drop (and count) only packets of this protocol: udp or tcp (default: all).
                       Tests of a datagram transport use udp: the launcher's own control traffic
                       (mpirun, orted and PMIx talk TCP over this loopback) then stays whole;
                       Open MPI 4.1 reports a process that finalised cleanly as "exiting
                       improperly" when its last PMIx message is still being retransmitted
  --rate RATE          shape lo with tc tbf at this rate (tc syntax: 1gbit, 500mbit, 100mbps)
  --burst SIZE         tbf bucket size (tc syntax, default 1mb; must exceed lo's 64 KiB MTU)
  --queue-ms MS        tbf queue: the longest a packet may wait in it (tbf latency, default 100)
  --bg-flows N         background traffic: TCP streams per iperf3 burst (0: none)
  --bg-rate RATE       iperf3 -b per stream (iperf3 syntax, e.g. 2G; 0 = unlimited)
  --bg-burst SIZE      bytes per burst (iperf3 -n syntax, e.g. 64M)
  --bg-gap-ms MS       mean of the exponential gap between bursts
  --stats FILE         write the profile and the drop counters as JSON to FILE at the end
  --measure-tail       instead of a command: run the tail probe (Open MPI over TCP, 4 ranks,
                       4 MiB float32 allreduce, --probe-iters calls, max over ranks per call)
                       in the profile and print its P50, P99 and P99/P50 (JSON with --stats)
  --probe-iters N      calls the tail probe times (default 200)
  --build-dir DIR      build whose bin/optireduce-bench the probe runs (default build)
  --self-test          instead of a command: send UDP datagrams over the namespace's loopback,
                       count the drops (nftables counters and datagrams lost) and check the
                       measured rate against the configured one (default drop: 100 per mille)
  --self-test-packets N  datagrams the self-test sends (default 2000)
  -h, --help           this text

Shared memory bypasses the emulated link: force TCP (Open MPI: --mca pml ob1 --mca btl tcp,self;
OptiReduce: -x OPTIREDUCE_UCX_TLS=tcp).
EOF
}

die_setup() {  # one line, exit 2: the namespace could not be set up
  echo "$prog: $*" >&2
  exit 2
}

drop_ppm=""          # parts per million; numgen random mod 1000000 < drop_ppm
only=""              # udp or tcp: the protocol the rule applies to (empty: every packet)
profile=""
rate=""
burst="1mb"
queue_ms=100
stats_file=""
self_test=0
measure_tail=0
probe_iters=200
build_dir=build
bg_flows=0
bg_rate=0
bg_burst=32M
bg_gap_ms=1000
self_test_packets=2000

# per mille (decimal) -> ppm integer, or empty when invalid
permille_to_ppm() {
  awk -v v="$1" 'BEGIN { if (v !~ /^[0-9]+(\.[0-9]+)?$/ || v + 0 > 1000) exit 1; printf "%d\n", v * 1000 + 0.5 }'
}

set_profile() {
  case "$1" in
    clean) drop_ppm=0 ;;
    loss-0.1) drop_ppm=1000 ;;
    loss-1) drop_ppm=10000 ;;
    loss-3) drop_ppm=30000 ;;
    # Calibrated on the project's 2-core machine while it was shared (load average 12-15): the
    # tail probe (--measure-tail, 200 calls) gave P99/P50 2.8 and 3.9 for tail-3, 6.6 and 5.6 for
    # tail-6, 1.9-2.6 for clean. It drifts with the machine's load: measure it with every result.
    # lo shaped to 4 Gbit/s (tbf) and shared with bursts of many iperf3 streams, which fill the
    # tbf queue (up to --queue-ms) and take most of the link while they last.
    tail-3) drop_ppm=0; rate=4gbit; queue_ms=100; bg_flows=8; bg_rate=0; bg_burst=128M; bg_gap_ms=800 ;;
    tail-6) drop_ppm=0; rate=4gbit; queue_ms=300; bg_flows=24; bg_rate=0; bg_burst=384M; bg_gap_ms=700 ;;
    *) die_setup "unknown --profile \"$1\"; accepted: clean, loss-0.1, loss-1, loss-3, tail-3, tail-6" ;;
  esac
  profile=$1
}

need_arg() { [ $# -ge 2 ] || die_setup "$1 needs a value (see --help)"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --profile) need_arg "$@"; set_profile "$2"; shift 2 ;;
    --drop)
      need_arg "$@"
      drop_ppm=$(permille_to_ppm "$2") || die_setup "--drop \"$2\" is not a per mille value from 0 to 1000"
      profile=""; shift 2 ;;
    --drop-percent)
      need_arg "$@"
      pm=$(awk -v v="$2" 'BEGIN { if (v !~ /^[0-9]+(\.[0-9]+)?$/ || v + 0 > 100) exit 1; printf "%.6f\n", v * 10 }') \
        || die_setup "--drop-percent \"$2\" is not a percentage from 0 to 100"
      drop_ppm=$(permille_to_ppm "$pm"); profile=""; shift 2 ;;
    --only)
      need_arg "$@"; [[ "$2" =~ ^(udp|tcp)$ ]] || die_setup "--only \"$2\": accepted: udp, tcp"
      only=$2; shift 2 ;;
    --rate) need_arg "$@"; rate=$2; shift 2 ;;
    --burst) need_arg "$@"; burst=$2; shift 2 ;;
    --queue-ms)
      need_arg "$@"; [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] || die_setup "--queue-ms \"$2\" must be a positive integer"
      queue_ms=$2; shift 2 ;;
    --stats) need_arg "$@"; stats_file=$2; shift 2 ;;
    --bg-flows)
      need_arg "$@"; [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -le 64 ] || die_setup "--bg-flows \"$2\" must be an integer 0..64"
      bg_flows=$2; shift 2 ;;
    --bg-rate)
      need_arg "$@"; [[ "$2" =~ ^[0-9]+(\.[0-9]+)?[KMGkmg]?$ ]] || die_setup "--bg-rate \"$2\" is not an iperf3 rate (e.g. 500M, 2G, 0)"
      bg_rate=$2; shift 2 ;;
    --bg-burst)
      need_arg "$@"; [[ "$2" =~ ^[0-9]+[KMGkmg]?$ ]] || die_setup "--bg-burst \"$2\" is not a size (e.g. 32M)"
      bg_burst=$2; shift 2 ;;
    --bg-gap-ms)
      need_arg "$@"; [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] || die_setup "--bg-gap-ms \"$2\" must be a positive integer"
      bg_gap_ms=$2; shift 2 ;;
    --measure-tail) measure_tail=1; shift ;;
    --probe-iters)
      need_arg "$@"; [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge 10 ] || die_setup "--probe-iters \"$2\" must be an integer >= 10"
      probe_iters=$2; shift 2 ;;
    --build-dir) need_arg "$@"; build_dir=$2; shift 2 ;;
    --self-test) self_test=1; shift ;;
    --self-test-packets)
      need_arg "$@"
      [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge 100 ] || die_setup "--self-test-packets \"$2\" must be an integer >= 100"
      self_test_packets=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) die_setup "unknown option \"$1\" (the command goes after --; see --help)" ;;
  esac
done

if [ "$measure_tail" = 1 ]; then
  [ $# -eq 0 ] || die_setup "--measure-tail takes no command"
  [ "$self_test" = 0 ] || die_setup "--measure-tail and --self-test exclude each other"
  [ -n "$drop_ppm" ] || { drop_ppm=0; profile=clean; }
  here=$(cd "$(dirname "$0")" && pwd)
  probe_sh=$here/bench/probe.sh
  [ -x "$probe_sh" ] || die_setup "--measure-tail needs $probe_sh"
  case "$build_dir" in /*) ;; *) build_dir=$(cd "$here/.." && pwd)/$build_dir ;; esac
  [ -x "$build_dir/bin/optireduce-bench" ] || die_setup "no $build_dir/bin/optireduce-bench (build it, or pass --build-dir)"
  set -- "$probe_sh" "$build_dir" "$probe_iters"
elif [ "$self_test" = 1 ]; then
  [ $# -eq 0 ] || die_setup "--self-test takes no command"
  [ -n "$drop_ppm" ] || drop_ppm=100000
else
  [ $# -gt 0 ] || die_setup "no command given (usage: $prog [options] -- command [args...]; see --help)"
  [ -n "$drop_ppm" ] || { drop_ppm=0; profile=clean; }
fi

[ "$(id -u)" -eq 0 ] || die_setup "must run as root (network namespaces, nftables and tc need CAP_NET_ADMIN)"
command -v ip >/dev/null 2>&1 || die_setup "\`ip\` not found: apt-get install iproute2"
command -v nft >/dev/null 2>&1 || die_setup "\`nft\` not found: apt-get install nftables"
if [ -n "$rate" ]; then command -v tc >/dev/null 2>&1 || die_setup "\`tc\` not found: apt-get install iproute2"; fi
if [ "$bg_flows" -gt 0 ]; then command -v iperf3 >/dev/null 2>&1 || die_setup "\`iperf3\` not found (profile ${profile:-custom} needs background traffic): apt-get install iperf3"; fi

ns="optireduce-$$"
ns_created=0
child=""

# A run killed with SIGKILL (no trap) leaves its namespace behind: remove those of netem.sh runs
# whose process is gone, with whatever still runs in them.
for stale in $(ip netns list 2>/dev/null | awk '$1 ~ /^optireduce-[0-9]+$/ { print $1 }'); do
  kill -0 "${stale#optireduce-}" 2>/dev/null && continue
  echo "netem: removing stale namespace $stale (its netem.sh is gone)" >&2
  # shellcheck disable=SC2046
  kill -KILL $(ip netns pids "$stale" 2>/dev/null) 2>/dev/null
  ip netns del "$stale" 2>/dev/null
done

kill_namespace_processes() {
  local pids i
  for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
    pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
    [ -n "${pids// /}" ] || return 0
    if [ "$i" -le 10 ]; then
      # shellcheck disable=SC2086
      kill -TERM $pids 2>/dev/null
    else
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null
    fi
    sleep 0.2
  done
}

drop_counters() {  # prints "seen dropped" of the namespace's nftables counters
  ip netns exec "$ns" nft list counters 2>/dev/null | awk '
    /counter seen/ { c = "seen" } /counter dropped/ { c = "dropped" }
    /packets/ { for (i = 1; i <= NF; i++) if ($i == "packets") v[c] = $(i + 1) }
    END { printf "%d %d\n", v["seen"], v["dropped"] }'
}

describe() {
  local pm
  pm=$(awk -v p="$drop_ppm" 'BEGIN { printf "%g", p / 1000 }')
  printf 'profile %s: drop %s per mille (%s%%) of %spackets entering lo, rate %s' \
    "${profile:-custom}" "$pm" "$(awk -v p="$drop_ppm" 'BEGIN { printf "%g", p / 10000 }')" "${only:+$only }" "${rate:-unlimited}"
  [ -n "$rate" ] && printf ' (tbf queue %s ms)' "$queue_ms"
  [ "$bg_flows" -gt 0 ] && printf ', background: iperf3 bursts of %s over %s stream(s) at %s each, mean gap %s ms' \
    "$bg_burst" "$bg_flows" "$bg_rate" "$bg_gap_ms"
}

write_stats() {  # $1 = exit code of the command
  [ -n "$stats_file" ] || return 0
  local seen dropped
  read -r seen dropped < <(drop_counters)
  awk -v prof="${profile:-custom}" -v ppm="$drop_ppm" -v rate="${rate:-}" -v seen="$seen" -v dropped="$dropped" \
      -v ns="$ns" -v rc="$1" -v bgf="$bg_flows" -v bgr="$bg_rate" -v bgb="$bg_burst" -v bgg="$bg_gap_ms" \
      -v bgn="$(bg_bursts)" -v qms="$queue_ms" -v tail="$(cat "$probe_json" 2>/dev/null)" 'BEGIN {
    printf "{\"namespace\": \"%s\", \"profile\": \"%s\", \"drop_permille\": %g, \"rate\": \"%s\", ", ns, prof, ppm / 1000, rate
    if (rate != "") printf "\"tbf_queue_ms\": %d, ", qms
    printf "\"background\": {\"flows\": %d, \"rate\": \"%s\", \"burst\": \"%s\", \"gap_ms\": %d, \"bursts\": %d}, ", bgf, bgr, bgb, bgg, bgn
    if (tail != "") printf "\"tail_probe\": %s, ", tail
    printf "\"lo_input_packets\": %d, \"lo_input_dropped\": %d, \"measured_drop_fraction\": %.6g, \"exit_code\": %d}\n",
      seen, dropped, (seen > 0 ? dropped / seen : 0), rc }' > "$stats_file" \
    || echo "$prog: warning: cannot write --stats $stats_file" >&2
}

bg_dir=""
probe_json=""
bg_bursts() {  # bursts the generator started so far
  [ -n "$bg_dir" ] && [ -f "$bg_dir/bursts" ] && wc -l <"$bg_dir/bursts" | tr -d ' ' || echo 0
}

final_rc=""
cleanup() {
  local rc=${final_rc:-$?}
  trap - EXIT INT TERM HUP
  if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
    kill -TERM "$child" 2>/dev/null
  fi
  if [ "$ns_created" = 1 ]; then
    if [ "$self_test" = 0 ]; then
      local seen dropped
      read -r seen dropped < <(drop_counters)
      awk -v s="$seen" -v d="$dropped" -v ns="$ns" 'BEGIN {
        printf "netem: %s: %d packets entered lo, %d dropped (%.3f per mille)\n", ns, s, d, (s > 0 ? 1000 * d / s : 0) }' >&2
      write_stats "$rc"
    fi
    kill_namespace_processes
    ip netns del "$ns" 2>/dev/null || echo "$prog: warning: could not delete namespace $ns" >&2
  fi
  [ -n "$bg_dir" ] && rm -rf "$bg_dir"
  exit "$rc"
}
on_signal() {
  final_rc=$((128 + $1))
  echo "$prog: interrupted (signal $1): killing what runs in $ns" >&2
  exit "$final_rc"
}
trap cleanup EXIT
trap 'on_signal 2' INT
trap 'on_signal 15' TERM
trap 'on_signal 1' HUP

ip netns add "$ns" 2>/dev/null || die_setup "cannot create network namespace $ns (ip netns add failed: no netns support?)"
ns_created=1
ip netns exec "$ns" ip link set lo up || die_setup "cannot bring lo up in $ns"
# One table, made inside the namespace: it disappears with it. Counters: what entered lo's input
# hook, what the random rule dropped there.
ip netns exec "$ns" nft -f - <<EOF || die_setup "nftables rejected the drop rule (kernel without nf_tables / numgen?)"
table inet optireduce_netem {
  counter seen { }
  counter dropped { }
  chain input {
    type filter hook input priority 0; policy accept;
    ${only:+meta l4proto $only} counter name "seen"
    ${only:+meta l4proto $only} numgen random mod 1000000 < $drop_ppm counter name "dropped" drop
  }
}
EOF
if [ -n "$rate" ]; then
  ip netns exec "$ns" tc qdisc add dev lo root tbf rate "$rate" burst "$burst" latency "${queue_ms}ms" \
    || die_setup "tc rejected --rate \"$rate\" --burst \"$burst\""
fi
echo "netem: namespace $ns: $(describe)" >&2

if [ "$bg_flows" -gt 0 ]; then
  # Background traffic: an iperf3 server and a burst generator, both inside the namespace (so the
  # namespace's teardown kills them with everything else). The generator logs one line per burst.
  bg_dir=$(mktemp -d /tmp/netem-bg.XXXXXX) || die_setup "cannot make a temporary directory"
  : >"$bg_dir/bursts"
  bg_port=5201
  ip netns exec "$ns" iperf3 -s -p "$bg_port" >"$bg_dir/server.log" 2>&1 &
  ip netns exec "$ns" bash -c '
    port=$1 flows=$2 rate=$3 burst=$4 gap=$5 log=$6 seed=$7
    RANDOM=$seed
    for _ in $(seq 50); do iperf3 -c 127.0.0.1 -p "$port" -n 1K >/dev/null 2>&1 && break; sleep 0.1; done
    while :; do
      # exponential gap, mean $gap ms, from bash RANDOM (15 bits)
      ms=$(awk -v r=$RANDOM -v g="$gap" "BEGIN { u = (r + 0.5) / 32768; printf \"%.3f\", -log(u) * g / 1000 }")
      sleep "$ms"
      echo "$(date +%s.%N) $ms" >>"$log"
      iperf3 -c 127.0.0.1 -p "$port" -P "$flows" -b "$rate" -n "$burst" -l 128K >/dev/null 2>&1
    done' netem-bg "$bg_port" "$bg_flows" "$bg_rate" "$bg_burst" "$bg_gap_ms" "$bg_dir/bursts" "$$" &
fi

if [ "$self_test" = 1 ]; then
  # UDP datagrams one way over lo, in batches the receive buffer holds, then the counters: every
  # datagram crosses the input hook once, so both figures estimate the configured drop rate.
  py=/usr/bin/python3
  [ -x "$py" ] || py=$(command -v python3) || die_setup "--self-test needs python3"
  out=$(ip netns exec "$ns" "$py" - "$self_test_packets" <<'EOF'
import select, socket, sys
n = int(sys.argv[1])
rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
rx.bind(("127.0.0.1", 0))
tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sent = got = 0
while sent < n:
    batch = min(50, n - sent)
    for _ in range(batch):
        tx.sendto(b"optireduce-netem", rx.getsockname())
    sent += batch
    while select.select([rx], [], [], 0.05)[0]:
        rx.recv(64)
        got += 1
print(sent, got)
EOF
  ) || { echo "$prog: self-test traffic failed" >&2; final_rc=1; exit 1; }
  read -r sent got <<<"$out"
  read -r seen dropped < <(drop_counters)
  awk -v ppm="$drop_ppm" -v seen="$seen" -v dropped="$dropped" -v sent="$sent" -v got="$got" -v ns="$ns" 'BEGIN {
    p = ppm / 1e6
    m = seen > 0 ? dropped / seen : 0
    u = sent > 0 ? (sent - got) / sent : 0
    # Generous: half to one and a half times the configured rate, or 5 standard deviations of a
    # binomial when that is wider; exactly zero when nothing is to be dropped.
    sd = seen > 0 ? sqrt(p * (1 - p) / seen) : 1
    tol = 0.5 * p; if (5 * sd > tol) tol = 5 * sd
    lo = p - tol; if (lo < 0) lo = 0; hi = p + tol
    if (p == 0) { lo = 0; hi = 0 }
    printf "netem self-test: %s: configured drop %.1f per mille\n", ns, 1000 * p
    printf "netem self-test: nftables lo input: %d packets seen, %d dropped: measured %.1f per mille\n", seen, dropped, 1000 * m
    printf "netem self-test: UDP over lo: %d datagrams sent, %d received: lost %.1f per mille\n", sent, got, 1000 * u
    ok = seen >= sent && m >= lo - 1e-12 && m <= hi + 1e-12 && u >= lo - 1e-12 && u <= hi + 1e-12
    printf "netem self-test: %s (accepted %.1f..%.1f per mille)\n", ok ? "PASS" : "FAIL", 1000 * lo, 1000 * hi
    printf "measured_drop_fraction=%.6f configured_drop_fraction=%.6f udp_loss_fraction=%.6f\n", m, p, u
    exit ok ? 0 : 1 }'
  final_rc=$?
  exit "$final_rc"
fi

if [ "$measure_tail" = 1 ]; then
  probe_json=$(mktemp /tmp/netem-probe.XXXXXX) || die_setup "cannot make a temporary file"
  ip netns exec "$ns" "$@" "$probe_json" </dev/null &
  child=$!
  wait "$child"
  final_rc=$?
  child=""
  if [ "$final_rc" = 0 ]; then
    /usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print("netem tail probe: profile %s: Open MPI ob1/tcp, %d ranks, 4 MiB, %d calls: p50 %.2f ms, p99 %.2f ms, P99/P50 %.2f"
      % (sys.argv[2], d["ranks"], d["calls"], d["p50_ms"], d["p99_ms"], d["p99_over_p50"]))' "$probe_json" "${profile:-custom}"
  fi
  write_stats "$final_rc"; stats_file=""
  rm -f "$probe_json"
  exit "$final_rc"
fi

# The command keeps this script's stdin (a background job would get /dev/null otherwise); it runs
# in the background so that a signal reaches the trap at once instead of after the command ends.
ip netns exec "$ns" "$@" <&0 &
child=$!
wait "$child"
final_rc=$?
child=""
exit "$final_rc"

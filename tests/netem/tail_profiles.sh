#!/usr/bin/env bash
# netem.tail_*: the background-traffic profiles of scripts/netem.sh (tail-3, tail-6).
#   tail_profiles.sh NETEM_SH run PROFILE      the profile sets up tbf and iperf3 bursts, traffic
#                                              crosses lo, and everything is gone afterwards
#   tail_profiles.sh NETEM_SH interrupt PROFILE  the same when netem.sh is killed with SIGTERM
#   tail_profiles.sh NETEM_SH nonroot PROFILE  refused with exit 2 and one clear line when not root
# No timing is asserted: only what was set up, that traffic flowed, and the cleanup.
set -uo pipefail
netem=$1 what=$2 profile=$3
work=$(mktemp -d /tmp/netem-tail-test.XXXXXX) || exit 1
trap 'rm -rf "$work"' EXIT

if [ "$what" = nonroot ]; then
  [ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root to drop to another user"; exit 77; }
  command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; exit 77; }
  chmod 755 "$work"
  out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$netem" --profile "$profile" -- true 2>&1)
  rc=$?
  echo "$out"
  [ "$rc" -eq 2 ] || { echo "FAIL: exit $rc, expected 2"; exit 1; }
  grep -q "must run as root" <<<"$out" || { echo "FAIL: no clear refusal"; exit 1; }
  echo "OK: refused as non-root"
  exit 0
fi

. "$(dirname "$0")/skip_unless_netns.sh"
command -v iperf3 >/dev/null || { echo "SKIP: no iperf3 (apt-get install iperf3)"; exit 77; }
command -v tc >/dev/null || { echo "SKIP: no tc"; exit 77; }

# Inside the namespace: record the namespace, its qdisc and, once a burst has moved traffic over
# the namespace's loopback (its packet count in /proc/net/dev, which is per namespace; the gaps
# between bursts are random, so a fixed sleep sometimes saw none: at most 20 s), the processes in
# it (the background generator and iperf3), then wait.
inner='ns=$(ip netns identify $$); echo "$ns" >"$1/ns"; tc qdisc show dev lo >"$1/qdisc"
  for i in $(seq 100); do [ -n "$(ip netns pids "$ns" | xargs -r ps -o comm= -p | grep -x iperf3)" ] && break; sleep 0.1; done
  for i in $(seq 200); do [ "$(awk -F"[: ]+" "/^ *lo:/ {print \$4}" /proc/net/dev)" -gt 5000 ] && break; sleep 0.1; done
  sleep 0.5; ip netns pids "$ns" | xargs -r ps -o pid=,comm= -p >"$1/procs"; touch "$1/ready"; sleep "$2"'

case $what in
  run)
    "$netem" --profile "$profile" --stats "$work/stats.json" -- bash -c "$inner" inner "$work" 1
    rc=$?
    [ "$rc" -eq 0 ] || { echo "FAIL: netem.sh exited $rc"; exit 1; } ;;
  interrupt)
    "$netem" --profile "$profile" --stats "$work/stats.json" -- bash -c "$inner" inner "$work" 600 &
    pid=$!
    for _ in $(seq 300); do [ -f "$work/ready" ] && break; sleep 0.1; done
    [ -f "$work/ready" ] || { kill -KILL "$pid"; echo "FAIL: the command never got ready"; exit 1; }
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    [ "$rc" -eq 143 ] || { echo "FAIL: netem.sh exited $rc after SIGTERM, expected 143"; exit 1; } ;;
  *) echo "usage: tail_profiles.sh NETEM_SH run|interrupt|nonroot PROFILE"; exit 2 ;;
esac

bad=0
ns=$(cat "$work/ns")
echo "namespace $ns; qdisc: $(cat "$work/qdisc")"
echo "processes in it:"; cat "$work/procs"
grep -q "tbf" "$work/qdisc" || { echo "FAIL: no tbf qdisc on lo"; bad=1; }
grep -qw iperf3 "$work/procs" || { echo "FAIL: no iperf3 in the namespace"; bad=1; }
/usr/bin/python3 - "$work/stats.json" "$profile" <<'PY' || bad=1
import json, sys
d = json.load(open(sys.argv[1]))
print("stats:", {k: d[k] for k in ("profile", "rate", "tbf_queue_ms", "background", "lo_input_packets")})
ok = d["profile"] == sys.argv[2] and d["background"]["flows"] > 0 and d["background"]["bursts"] >= 1
# iperf3's bursts are tens of MB: far more packets than the command itself sends (none)
ok = ok and d["lo_input_packets"] > 1000
print("OK: stats" if ok else "FAIL: stats do not show the background traffic")
sys.exit(0 if ok else 1)
PY
sleep 0.5
if ip netns list | awk '{print $1}' | grep -qx "$ns"; then echo "FAIL: namespace $ns still exists"; bad=1; fi
while read -r p comm; do
  # A zombie is not running: in a container whose PID 1 does not reap orphans, a killed
  # process's entry may stay behind after its parent died.
  if kill -0 "$p" 2>/dev/null && [ "$(ps -o comm= -p "$p")" = "$comm" ] && [[ $(ps -o stat= -p "$p") != Z* ]]; then
    echo "FAIL: $comm ($p) of the namespace still runs"; bad=1
  fi
done <"$work/procs"
[ "$bad" = 0 ] && echo "OK: $profile set up, traffic flowed, namespace and background processes gone"
exit "$bad"

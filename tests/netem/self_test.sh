#!/usr/bin/env bash
# netem.self_test: scripts/netem.sh --self-test with PERMILLE configured must measure a drop rate
# within a generous band of it, both as counted by nftables and as UDP datagrams lost.
#   self_test.sh NETEM_SH PERMILLE
set -uo pipefail
netem=$1 permille=$2
. "$(dirname "$0")/skip_unless_netns.sh"

out=$("$netem" --drop "$permille" --self-test 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: netem.sh --self-test exited $rc"; exit 1; }
line=$(grep '^measured_drop_fraction=' <<<"$out") || { echo "FAIL: no measured_drop_fraction line"; exit 1; }
# Checked here too, independently of the self-test's own band: 0.5x to 1.5x the configured rate.
awk -v line="$line" -v pm="$permille" 'BEGIN {
  n = split(line, kv, /[ =]/)
  for (i = 1; i < n; i += 2) v[kv[i]] = kv[i + 1]
  p = pm / 1000; lo = 0.5 * p; hi = 1.5 * p
  bad = 0
  if (v["configured_drop_fraction"] + 0 != p) { print "FAIL: configured " v["configured_drop_fraction"] ", expected " p; bad = 1 }
  if (v["measured_drop_fraction"] < lo || v["measured_drop_fraction"] > hi) { print "FAIL: nftables measured " v["measured_drop_fraction"] ", outside " lo ".." hi; bad = 1 }
  if (v["udp_loss_fraction"] < lo || v["udp_loss_fraction"] > hi) { print "FAIL: UDP loss " v["udp_loss_fraction"] ", outside " lo ".." hi; bad = 1 }
  if (!bad) print "OK: measured " v["measured_drop_fraction"] " (nftables), " v["udp_loss_fraction"] " (UDP), configured " p
  exit bad }'

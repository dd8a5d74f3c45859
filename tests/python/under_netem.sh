#!/bin/bash
# Usage: under_netem.sh NETEM_SH PROFILE STATS_JSON -- COMMAND...
# Runs COMMAND inside a scripts/netem.sh namespace of that profile; passes when it exits 0 and the
# loopback really dropped packets (so the job crossed the lossy link). Exits 77 (skipped) where
# network namespaces are unavailable (not root, no ip/nft).
set -uo pipefail
netem=$1 profile=$2 stats=$3
shift 3
[ "${1:-}" = "--" ] && shift
. "$(dirname "$0")/../netem/skip_unless_netns.sh"
rm -f "$stats"
"$netem" --profile "$profile" --stats "$stats" -- "$@"
rc=$?
[ $rc -eq 0 ] || { echo "under_netem: FAIL: the job exited $rc$([ $rc -eq 124 ] && echo ' (killed by timeout)')"; exit 1; }
dropped=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["lo_input_dropped"])' "$stats")
[ "${dropped:-0}" -gt 0 ] || { echo "under_netem: FAIL: no packet was dropped: the job did not cross the lossy loopback"; exit 1; }
echo "under_netem: PASS: $dropped packets dropped on the loopback"

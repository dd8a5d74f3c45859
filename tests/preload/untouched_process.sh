#!/usr/bin/env bash
# A process that preloads the library but never calls MPI_Init is left exactly as it was: no
# transport library mapped (UCX, libfabric), no signal handler installed, and SIGTERM still ends
# it with status 143 (schedulers and elastic launchers read that as "terminated").
# Usage: untouched_process.sh <liboptireduce.so>
set -euo pipefail
library=$1
fail() { echo "FAIL: $*" >&2; exit 1; }

LD_PRELOAD=$library sleep 30 &
pid=$!
# The loader has mapped the library once /proc shows it.
for _ in $(seq 100); do grep -q liboptireduce /proc/$pid/maps 2>/dev/null && break; sleep 0.05; done
grep -q liboptireduce /proc/$pid/maps || fail "the library was not preloaded into sleep"
caught=$(awk '$1 == "SigCgt:" { print $2 }' /proc/$pid/status)
mapped=$(grep -oE 'lib(ucp|ucs|uct|ucm|fabric)[^ ]*\.so[^ ]*' /proc/$pid/maps | sort -u | tr '\n' ' ' || true)
kill -TERM $pid
status=0
wait $pid || status=$?
[[ $caught == 0000000000000000 ]] || fail "signal handlers installed (SigCgt $caught)"
[[ -z $mapped ]] || fail "transport libraries loaded without MPI_Init: $mapped"
[[ $status == 143 ]] || fail "SIGTERM gave exit status $status, expected 143"
echo "ok: no handler, no transport library, SIGTERM -> 143"

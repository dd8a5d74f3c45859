#!/bin/bash
# Usage: expect_startup_error.sh TEXT... -- COMMAND...
# For configuration that must stop a job at MPI_Init: passes only when COMMAND exits non-zero
# (a timeout, exit 124, is a hang and fails) and exactly one line of its output contains every
# TEXT (one rank reports the error; not zero, not one per rank).
set -u
needles=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do needles+=("$1"); shift; done
[ $# -gt 1 ] || { echo "usage: $0 TEXT... -- COMMAND..." >&2; exit 2; }
shift

output=$(mktemp)
trap 'rm -f "$output" "$output.match" "$output.next"' EXIT
"$@" >"$output" 2>&1
rc=$?
cat "$output"

if [ "$rc" -eq 0 ]; then
  echo "expect_startup_error: FAIL: the job exited 0; a bad configuration must end it with an error" >&2
  exit 1
fi
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  echo "expect_startup_error: FAIL: the job hung and was killed by timeout (exit $rc)" >&2
  exit 1
fi
cp "$output" "$output.match"
for text in "${needles[@]}"; do
  grep -F -- "$text" "$output.match" >"$output.next"
  mv "$output.next" "$output.match"
done
lines=$(wc -l <"$output.match")
if [ "$lines" -ne 1 ]; then
  echo "expect_startup_error: FAIL: $lines lines contain all of: ${needles[*]} (expected exactly 1)" >&2
  exit 1
fi
echo "expect_startup_error: PASS: exit $rc, message: $(cat "$output.match")"

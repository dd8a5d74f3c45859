#!/bin/bash
# Usage: check_cli.sh [--env NAME=VALUE]... CHECK... -- COMMAND...
#   --prints TEXT       COMMAND exits 0, prints exactly TEXT (one line) and nothing on stderr
#   --contains TEXT     COMMAND exits 0 and its output contains TEXT (repeatable)
#   --usage-error TEXT  COMMAND exits 2, prints nothing on stdout and exactly one line on stderr,
#                       which contains TEXT (repeatable: every TEXT)
# COMMAND runs without the caller's OPTIREDUCE_* and LD_PRELOAD, with the --env ones instead, so
# what it forwards is exactly what the test says.
set -u
envs=() prints= has_prints=0 contains=() errors=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case $1 in
    --env) envs+=("$2"); shift 2 ;;
    --prints) prints=$2; has_prints=1; shift 2 ;;
    --contains) contains+=("$2"); shift 2 ;;
    --usage-error) errors+=("$2"); shift 2 ;;
    *) echo "check_cli: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ $# -gt 1 ] || { echo "usage: $0 [--env NAME=VALUE]... CHECK... -- COMMAND..." >&2; exit 2; }
shift
for v in $(compgen -e); do
  case $v in OPTIREDUCE_*|LD_PRELOAD) unset "$v" ;; esac
done
for e in "${envs[@]}"; do export "${e?}"; done

out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
"$@" >"$out" 2>"$err"
rc=$?
echo "check_cli: exit $rc; stdout:"; cat "$out"; echo "check_cli: stderr:"; cat "$err"
failed=0
fail() { echo "check_cli: FAIL: $*" >&2; failed=1; }

if [ ${#errors[@]} -gt 0 ]; then
  [ "$rc" -eq 2 ] || fail "exit status $rc, expected 2"
  [ -s "$out" ] && fail "stdout is not empty"
  lines=$(wc -l <"$err")
  [ "$lines" -eq 1 ] || fail "$lines lines on stderr, expected exactly 1"
  for text in "${errors[@]}"; do grep -qF -- "$text" "$err" || fail "stderr lacks '$text'"; done
else
  [ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
  if [ "$has_prints" = 1 ]; then
    [ "$(cat "$out")" = "$prints" ] || fail "stdout is not exactly: $prints"
    [ "$(wc -l <"$out")" -eq 1 ] || fail "stdout is not one line"
    [ -s "$err" ] && fail "stderr is not empty"
  fi
  for text in "${contains[@]}"; do grep -qF -- "$text" "$out" || fail "stdout lacks '$text'"; done
fi
[ "$failed" -eq 0 ] && echo "check_cli: PASS"
exit "$failed"

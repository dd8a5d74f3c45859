#!/usr/bin/env bash
# Runs scripts/bench.sh tiny (shared memory, 2 ranks, one size, one round, a few calls) and checks
# what it printed, never how fast anything was:
#   ok:    exit 0; a row per contender with a numeric p50 ratio (1.00 for the baseline), every
#          call counted and exact, check "ok"
#   host:  as ok, with --barrier host (each iteration starts at a barrier in shared memory): every
#          contender's JSON and the run's meta say so, and the table's title
#   wrong: --inject-wrong-result makes each contender's first call return one wrong entry: the
#          driver must exit 1 and mark every contender WRONG (the check can fail)
#   nets:  two networks in one run (--net shm,tcp) with --plot: a directory, a table and a latency
#          CDF per network, and table.md joining the two tables
#   check_table.sh ok|host|wrong|nets BENCH_SH BUILD_DIR OUT_DIR
set -uo pipefail
case=$1 bench=$2 build=$3 out=$4
contenders="ompi or-reliable or-bounded"
net=shm
[ "$case" = nets ] && contenders="ompi or-reliable" net=shm,tcp
rm -rf "$out"
args=(--net "$net" --sizes 1M --warmup 3 --iters 3 --rounds 1 --ranks 2 --timeout 100 --contenders "$contenders"
      --build-dir "$build" --out-dir "$out")
[ "$case" = wrong ] && args+=(--inject-wrong-result)
[ "$case" = host ] && args+=(--barrier host)
[ "$case" = nets ] && args+=(--plot)
"$bench" "${args[@]}" >"$out.stdout" 2>"$out.stderr"
rc=$?
cat "$out.stdout"
fail() { echo "FAIL: $*"; echo "--- stderr ---"; tail -n 20 "$out.stderr"; exit 1; }
[ -s "$out/table.md" ] || fail "no table.md in $out"
cmp -s "$out/table.md" <(sed -n '/^## bench/,$p' "$out.stdout" | head -c "$(wc -c <"$out/table.md")") \
  || fail "the table printed on stdout is not table.md"
dirs=("$out")
if [ "$case" = nets ]; then
  dirs=("$out/shm" "$out/tcp")
  [ "$(grep -c '^## bench: ' "$out/table.md")" -eq 2 ] || fail "table.md does not hold two tables"
  for d in "${dirs[@]}"; do
    grep -q "^## bench: $(basename "$d"), latency" "$d/table.md" || fail "$d/table.md is not the $(basename "$d") table"
    [ "$(head -c 4 "$d/cdf-1M.png" | tail -c 3)" = PNG ] || fail "no latency CDF $d/cdf-1M.png"
  done
fi

for dir in "${dirs[@]}"; do
[ -s "$dir/calls.csv" ] || fail "no calls.csv in $dir"
# The table's rows: | entry | contender | p50 | p99 | p50 ratio | p99 ratio | ... | not exact | calibrating | timed | check |
rows() { awk -F'|' -v c="$1" '$2 ~ /^ 1M $/ && $3 == " " c " " { print }' "$dir/table.md"; }
for c in $contenders; do
  row=$(rows "$c")
  [ -n "$row" ] || fail "no row for $c"
  ratio=$(awk -F'|' '{ gsub(/ /, "", $6); print $6 }' <<<"$row")
  [[ "$ratio" =~ ^[0-9]+\.[0-9]+$ ]] || fail "$c: p50 ratio \"$ratio\" is not a number"
  [ "$c" != ompi ] || [ "$ratio" = 1.00 ] || fail "the baseline's ratio is $ratio, not 1.00"
  checked=$(awk -F'|' '{ print $12 }' <<<"$row")
  [[ "$checked" =~ ^\ ([0-9]+)\ /\ ([0-9]+)\ $ ]] || fail "$c: not-exact column \"$checked\" is not N / CALLS"
  [ "${BASH_REMATCH[2]}" -eq 6 ] || fail "$c: ${BASH_REMATCH[2]} calls checked, expected 6 (3 warm-up + 3 timed)"
  check=$(awk -F'|' '{ print $15 }' <<<"$row")
  if [ "$case" != wrong ]; then
    [ "${BASH_REMATCH[1]}" -eq 0 ] || fail "$c: ${BASH_REMATCH[1]} calls not exact on a clean host"
    [[ "$check" == " ok "* ]] || fail "$c: check \"$check\", expected ok"
  else
    [ "${BASH_REMATCH[1]}" -ge 1 ] || fail "$c: the wrong result was not counted as not exact"
    [[ "$check" == *WRONG* ]] || fail "$c: check \"$check\" does not say WRONG"
  fi
done
# The OptiReduce contenders must have run through the engine (a kind other than none).
for c in $contenders; do
  [ "$c" = ompi ] && continue
  awk -F'|' '{ print $14 }' <<<"$(rows "$c")" | grep -qE 'exact|calibration|bounded|fallback' \
    || fail "$c: no timed call ran through the engine"
done
done
if [ "$case" = host ]; then
  head -n 1 "$out/table.md" | grep -q 'host barrier' || fail "the table's title does not name the host barrier"
  grep -q '"barrier": "host"' "$out/meta.json" || fail "meta.json does not record the host barrier"
  for c in $contenders; do
    grep -q '"barrier": "host"' "$out/runs/r1-$c/out.json" || fail "$c: its run did not use the host barrier"
  done
fi
if [ "$case" != wrong ]; then
  [ "$rc" -eq 0 ] || fail "bench.sh exited $rc"
else
  [ "$rc" -eq 1 ] || fail "bench.sh exited $rc with wrong results, expected 1"
fi
echo "PASS"

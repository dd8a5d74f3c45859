#!/usr/bin/env bash
# bench_inprocess.sh: why optireduce-bench (PMPI and engine calls alternated inside one process)
# and scripts/bench.sh (each contender in processes of its own) disagree. One size, several
# rounds; each round runs, in rotating order:
#   ompi        optireduce-allreduce-bench, Open MPI alone (no preload)
#   engine      optireduce-allreduce-bench with the library preloaded (OPTIREDUCE_MODE, reliable)
#   mixed       optireduce-bench: PMPI and engine calls alternated in one process (two figures)
#   mixed-off   optireduce-bench with OPTIREDUCE_MODE=off: the same harness, PMPI in both columns
# Every rank also runs under `perf stat -e task-clock,context-switches,page-faults` (software
# counters work in this VM): CPU time and context switches of the whole job, all ranks.
#
# usage: scripts/bench_inprocess.sh [--size 16M] [--rounds 3] [--iters 30] [--warmup 10]
#                                   [--mode reliable] [--env VAR=VALUE]... [--out DIR]
# Environment: BUILD_DIR (default build).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
size=16M rounds=3 iters=30 warmup=10 mode=reliable out="" extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --size) size=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --env) extra+=(-x "$2"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "bench_inprocess.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
out=${out:-$root/results/inprocess/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build=${BUILD_DIR:-$root/build}
lib=$build/lib/liboptireduce.so
bench=$build/bin/optireduce-allreduce-bench
mixed=$build/bin/optireduce-bench
mpi=(mpirun -np 4 --oversubscribe)

run() {  # name round
  local name=$1 r=$2 dir=$out/r$2-$1
  mkdir -p "$dir"
  case $name in
    ompi) cmd=("${mpi[@]}" "${extra[@]}" sh -c 'exec perf stat -x, -e task-clock,context-switches,page-faults -o '"$dir"'/perf.$$ "$@"' _ \
               "$bench" --warmup "$warmup" --iters "$iters" --json "$dir/out.json" latency --sizes "$size") ;;
    engine) cmd=("${mpi[@]}" -x LD_PRELOAD="$lib" -x OPTIREDUCE_MODE="$mode" "${extra[@]}" sh -c 'exec perf stat -x, -e task-clock,context-switches,page-faults -o '"$dir"'/perf.$$ "$@"' _ \
               "$bench" --warmup "$warmup" --iters "$iters" --json "$dir/out.json" latency --sizes "$size") ;;
    mixed) cmd=("${mpi[@]}" -x OPTIREDUCE_MODE="$mode" "${extra[@]}" sh -c 'exec perf stat -x, -e task-clock,context-switches,page-faults -o '"$dir"'/perf.$$ "$@"' _ \
               "$mixed" --sizes "$size" --iters "$iters" --warmup "$warmup" --json "$dir/out.json") ;;
    mixed-off) cmd=("${mpi[@]}" -x OPTIREDUCE_MODE=off "${extra[@]}" sh -c 'exec perf stat -x, -e task-clock,context-switches,page-faults -o '"$dir"'/perf.$$ "$@"' _ \
               "$mixed" --sizes "$size" --iters "$iters" --warmup "$warmup" --json "$dir/out.json") ;;
  esac
  echo "${cmd[*]}" > "$dir/cmd"
  echo "load $(cut -d' ' -f1-3 /proc/loadavg)" > "$dir/load"
  timeout 900 "${cmd[@]}" > "$dir/stdout" 2> "$dir/stderr"
  echo "rc $?" >> "$dir/load"
}

names=(ompi engine mixed mixed-off)
for ((r = 1; r <= rounds; ++r)); do
  for ((k = 0; k < ${#names[@]}; ++k)); do
    name=${names[$(( (k + r - 1) % ${#names[@]} ))]}
    echo "bench_inprocess.sh: round $r $name, load $(cut -d' ' -f1 /proc/loadavg)" >&2
    run "$name" "$r"
  done
done
/usr/bin/python3 - "$out" "$size" <<'PY'
import glob, json, os, statistics, sys
out, size = sys.argv[1], sys.argv[2]
rows = {}
for d in sorted(glob.glob(out + "/r*-*")):
    r, name = os.path.basename(d).split("-", 1)
    try:
        j = json.load(open(d + "/out.json"))
    except Exception:
        continue
    load = open(d + "/load").read().split()[1]
    cpu = []
    for f in glob.glob(d + "/perf.*"):
        vals = {}
        for line in open(f):
            p = line.strip().split(",")
            if len(p) > 2 and p[0] and p[0][0].isdigit():
                vals[p[2]] = float(p[0])
        if "task-clock" in vals: cpu.append(vals)
    calls = None
    if name in ("ompi", "engine"):
        e = j["entries"][0]
        figs = {name: e["p50_ms"]}
        calls = e["warmup"] + e["iters"]
    else:
        s = j["sizes"][0]
        figs = {name + ":pmpi": s["pmpi"]["p50_ms"], name + ":engine": s["engine"]["p50_ms"]}
    task = sum(v["task-clock"] for v in cpu) if cpu else float("nan")
    cs = sum(v.get("context-switches", 0) for v in cpu)
    for k, v in figs.items():
        rows.setdefault(k, []).append((float(v), float(load)))
    rows.setdefault(name + ":task-clock-ms-all-ranks", []).append((task, float(load)))
    rows.setdefault(name + ":context-switches-all-ranks", []).append((cs, float(load)))
print("| %s | p50 ms per round (load) | median |" % size)
print("| --- | --- | --- |")
for k in sorted(rows):
    vals = rows[k]
    print("| %s | %s | %.2f |" % (k, ", ".join("%.2f (%.1f)" % v for v in vals), statistics.median(v for v, _ in vals)))
PY

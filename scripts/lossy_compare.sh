#!/usr/bin/env bash
# lossy_compare.sh: Open MPI over TCP against OptiReduce on an emulated lossy network, in one table.
#
# For every loss profile (default: clean, loss-0.1, loss-1) one network namespace (scripts/netem.sh)
# runs one job of build/bin/optireduce-bench, which times PMPI_Allreduce (Open MPI: pml ob1, btl
# tcp) and the OptiReduce engine (UCX over tcp, OPTIREDUCE_MODE=bounded) interleaved, call by call,
# in the same processes. Everything crosses the lossy loopback: no shared memory on either side.
# The whole round is repeated (default 3 times), the profile order rotating each round, and the
# table shows, per profile and size, the median over rounds of each run's p50 and p99 (max-over-
# ranks latency of one call; with 60 timed calls the nearest-rank p99 is the worst call).
#
#   scripts/lossy_compare.sh [--reps N] [--profiles "clean loss-0.1 loss-1"] [--sizes 4M,16M]
#                            [--ranks 4] [--iters 60] [--warmup 25] [--out results/lossy_compare.json]
#                            [--keep DIR] [--timeout SECONDS] [--engine-env VAR=VALUE]...
#
# --engine-env adds an -x VAR=VALUE to every job (e.g. OPTIREDUCE_LOSS_BUDGET=1 to see the bounded
# engine without its loss-budget fallback to exact calls); --keep keeps every run's files (bench
# JSON, report, trace, netem counters, stderr) in DIR.
#
# BUILD_DIR (default build) names the build whose liboptireduce.so and optireduce-bench run. Root
# only (network namespaces). The warm-up must cover the engine's calibration (20 exact calls per
# size class by default; the bench makes 2 more before its warm-up), so timed calls are bounded
# ones unless the engine chose to run them exactly (loss budget).
#
# "dropped" is the share of result entries of the timed engine calls that lacked a contribution
# (from OPTIREDUCE_TRACE, all ranks); "lo drop" is what nftables dropped on the namespace's
# loopback over the whole job (both contenders' packets).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

reps=3
profiles="clean loss-0.1 loss-1"
sizes=4M,16M
ranks=4
iters=60
warmup=25
out=results/lossy_compare.json
keep=""
run_timeout=1200
build_dir=${BUILD_DIR:-build}
extra_env=()

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) reps=$2; shift 2 ;;
    --profiles) profiles=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --timeout) run_timeout=$2; shift 2 ;;
    --engine-env)
      [[ "${2:-}" == *=* ]] || { echo "lossy_compare.sh: --engine-env takes VAR=VALUE" >&2; exit 2; }
      extra_env+=(-x "$2"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "lossy_compare.sh: unknown option \"$1\" (see --help)" >&2; exit 2 ;;
  esac
done
for v in reps ranks iters warmup run_timeout; do
  [[ "${!v}" =~ ^[0-9]+$ ]] && [ "${!v}" -ge 1 ] || { echo "lossy_compare.sh: --${v//_/-} must be a positive integer" >&2; exit 2; }
done

[ "$(id -u)" -eq 0 ] || { echo "lossy_compare.sh: must run as root (network namespaces)" >&2; exit 2; }
lib=$PWD/$build_dir/lib/liboptireduce.so
bench=$PWD/$build_dir/bin/optireduce-bench
for f in "$lib" "$bench"; do
  [ -e "$f" ] || { echo "lossy_compare.sh: $f not found: build first (BUILD_DIR=$build_dir)" >&2; exit 2; }
done
py=/usr/bin/python3
[ -x "$py" ] || py=python3

if [ -n "$keep" ]; then
  work=$keep
  mkdir -p "$work"
else
  work=$(mktemp -d /tmp/lossy_compare.XXXXXX)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$(dirname "$out")"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
read -r -a profile_list <<<"$profiles"
nprof=${#profile_list[@]}
echo "lossy_compare: $reps round(s) x profiles [${profiles}], $ranks ranks, sizes $sizes, $iters timed (+$warmup warm-up) calls, build $build_dir${extra_env[*]:+, extra: ${extra_env[*]}}" >&2

runs=()
for ((rep = 1; rep <= reps; rep++)); do
  for ((k = 0; k < nprof; k++)); do
    # Rotate the order each round so that slow drift of the shared machine spreads over profiles.
    profile=${profile_list[$(((k + rep - 1) % nprof))]}
    dir=$work/rep$rep-$profile
    rm -rf "$dir"; mkdir -p "$dir"
    start=$(date +%s.%N)
    scripts/netem.sh --profile "$profile" --stats "$dir/netem.json" -- \
      timeout -k 10 "$run_timeout" mpirun -np "$ranks" --oversubscribe \
        --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
        -x LD_PRELOAD="$lib" -x OPTIREDUCE_UCX_TLS=tcp -x OPTIREDUCE_UCX_NET_DEVICES=lo \
        -x OPTIREDUCE_MODE=bounded "${extra_env[@]}" \
        -x OPTIREDUCE_REPORT="$dir/report.json" -x OPTIREDUCE_TRACE="$dir/trace.txt" \
        "$bench" --sizes "$sizes" --iters "$iters" --warmup "$warmup" --json "$dir/bench.json" \
      >"$dir/stdout.txt" 2>"$dir/stderr.txt"
    rc=$?
    end=$(date +%s.%N)
    printf '{"rep": %d, "profile": "%s", "exit_code": %d, "wall_s": %.1f}\n' "$rep" "$profile" "$rc" \
      "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" >"$dir/run.json"
    echo "lossy_compare: round $rep, $profile: exit $rc, $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", b - a }') s" >&2
    [ "$rc" -eq 0 ] || { echo "  --- stderr (last lines) ---" >&2; tail -n 8 "$dir/stderr.txt" >&2; }
    runs+=("$dir")
  done
done

"$py" - "$out" "$iters" "$warmup" "$ranks" "$sizes" "$build_dir" "${extra_env[*]:-}" "${runs[@]}" <<'EOF'
import json, os, statistics, sys
out, iters, warmup, ranks, sizes_arg, build_dir = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
extra_env = sys.argv[7].replace("-x ", "").split()
run_dirs = sys.argv[8:]

def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def timed_calls(trace_path, count):
    """Per rank, the last `iters` engine calls of `count` entries: the bench's timed ones."""
    per_rank = {}
    try:
        with open(trace_path) as f:
            for line in f:
                p = line.split()
                if len(p) < 12 or not p[0].isdigit() or int(p[2]) != count:
                    continue
                per_rank.setdefault(int(p[0]), []).append(
                    (int(p[1]), p[3], p[4], float(p[9]), int(p[10]), int(p[11])))
    except OSError:
        return None
    return {r: sorted(c)[-iters:] for r, c in per_rank.items()}

runs = []
for d in run_dirs:
    run = load(os.path.join(d, "run.json")) or {}
    bench = load(os.path.join(d, "bench.json"))
    report = load(os.path.join(d, "report.json"))
    netem = load(os.path.join(d, "netem.json")) or {}
    run["lo_input_packets"] = netem.get("lo_input_packets")
    run["lo_drop_fraction"] = netem.get("measured_drop_fraction")
    if report:
        run["report"] = {k: [r.get(k) for r in report["ranks"]] for k in
                         ("dropped_fraction", "bounded_calls", "fallback_calls", "fallbacks", "divergent_calls",
                          "rejected_messages", "engine_failures", "transports")}
    run["sizes"] = []
    for s in (bench or {}).get("sizes", []):
        count = s["bytes"] // 4
        entry = {"bytes": s["bytes"], "pmpi": s["pmpi"], "engine": s["engine"],
                 "engine_calls_min_over_ranks": s["engine_calls_min_over_ranks"],
                 "results_match": s["results_match"],
                 "measure_window_entries_dropped": s["entries_dropped"]}
        calls = timed_calls(os.path.join(d, "trace.txt"), count)
        if calls:
            n = sum(len(c) for c in calls.values())
            dropped = sum(c[4] for cs in calls.values() for c in cs)
            kinds = {}
            for cs in calls.values():
                for c in cs:
                    key = c[1] if c[2] == "ok" else c[1] + "/" + c[2]
                    kinds[key] = kinds.get(key, 0) + 1
            entry["timed_dropped_fraction"] = dropped / (n * count) if n else None
            entry["timed_call_kinds"] = kinds  # summed over ranks
        run["sizes"].append(entry)
    if not bench:
        err = ""
        try:
            with open(os.path.join(d, "stderr.txt")) as f:
                err = f.read()[-2000:]
        except OSError:
            pass
        run["error_tail"] = err
    runs.append(run)

profiles = []
for r in runs:
    if r.get("profile") not in profiles:
        profiles.append(r.get("profile"))
byte_sizes = sorted({s["bytes"] for r in runs for s in r["sizes"]})

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None

summary = []
for prof in profiles:
    pr = [r for r in runs if r.get("profile") == prof]
    for b in byte_sizes:
        ss = [s for r in pr for s in r["sizes"] if s["bytes"] == b]
        if not ss:
            continue
        row = {"profile": prof, "bytes": b, "runs": len(ss), "failed_runs": sum(1 for r in pr if r.get("exit_code")),
               "ompi_p50_ms": med(s["pmpi"]["p50_ms"] for s in ss), "ompi_p99_ms": med(s["pmpi"]["p99_ms"] for s in ss),
               "optireduce_p50_ms": med(s["engine"]["p50_ms"] for s in ss),
               "optireduce_p99_ms": med(s["engine"]["p99_ms"] for s in ss),
               "ompi_p99_range_ms": [min(s["pmpi"]["p99_ms"] for s in ss), max(s["pmpi"]["p99_ms"] for s in ss)],
               "optireduce_p99_range_ms": [min(s["engine"]["p99_ms"] for s in ss), max(s["engine"]["p99_ms"] for s in ss)],
               "timed_dropped_fraction": med(s.get("timed_dropped_fraction") for s in ss),
               "timed_dropped_fraction_max": max((s.get("timed_dropped_fraction") or 0) for s in ss),
               "lo_drop_fraction": med(r.get("lo_drop_fraction") for r in pr)}
        kinds = {}
        for s in ss:
            for k, v in (s.get("timed_call_kinds") or {}).items():
                kinds[k] = kinds.get(k, 0) + v
        row["timed_call_kinds"] = kinds
        row["ratio_p50"] = row["optireduce_p50_ms"] / row["ompi_p50_ms"]
        row["ratio_p99"] = row["optireduce_p99_ms"] / row["ompi_p99_ms"]
        row["ompi_tail"] = row["ompi_p99_ms"] / row["ompi_p50_ms"]
        row["optireduce_tail"] = row["optireduce_p99_ms"] / row["optireduce_p50_ms"]
        summary.append(row)

def fmt_size(b):
    return f"{b >> 20}M" if b % (1 << 20) == 0 else f"{b}B"

hdr = ("profile", "size", "OMPI p50", "OMPI p99", "OMPI p99/p50", "OR p50", "OR p99", "OR p99/p50",
       "p50 OR/OMPI", "p99 OR/OMPI", "dropped", "lo drop", "timed engine calls (all ranks)")
print()
print(f"lossy_compare: {ranks} ranks, {iters} timed calls (+{warmup} warm-up) per size, median over "
      f"{max((r['runs'] for r in summary), default=0)} run(s); times in ms (OMPI = Open MPI ob1/tcp, OR = OptiReduce bounded, UCX tcp)")
print("%-9s %5s %9s %9s %12s %9s %9s %10s %11s %11s %9s %8s  %s" % hdr)
for r in summary:
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(r["timed_call_kinds"].items()))
    print("%-9s %5s %9.2f %9.2f %12.1f %9.2f %9.2f %10.1f %11.2f %11.2f %9.2e %8.2e  %s" % (
        r["profile"], fmt_size(r["bytes"]), r["ompi_p50_ms"], r["ompi_p99_ms"], r["ompi_tail"],
        r["optireduce_p50_ms"], r["optireduce_p99_ms"], r["optireduce_tail"], r["ratio_p50"], r["ratio_p99"],
        r["timed_dropped_fraction"] or 0, r["lo_drop_fraction"] or 0, kinds))
failed = [r for r in runs if r.get("exit_code")]
for r in failed:
    print(f"FAILED: round {r.get('rep')} {r.get('profile')}: exit {r.get('exit_code')}")

doc = {"what": "Open MPI (ob1/tcp) vs OptiReduce (bounded, UCX tcp) on a lossy emulated loopback (scripts/netem.sh)",
       "ranks": ranks, "iters": iters, "warmup": warmup, "sizes": sizes_arg, "build_dir": build_dir,
       "extra_env": extra_env,
       "summary": summary, "runs": runs}
with open(out, "w") as f:
    json.dump(doc, f, indent=1)
print(f"\nwritten to {out}")
sys.exit(1 if failed or not summary else 0)
EOF

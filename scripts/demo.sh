#!/usr/bin/env bash
# The main demo: an unmodified 4-rank data-parallel training job (mpi_examples/train_mlp.cpp) with
# OptiReduce preloaded. Prints the job's own output, the library's summary (OPTIREDUCE_LOG=info) and
# a per-rank digest of its JSON report; fails if any rank never ran the engine.
#
#   scripts/demo.sh [steps [batch_per_rank]]      BUILD_DIR=build-tools scripts/demo.sh
#
# Environment: BUILD_DIR (default: build/ at the repository root), NP (default 4), and any
# OPTIREDUCE_* / OPTIREDUCE_UCX_* setting, which is passed on to the ranks.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$repo/build}
[[ $build = /* ]] || build=$repo/$build
np=${NP:-4}
lib=$build/lib/liboptireduce.so
job=$build/bin/train_mlp
report=$build/optireduce-demo-report.json
python=/usr/bin/python3  # Debian's, whatever python3 is first on PATH

for f in "$lib" "$job"; do
  [[ -e $f ]] || { echo "demo.sh: error: $f not found; build first: cmake -S $repo -B $build && cmake --build $build -j2" >&2; exit 1; }
done
[[ -x $python ]] || { echo "demo.sh: error: $python not found (apt-get install python3)" >&2; exit 1; }

# Open MPI refuses to run as root unless told twice.
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OPTIREDUCE_REPORT=$report OPTIREDUCE_LOG=${OPTIREDUCE_LOG:-info}
rm -f "$report"  # never summarise a previous run's report

# -x NAME forwards a variable to the ranks only: mpirun and its daemons do not load the library.
forward=(-x LD_PRELOAD="$lib")
while IFS='=' read -r name _; do forward+=(-x "$name"); done < <(env | grep '^OPTIREDUCE_' || true)

echo "demo: $np ranks of $job with $lib preloaded"
echo "+ mpirun -np $np --oversubscribe ${forward[*]} $job${*:+ $*}"
mpirun -np "$np" --oversubscribe "${forward[@]}" "$job" "$@"

[[ -s $report ]] || { echo "demo.sh: error: the job did not write $report (was the library loaded?)" >&2; exit 1; }
echo
echo "demo: report $report"
"$python" - "$report" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
ranks = report["ranks"]
print(f"  library {report['version']}, mode {report['config']['mode']}, "
      f"min_bytes {report['config']['min_bytes']}")
print(f"  {'rank':>4} {'intercepted':>11} {'passthrough':>11} {'p50 us':>10} {'p99 us':>10} "
      f"{'dropped':>9}  transports")
for r in ranks:
    lat = r["latency_us"]
    print(f"  {r['rank']:>4} {r['intercepted_calls']:>11} {r['passthrough_calls']:>11} {lat['p50']:>10.0f} "
          f"{lat['p99']:>10.0f} {r['dropped_fraction']:>9.2g}  {r['transports']}")
idle = [r["rank"] for r in ranks if r["intercepted_calls"] == 0]
if idle:
    print(f"demo: FAILED: rank(s) {idle} intercepted no MPI_Allreduce call: the engine never ran there",
          file=sys.stderr)
    sys.exit(1)
print(f"demo: OK: all {len(ranks)} ranks ran their gradient reductions through the engine")
EOF

#!/usr/bin/env bash
# The main job: time to accuracy of real data-parallel training (PyTorch + mpi4py on
# Fashion-MNIST, mpi_examples/train_torch.py) under emulated network profiles (clean, tail-3,
# loss-1, loss-3), with Open MPI, Gloo and OptiReduce (liboptireduce.so preloaded) side by side.
#
#   scripts/setup.sh && scripts/demo.sh      a fresh machine to the comparison (short: minutes)
#   scripts/demo.sh --full                   the full comparison (hours; 3 repetitions)
#   scripts/demo.sh --job-only               only step 1 below (no root needed)
#   scripts/demo.sh [--full] [scripts/tta.sh options...]   e.g. --profiles clean,loss-1
#
# 1. An unmodified 4-rank C++ training job (build/bin/train_mlp on Fashion-MNIST) with the library
#    preloaded: its own output, the library's summary (OPTIREDUCE_LOG=info) and a per-rank digest
#    of its JSON report; fails if any rank never ran the engine.
# 2. scripts/tta.sh: the comparison; ends with the table and the paths of the plots
#    (results/tta/ or, with --full, results/tta-full/).
#
# Environment: BUILD_DIR (default: build/ at the repository root), NP (default 4) and any
# OPTIREDUCE_* / OPTIREDUCE_UCX_* setting, which step 1 passes on to the ranks. Step 2 needs root
# (network namespaces) and Debian's python3-torch, python3-matplotlib and dataset-fashion-mnist
# (scripts/setup.sh installs them).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$repo/build}
[[ $build = /* ]] || build=$repo/$build
np=${NP:-4}
lib=$build/lib/liboptireduce.so
job=$build/bin/train_mlp
report=$build/optireduce-demo-report.json
data=/usr/share/datasets/fashion-mnist
python=/usr/bin/python3  # Debian's, whatever python3 is first on PATH

job_only=0
tta_args=()
for arg in "$@"; do
  case $arg in
    --job-only) job_only=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) tta_args+=("$arg") ;;
  esac
done

for f in "$lib" "$job"; do
  [[ -e $f ]] || { echo "demo.sh: error: $f not found; build first: scripts/setup.sh (or cmake -S $repo -B $build && cmake --build $build -j2)" >&2; exit 1; }
done
[[ -x $python ]] || { echo "demo.sh: error: $python not found (apt-get install python3)" >&2; exit 1; }
[[ -d $data ]] || { echo "demo.sh: error: no Fashion-MNIST in $data (scripts/setup.sh installs dataset-fashion-mnist)" >&2; exit 1; }

# Open MPI refuses to run as root unless told twice.
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

# --- 1. one unmodified job with the library preloaded ---------------------------------------------
export OPTIREDUCE_REPORT=$report OPTIREDUCE_LOG=${OPTIREDUCE_LOG:-info}
rm -f "$report"  # never summarise a previous run's report

# -x NAME forwards a variable to the ranks only: mpirun and its daemons do not load the library.
forward=(-x LD_PRELOAD="$lib")
while IFS='=' read -r name _; do forward+=(-x "$name"); done < <(env | grep '^OPTIREDUCE_' || true)
job_args=(--data "$data" --steps 60 --eval-every 30 --test-limit 2000)

echo "demo: 1/2: $np ranks of $job (Fashion-MNIST) with $lib preloaded"
echo "+ mpirun -np $np --oversubscribe ${forward[*]} $job ${job_args[*]}"
mpirun -np "$np" --oversubscribe "${forward[@]}" "$job" "${job_args[@]}"
unset OPTIREDUCE_REPORT OPTIREDUCE_LOG

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
[[ $job_only -eq 0 ]] || exit 0

# --- 2. time to accuracy under the emulated network ---------------------------------------------------
if [[ $(id -u) -ne 0 ]]; then
  echo "demo.sh: the comparison needs root (network namespaces); run as root, or --job-only" >&2
  exit 1
fi
echo
echo "demo: 2/2: time to accuracy (scripts/tta.sh ${tta_args[*]}); the machine's other work shows in the times"
exec "$repo/scripts/tta.sh" --build-dir "$build" "${tta_args[@]}"

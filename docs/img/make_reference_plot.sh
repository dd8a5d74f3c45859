#!/usr/bin/env bash
# Regenerates docs/img/demo-trace.png, the README's reference plot, from a real run of the main
# job of scripts/demo.sh (build/bin/train_mlp on Fashion-MNIST, 4 ranks, the library preloaded
# with its defaults except OPTIREDUCE_STEP_ASIDE=off: on one host the defaults make every call exact,
# and the plot is of the bounded engine), traced with OPTIREDUCE_TRACE and drawn by optireduce-report:
#
#   docs/img/make_reference_plot.sh [STEPS]     (default 200 steps)
#
# Environment: BUILD_DIR (default build/), NP (default 4), any OPTIREDUCE_* setting for the job.
# Prints the job's output, the finalize line and the report tool's tables.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BUILD_DIR:-$repo/build}
steps=${1:-200}
np=${NP:-4}
data=/usr/share/datasets/fashion-mnist
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for f in "$build/bin/optireduce-run" "$build/bin/train_mlp" "$build/bin/optireduce-report"; do
  [[ -x $f ]] || { echo "make_reference_plot.sh: error: $f not found; build first (scripts/setup.sh)" >&2; exit 1; }
done
[[ -d $data ]] || { echo "make_reference_plot.sh: error: no Fashion-MNIST in $data (apt-get install dataset-fashion-mnist)" >&2; exit 1; }
if [[ $(id -u) -eq 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

export OPTIREDUCE_STEP_ASIDE=${OPTIREDUCE_STEP_ASIDE:-off}
OPTIREDUCE_TRACE=$out/trace.txt "$build/bin/optireduce-run" --log info --report "$out/report.json" -- \
  mpirun -np "$np" --oversubscribe "$build/bin/train_mlp" --data "$data" --steps "$steps" --eval-every 50 --test-limit 2000
"$build/bin/optireduce-report" "$out/report.json" --no-png
"$build/bin/optireduce-report" "$out/trace.txt" --png "$repo/docs/img/demo-trace.png"

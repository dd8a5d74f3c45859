#!/usr/bin/env bash
# tta.sh: time to accuracy of real training (Fashion-MNIST, mpi_examples/) under the emulated
# network profiles of scripts/netem.sh, for Open MPI (plain, TCP), Gloo (torch.distributed) and
# OptiReduce (liboptireduce.so preloaded, bounded mode; UCX over TCP, and libfabric datagrams
# (OPTIREDUCE_TRANSPORT=ofi) when the build has them). Every contender crosses the lossy loopback.
#
#   scripts/tta.sh                 short comparison (minutes): 200 steps of an MLP-1024, target 80 %
#   scripts/tta.sh --full          the full one (hours): 1500 steps, target 85 %, 3 repetitions
#   scripts/tta.sh --ablation      OPTIREDUCE_FILL zero/local x OPTIREDUCE_HADAMARD off/on/auto under
#                                  OPTIREDUCE_FAULT_DROP 0.01/0.05/0.10, against exact Open MPI
#   scripts/tta.sh --help          every option (profiles, implementations, trainer, model, steps...)
#
# Records, per run, training time to the target test accuracy (evaluation excluded), the steps it
# took, the final accuracy after the fixed budget, the share of a step spent in the reduction and
# OptiReduce's dropped fraction; writes results.json, table.md, accuracy_vs_time.png and
# time_to_accuracy.png (ablation: ablation.png) under results/tta/ (--out DIR), and prints the
# table. A profile netem.sh does not know is skipped with a message. Root only (namespaces).
#
# Environment: BUILD_DIR (default build; or --build-dir). Needs /usr/bin/python3 with torch, mpi4py,
# numpy, matplotlib, and dataset-fashion-mnist: scripts/setup.sh installs them.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
[[ -x /usr/bin/python3 ]] || { echo "tta.sh: /usr/bin/python3 not found (apt-get install python3)" >&2; exit 2; }
cd "$repo"
exec /usr/bin/python3 "$repo/scripts/tta/tta.py" "$@"

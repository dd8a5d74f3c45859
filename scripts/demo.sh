#!/usr/bin/env bash
# The main job: an unmodified data-parallel training job (build/bin/train_mlp, 4 ranks, Fashion-
# MNIST) with the library preloaded, then time to accuracy under emulated network profiles.
#
#   scripts/setup.sh && scripts/demo.sh      a fresh machine to the comparison (short: minutes)
#   scripts/demo.sh --full                   the full comparison (hours; 3 repetitions)
#   scripts/demo.sh --job-only               the one-host job only: a smoke check (no root needed)
#   scripts/demo.sh --main-only              the main job only (across hosts where possible), no step 2
#   scripts/demo.sh [--full] [scripts/tta.sh options...]   e.g. --profiles clean,loss-1
#
# 1. The main job. Where network namespaces are available (root): across emulated hosts
#    (scripts/cluster.sh, one rank per host, light loss on every link), once with Open MPI alone and
#    once with the library preloaded; prints the library's per-rank report and the two side by
#    side: the allreduce's time per step, the calls the library bounded, the entries it
#    compensated, the accuracy. Elsewhere, and with --job-only: the job on this host with the
#    library preloaded (every call there is exact: there is no network to bound) and the report.
#    Fails if a rank never ran the engine, or, across hosts, if no call ran bounded.
# 2. scripts/tta.sh: the comparison; ends with the table and the paths of the plots
#    (results/tta/ or, with --full, results/tta-full/). Not with --job-only or --main-only.
#
# Environment: BUILD_DIR (default: build/ at the repository root), NP (ranks on one host, default
# 4), HOSTS (emulated hosts, default 4), DROP (loss per link and direction, per mille, default 1)
# and any OPTIREDUCE_* / OPTIREDUCE_UCX_* setting, which step 1 passes on to the library's ranks.
# Step 2 needs root (network namespaces) and Debian's python3-torch, python3-matplotlib and
# dataset-fashion-mnist (scripts/setup.sh installs them).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$repo/build}
[[ $build = /* ]] || build=$repo/$build
np=${NP:-4}
hosts=${HOSTS:-4}
drop=${DROP:-1}
lib=$build/lib/liboptireduce.so
job=$build/bin/train_mlp
report=$build/optireduce-demo-report.json
data=/usr/share/datasets/fashion-mnist
python=/usr/bin/python3  # Debian's, whatever python3 is first on PATH

job_only=0
main_only=0
tta_args=()
for arg in "$@"; do
  case $arg in
    --job-only) job_only=1 ;;
    --main-only) main_only=1 ;;
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

# --- 1. the main job ---------------------------------------------------------------------------
# Variables forwarded to the library's ranks (-x NAME: the ranks only; mpirun and its daemons do not
# load the library).
user_settings=()
while IFS='=' read -r name _; do user_settings+=(-x "$name"); done < <(env | grep '^OPTIREDUCE_' || true)
job_args=(--data "$data" --steps 60 --eval-every 30 --test-limit 2000)
rm -f "$report"  # never summarise a previous run's report

# The one-host job: every call is exact there (no network to bound), so it checks that the
# library runs, not what it is for.
one_host_job() {
  echo "demo: 1/2: $np ranks of $job (Fashion-MNIST) on this host with $lib preloaded"
  echo "+ mpirun -np $np --oversubscribe -x LD_PRELOAD=$lib -x OPTIREDUCE_REPORT=$report ${user_settings[*]} $job ${job_args[*]}"
  OPTIREDUCE_REPORT=$report OPTIREDUCE_LOG=${OPTIREDUCE_LOG:-info} \
    mpirun -np "$np" --oversubscribe -x LD_PRELOAD="$lib" -x OPTIREDUCE_REPORT -x OPTIREDUCE_LOG "${user_settings[@]}" \
    "$job" "${job_args[@]}"
  [[ -s $report ]] || { echo "demo.sh: error: the job did not write $report (was the library loaded?)" >&2; exit 1; }
  echo
  echo "demo: report $report"
  "$python" "$repo/scripts/demo/digest.py" report "$report"
}

# The job across emulated hosts with light loss, Open MPI alone and then the library preloaded.
cluster_job() {
  local dir=$build/demo-cluster cluster
  mkdir -p "$dir"
  rm -f "$dir"/*.json
  cluster=("$repo/scripts/cluster.sh" --hosts "$hosts" --drop "$drop" -q --mpirun --)
  echo "demo: 1/2: $job (Fashion-MNIST) on $hosts emulated hosts (scripts/cluster.sh, one rank per host,"
  echo "      $drop per mille of the packets lost on every link and direction): Open MPI alone, then"
  echo "      with $lib preloaded"
  echo "+ ${cluster[*]} $job ${job_args[*]} --json $dir/openmpi.json"
  "${cluster[@]}" "$job" "${job_args[@]}" --json "$dir/openmpi.json" --label openmpi
  echo
  # UCX (the library's exact calls) held to the hosts' links; bounded calls go as kernel UDP.
  local ours=(-x LD_PRELOAD="$lib" -x OPTIREDUCE_UCX_TLS=tcp -x OPTIREDUCE_UCX_NET_DEVICES=eth0
              -x OPTIREDUCE_REPORT -x OPTIREDUCE_LOG "${user_settings[@]}")
  echo "+ ${cluster[*]} ${ours[*]} $job ${job_args[*]} --json $dir/optireduce.json"
  OPTIREDUCE_REPORT=$report OPTIREDUCE_LOG=${OPTIREDUCE_LOG:-info} \
    "${cluster[@]}" "${ours[@]}" "$job" "${job_args[@]}" --json "$dir/optireduce.json" --label optireduce
  [[ -s $report ]] || { echo "demo.sh: error: the job did not write $report (was the library loaded?)" >&2; exit 1; }
  echo
  echo "demo: report $report"
  "$python" "$repo/scripts/demo/digest.py" report "$report"
  echo
  echo "demo: the same job, Open MPI alone and with OptiReduce, $hosts hosts, $drop per mille loss per link"
  "$python" "$repo/scripts/demo/digest.py" compare "$dir/optireduce.json" "$report" "$dir/openmpi.json"
}

# Network namespaces: root, and a kernel and tools that make them (a container may refuse).
namespaces_available() {
  [[ $(id -u) -eq 0 ]] && command -v ip >/dev/null && command -v nft >/dev/null && unshare --net true 2>/dev/null
}

if [[ $job_only -eq 0 ]] && namespaces_available; then
  cluster_job
else
  [[ $job_only -eq 1 ]] || echo "demo: no network namespaces here (root, ip, nft): the job runs on this host only"
  one_host_job
fi
[[ $job_only -eq 0 && $main_only -eq 0 ]] || exit 0

# --- 2. time to accuracy under the emulated network ---------------------------------------------------
if [[ $(id -u) -ne 0 ]]; then
  echo "demo.sh: the comparison needs root (network namespaces); run as root, or --job-only" >&2
  exit 1
fi
echo
echo "demo: 2/2: time to accuracy (scripts/tta.sh ${tta_args[*]}); the machine's other work shows in the times"
exec "$repo/scripts/tta.sh" --build-dir "$build" "${tta_args[@]}"

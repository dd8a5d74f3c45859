#!/usr/bin/env bash
# compare.sh: OptiReduce against Open MPI and Gloo on the same emulated network, in one run.
# See --help. Root only (network namespaces). Writes results/<tag>.json, results/<tag>.md and PNG
# plots results/<tag>-*.png.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prog=compare.sh

usage() {
  cat <<'EOF_USAGE'
usage: scripts/compare.sh [options]

Side-by-side comparison of allreduce implementations on the emulated networks of scripts/netem.sh,
4 ranks, everything over TCP or datagrams on the namespace's loopback (no shared memory):

  ompi         Open MPI, pml ob1, btl tcp,self (vader off), on lo
  gloo         torch.distributed, backend gloo, CPU float32 tensors, TCP init on 127.0.0.1
               (Debian's python3-torch, run with /usr/bin/python3)
  or-reliable  OptiReduce, OPTIREDUCE_MODE=reliable (exact TAR), UCX restricted to tcp
  or-ucx       OptiReduce, OPTIREDUCE_MODE=bounded, UCX restricted to tcp
  or-ofi       OptiReduce, OPTIREDUCE_MODE=bounded, OPTIREDUCE_TRANSPORT=ofi (libfabric datagrams);
               detected at start: skipped with the reason when the build does not have it yet

For every round (--reps) and profile (--profiles), one network namespace runs, in this order: the
tail probe (Open MPI/TCP, 4 ranks, 4 MiB: the profile's measured P99/P50, recorded with every
result), then each implementation's latency job (every call of every size timed, max over ranks),
then each implementation's iteration-time job (a model's data-parallel step replayed: compute
sleep + one allreduce per 25 MiB DDP bucket). The order of profiles and of implementations rotates
from round to round. The tables give medians over rounds of each round's figure.

options:
  --profiles LIST     netem.sh profiles, space separated (default "clean tail-3 tail-6")
  --impls LIST        implementations (default "ompi gloo or-reliable or-ucx or-ofi")
  --sizes LIST        allreduce sizes, comma separated, K/M/G suffixes (default 1M,4M,16M)
  --full              sizes 1M,2M,4M,8M,16M,32M,64M
  --reps N            rounds (default 3; medians need at least 3)
  --iters N           timed calls per size (default 40)
  --warmup N          untimed calls per size first (default 25: covers OptiReduce's 20
                      calibration calls per size class, so timed calls are bounded ones)
  --models LIST       models to replay, comma separated, from resnet50, gpt2, bert-large
                      (default resnet50,gpt2,bert-large; "none" skips the iteration-time jobs)
  --scales LIST       fraction of each model replayed (default 1,0.25,0.1: ResNet-50 whole, GPT-2
                      5 of its 19 25-MiB buckets, BERT-large 5 of its 51; the compute sleep scales
                      alike; see tools/optireduce_itertime.cpp)
  --model-iters N     timed iterations per model (default 5)
  --model-calibration N
                      OPTIREDUCE_CALIBRATION_CALLS for the OptiReduce model jobs (default 10,
                      half the library's default, so that calibrating on 25 MiB buckets fits a
                      small machine); every implementation's model job makes N+2 warm-up calls
                      per size class first, then one untimed iteration
  --no-latency        only the iteration-time jobs
  --probe-iters N     calls of the tail probe (default 200)
  --ranks N           ranks (default 4)
  --build-dir DIR     build with lib/liboptireduce.so and bin/optireduce-itertime (default build)
  --out-dir DIR       where the results go (default results)
  --tag NAME          file name stem of the results (default compare)
  --runs-dir DIR      keep every job's files there (default: a new /tmp/compare-runs.XXXXXX, kept)
  --timeout S         kill a job after S seconds (default 900)
  --ofi-env "K=V ..." extra -x settings for or-ofi (e.g. OPTIREDUCE_OFI_PROVIDER=udp)
  -h, --help          this text

Progress goes to stderr: [round r/R, profile p/P NAME] job n/N: implementation.
Exit code: 0 when every job succeeded, 1 when some failed (their rows are marked), 2 on bad usage
or when the emulation cannot run (not root).
EOF_USAGE
}

die() { echo "$prog: $*" >&2; exit 2; }

profiles="clean tail-3 tail-6"
impls="ompi gloo or-reliable or-ucx or-ofi"
sizes=1M,4M,16M
reps=3
iters=40
warmup=25
models=resnet50,gpt2,bert-large
scales=1,0.25,0.1
model_iters=5
model_calibration=10
latency=1
probe_iters=200
ranks=4
build_dir=build
out_dir=results
tag=compare
runs_dir=""
timeout_s=900
ofi_env=""

orig_args="$*"
need() { [ $# -ge 2 ] || die "$1 needs a value (see --help)"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --profiles) need "$@"; profiles=$2; shift 2 ;;
    --impls) need "$@"; impls=$2; shift 2 ;;
    --sizes) need "$@"; sizes=$2; shift 2 ;;
    --full) sizes=1M,2M,4M,8M,16M,32M,64M; shift ;;
    --reps) need "$@"; reps=$2; shift 2 ;;
    --iters) need "$@"; iters=$2; shift 2 ;;
    --warmup) need "$@"; warmup=$2; shift 2 ;;
    --models) need "$@"; models=$2; shift 2 ;;
    --scales) need "$@"; scales=$2; shift 2 ;;
    --model-iters) need "$@"; model_iters=$2; shift 2 ;;
    --model-calibration) need "$@"; model_calibration=$2; shift 2 ;;
    --no-latency) latency=0; shift ;;
    --probe-iters) need "$@"; probe_iters=$2; shift 2 ;;
    --ranks) need "$@"; ranks=$2; shift 2 ;;
    --build-dir) need "$@"; build_dir=$2; shift 2 ;;
    --out-dir) need "$@"; out_dir=$2; shift 2 ;;
    --tag) need "$@"; tag=$2; shift 2 ;;
    --runs-dir) need "$@"; runs_dir=$2; shift 2 ;;
    --timeout) need "$@"; timeout_s=$2; shift 2 ;;
    --ofi-env) need "$@"; ofi_env=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option \"$1\" (see --help)" ;;
  esac
done

for v in reps iters warmup model_iters model_calibration probe_iters ranks timeout_s; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || die "--${v//_/-} \"${!v}\" must be a non-negative integer"
  [ "$v" = warmup ] || [ "${!v}" -ge 1 ] || die "--${v//_/-} must be at least 1"
done
[ "$ranks" -ge 2 ] || die "--ranks must be at least 2"
[ "$reps" -ge 3 ] || echo "$prog: warning: --reps $reps: medians of fewer than 3 rounds do not tame rare stalls" >&2
[ "$models" = none ] && models=""
[ "$latency" = 1 ] || [ -n "$models" ] || die "nothing to do: --no-latency and --models none"
for i in $impls; do
  case $i in ompi|gloo|or-reliable|or-ucx|or-ofi) ;; *) die "unknown implementation \"$i\" (ompi gloo or-reliable or-ucx or-ofi)" ;; esac
done
[ "$(id -u)" -eq 0 ] || die "must run as root: the emulated network is a network namespace (scripts/netem.sh)"
case "$build_dir" in /*) ;; *) build_dir=$root/$build_dir ;; esac
case "$out_dir" in /*) ;; *) out_dir=$root/$out_dir ;; esac
[ -f "$build_dir/lib/liboptireduce.so" ] || die "no $build_dir/lib/liboptireduce.so (build first, or --build-dir)"
[ -x "$build_dir/bin/optireduce-itertime" ] || die "no $build_dir/bin/optireduce-itertime (build first, or --build-dir)"
command -v mpirun >/dev/null || die "mpirun not found (scripts/setup.sh installs Open MPI)"
py=/usr/bin/python3
[ -x "$py" ] || die "$py not found"
"$py" -c 'import matplotlib' 2>/dev/null || echo "$prog: warning: no matplotlib for $py (apt-get install python3-matplotlib): no plots" >&2
mkdir -p "$out_dir" || die "cannot create $out_dir"
if [ -z "$runs_dir" ]; then runs_dir=$(mktemp -d /tmp/compare-runs.XXXXXX) || die "cannot make a runs directory"; fi
mkdir -p "$runs_dir" || die "cannot create $runs_dir"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
netem=$root/scripts/netem.sh

# Which contenders can run at all.
skipped=()
active=()
for i in $impls; do
  case $i in
    gloo)
      if ! "$py" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null; then
        echo "$prog: skipping gloo: $py has no torch.distributed with gloo (apt-get install python3-torch)" >&2
        skipped+=("gloo: no torch.distributed/gloo for $py"); continue
      fi ;;
    or-ofi)
      # The datagram transport: run a 2-rank, one-call job in a clean namespace; a build without it
      # rejects OPTIREDUCE_TRANSPORT=ofi at MPI_Init (a config error naming the variable).
      probe_dir=$runs_dir/ofi-detect
      mkdir -p "$probe_dir"
      ofi_x=()
      for kv in $ofi_env; do ofi_x+=(-x "$kv"); done
      "$netem" --profile clean -- timeout -k 5 120 mpirun -np 2 --oversubscribe --mca pml ob1 --mca btl tcp,self \
        --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x LD_PRELOAD="$build_dir/lib/liboptireduce.so" \
        -x OPTIREDUCE_TRANSPORT=ofi -x OPTIREDUCE_MODE=bounded -x OPTIREDUCE_LOG=info "${ofi_x[@]}" \
        "$build_dir/bin/optireduce-itertime" --json "$probe_dir/detect.json" latency --sizes 1M --iters 1 --warmup 0 \
        >"$probe_dir/stdout" 2>"$probe_dir/stderr"
      rc=$?
      if [ "$rc" -ne 0 ] || [ ! -s "$probe_dir/detect.json" ] || grep -q '"engine": {"engine_calls": 0' "$probe_dir/detect.json"; then
        why=$(grep -i -m1 -E 'OPTIREDUCE_TRANSPORT|error|fall' "$probe_dir/stderr" | cut -c1-200)
        echo "$prog: skipping or-ofi (the datagram transport is not available in $build_dir): ${why:-exit $rc}" >&2
        skipped+=("or-ofi: ${why:-exit $rc}"); continue
      fi
      echo "$prog: or-ofi available" >&2 ;;
  esac
  active+=("$i")
done
[ ${#active[@]} -gt 0 ] || die "no implementation can run"

read -r -a prof_list <<<"$profiles"
nprof=${#prof_list[@]}
nimpl=${#active[@]}
echo "$prog: ${#active[@]} implementations (${active[*]}), profiles ${prof_list[*]}, $reps round(s)," \
  "sizes $sizes${models:+, models $models (scales $scales)}; job files in $runs_dir" >&2
echo "$prog: note: figures are ratios within a run; other load on the machine moves the absolute ones" >&2

export CMP_BUILD=$build_dir CMP_SIZES=$sizes CMP_ITERS=$iters CMP_WARMUP=$warmup CMP_MODELS=$models \
  CMP_SCALES=$scales CMP_MODEL_ITERS=$model_iters CMP_PROBE_ITERS=$probe_iters CMP_TIMEOUT=$timeout_s \
  CMP_LATENCY=$latency CMP_RANKS=$ranks CMP_OFI_ENV=$ofi_env CMP_MODEL_CALIBRATION=$model_calibration
meta=$runs_dir/meta.json
write_meta() {  # $1: "partial" or "complete"
  local skipped_json
  skipped_json=$(printf '%s\n' "${skipped[@]}" | "$py" -c 'import json,sys; print(json.dumps([l.strip() for l in sys.stdin if l.strip()]))')
  "$py" - "$meta" <<PY
import json, sys, os
json.dump({"profiles": "$profiles".split(), "implementations": "${active[*]}".split(), "skipped": $skipped_json,
           "sizes": "$sizes", "reps": $reps, "iters": $iters, "warmup": $warmup, "models": "$models",
           "scales": "$scales", "model_iters": $model_iters, "model_calibration_calls": $model_calibration,
           "probe_iters": $probe_iters, "ranks": $ranks, "build_dir": "$build_dir", "runs_dir": "$runs_dir",
           "host_cpus": os.cpu_count(), "loadavg_at_end": os.getloadavg(), "state": "$1",
           "command": "scripts/compare.sh $orig_args"}, open(sys.argv[1], "w"), indent=1)
PY
}
summarize() {  # $1: "partial" or "complete"
  write_meta "$1"
  "$py" "$root/scripts/compare/summarize.py" --meta "$meta" --out-dir "$out_dir" --tag "$tag" "${rounds[@]}"
}

rounds=()
failed=0
start_all=$(date +%s)
for ((r = 0; r < reps; r++)); do
  for ((k = 0; k < nprof; k++)); do
    p=${prof_list[$(((k + r) % nprof))]}
    order=()
    for ((j = 0; j < nimpl; j++)); do order+=("${active[$(((j + r + k) % nimpl))]}"); done
    d=$runs_dir/round$((r + 1))-$p
    mkdir -p "$d"
    printf '{"round": %d, "profile": "%s", "order": "%s"}\n' $((r + 1)) "$p" "${order[*]}" >"$d/round.json"
    CMP_DIR=$d CMP_IMPLS="${order[*]}" CMP_PROGRESS="round $((r + 1))/$reps, profile $((k + 1))/$nprof $p" \
      "$netem" --profile "$p" --stats "$d/netem.json" --build-dir "$build_dir" -- "$root/scripts/compare/round.sh" \
      2> >(grep --line-buffered -v '^netem: optireduce-' >&2)
    rc=$?
    [ "$rc" -eq 0 ] || { echo "$prog: round $((r + 1)) $p: netem.sh exited $rc" >&2; failed=1; }
    awk '$3 != 0 { bad = 1 } END { exit bad }' "$d/jobs.txt" 2>/dev/null || failed=1
    rounds+=("$d")
    echo "$prog: round $((r + 1))/$reps, $p done; $(( $(date +%s) - start_all )) s so far" >&2
    # Tables after every round and profile, so a long run that is stopped still leaves its figures.
    if [ $((r + 1)) -lt "$reps" ] || [ $((k + 1)) -lt "$nprof" ]; then
      summarize partial >/dev/null 2>&1 || true
    fi
  done
done

summarize complete || failed=1
exit "$failed"

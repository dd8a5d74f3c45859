#!/usr/bin/env bash
# One round of scripts/compare.sh in one profile: runs INSIDE the emulated network (scripts/netem.sh
# starts it in the namespace), so every contender of the round sees the same network and the same
# background traffic. Order: the tail probe, then the latency job of every implementation, then
# the model job of every implementation, implementations in the order given (compare.sh rotates it
# from round to round). Settings come from the CMP_* environment (see compare.sh); every job leaves
# DIR/<impl>-<kind>.{json,stderr,report.json} and a line in DIR/jobs.txt: impl kind exit seconds.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=$CMP_DIR build=$CMP_BUILD
lib=$build/lib/liboptireduce.so
itertime=$build/bin/optireduce-itertime
py=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI over TCP on lo only: ob1 with the tcp and self BTLs (vader, the shared-memory BTL, is
# not among them), and the runtime's own traffic on lo too.
ompi_tcp=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
read -r -a impls <<<"$CMP_IMPLS"
read -r -a ofi_env <<<"${CMP_OFI_ENV:-}"

progress() { echo "compare: [$CMP_PROGRESS] $*" >&2; }

# command prefix (mpirun + options) for an implementation; the itertime arguments follow
mpi_cmd() {  # impl report_path
  local impl=$1 report=$2
  local -a c=(mpirun -np "$CMP_RANKS" --oversubscribe "${ompi_tcp[@]}")
  local -a or_env=(-x LD_PRELOAD="$lib" -x OPTIREDUCE_UCX_TLS=tcp -x OPTIREDUCE_UCX_NET_DEVICES=lo
                   -x OPTIREDUCE_REPORT="$report")
  case $impl in
    ompi) ;;
    or-reliable) c+=("${or_env[@]}" -x OPTIREDUCE_MODE=reliable) ;;
    or-ucx) c+=("${or_env[@]}" -x OPTIREDUCE_MODE=bounded) ;;
    or-ofi)
      c+=(-x LD_PRELOAD="$lib" -x OPTIREDUCE_TRANSPORT=ofi -x OPTIREDUCE_MODE=bounded -x OPTIREDUCE_REPORT="$report")
      for kv in "${ofi_env[@]}"; do c+=(-x "$kv"); done ;;
    *) echo "round.sh: unknown implementation $impl" >&2; return 1 ;;
  esac
  printf '%s\0' "${c[@]}"
}

run_job() {  # impl kind n total
  local impl=$1 kind=$2 n=$3 total=$4
  local out=$dir/$impl-$kind.json err=$dir/$impl-$kind.stderr rep=$dir/$impl-$kind.report.json
  local -a args cmd
  if [ "$kind" = latency ]; then
    args=(latency --sizes "$CMP_SIZES" --iters "$CMP_ITERS" --warmup "$CMP_WARMUP")
  else
    args=(model --model "$CMP_MODELS" --scale "$CMP_SCALES" --iters "$CMP_MODEL_ITERS"
          --warmup-calls $((CMP_MODEL_CALIBRATION + 2)) --warmup-iters 1)
  fi
  if [ "$impl" = gloo ]; then
    cmd=("$py" "$here/gloo_bench.py" --ranks "$CMP_RANKS" --timeout "$CMP_TIMEOUT" --json "$out" --label gloo "${args[@]}")
  else
    mapfile -d '' -t cmd < <(mpi_cmd "$impl" "$rep") || return 1
    if [ "$kind" = model ] && [ "$impl" != ompi ]; then
      cmd+=(-x OPTIREDUCE_CALIBRATION_CALLS="$CMP_MODEL_CALIBRATION")
    fi
    cmd+=("$itertime" --json "$out" --label "$impl" "${args[@]}")
  fi
  progress "$kind $n/$total: $impl"
  echo "${cmd[*]}" >"$dir/$impl-$kind.cmd"
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout -k 10 "$CMP_TIMEOUT" "${cmd[@]}" </dev/null >/dev/null 2>"$err"
  rc=$?
  t1=$(date +%s.%N)
  local secs
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  echo "$impl $kind $rc $secs" >>"$dir/jobs.txt"
  if [ "$rc" -ne 0 ]; then
    progress "$kind $n/$total: $impl FAILED (exit $rc after $secs s): $(grep -v '^\s*$' "$err" | tail -n 2 | tr '\n' ' ' | cut -c1-300)"
  else
    progress "$kind $n/$total: $impl done in $secs s"
  fi
}

: >"$dir/jobs.txt"
progress "tail probe (Open MPI tcp, ${CMP_RANKS} ranks, 4 MiB, $CMP_PROBE_ITERS calls)"
if "$here/probe.sh" "$build" "$CMP_PROBE_ITERS" "$dir/probe.json"; then
  progress "tail probe: P99/P50 $($py -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.2f (p50 %.1f ms, p99 %.1f ms)" % (d["p99_over_p50"], d["p50_ms"], d["p99_ms"]))' "$dir/probe.json")"
else
  progress "tail probe FAILED"
fi
kinds=()
[ "$CMP_LATENCY" = 1 ] && kinds+=(latency)
[ -n "$CMP_MODELS" ] && kinds+=(model)
total=$(( ${#impls[@]} * ${#kinds[@]} ))
n=0
for kind in "${kinds[@]}"; do
  for impl in "${impls[@]}"; do
    n=$((n + 1))
    run_job "$impl" "$kind" "$n" "$total"
  done
done
exit 0

#!/usr/bin/env bash
# bench.sh: the project's benchmark driver. Every contender (Open MPI, OptiReduce in a mode or on a
# transport, Gloo) runs in processes of its own, one launch per contender and round, exactly as a
# user runs it; rounds interleave the contenders; every figure is a median over rounds and every
# ratio is against a baseline measured in the same run. Every call's result is checked against
# the exact sum. See --help; docs/benchmarks.md has the command of each measurement.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prog=bench.sh

usage() {
  cat <<'EOF_USAGE'
usage: scripts/bench.sh [options]

Times float32 MPI_Allreduce(SUM) for each contender in its own mpirun (build/bin/
optireduce-allreduce-bench, plain MPI; OptiReduce contenders get LD_PRELOAD=liboptireduce.so),
round after round, and prints a markdown table: medians over rounds of each round's p50 and p99,
ratios to the baseline of the same run, dropped fraction, worst relative RMS error, calls that
were not exact, calls spent calibrating. Raw per-call figures go to the output directory.

what to measure (one of):
  --sizes LIST         latency of each size, comma-separated, K/M/G = KiB/MiB/GiB, decimals allowed
                       (the default mode; default 1M,4M,16M,64M)
  --step LIST          a DDP-shaped step: one in-place buffer per bucket, reduced in reverse order,
                       the step timed (e.g. 0.25M,6.25M,6.25M,6.25M,5.5M)
  --buckets [LIST]     a step of 20 distinct bucket sizes (1 to 7.75 MiB, three size classes),
                       for the calls each contender spends calibrating; or the LIST given
  --small [LIST]       small messages (default 4K,16K,64K,256K) with OPTIREDUCE_MIN_BYTES=4 for
                       every OptiReduce contender, so that the library intercepts them
  --in-place           latency mode: MPI_IN_PLACE instead of separate send and receive buffers
  --barrier mpi|host   what starts each iteration: the contender's own barrier (mpi, the default)
                       or one that sends nothing over the network (host: shared memory, or Unix
                       sockets for Gloo; not with cluster:). Over a lossy network the MPI barrier's
                       own messages are lost and retransmitted, and its tail lands in every
                       contender's figures

where (--net):
  shm                  plain mpirun on this host (Open MPI picks shared memory; so does UCX)
  tcp                  this host's loopback, TCP only: Open MPI --mca pml ob1 --mca btl tcp,self
                       on lo; OptiReduce's UCX held to tcp on lo
  netns:PROFILE        the tcp settings inside a fresh network namespace of scripts/netem.sh per
                       job: clean, loss-0.1, loss-1, loss-3, tail-3, tail-6 (root)
  cluster:HOSTS:DROP   scripts/cluster.sh --hosts HOSTS --drop DROP (per mille per link and
                       direction; veth, MTU 1500), one rank per host, UCX held to tcp on eth0 (root)

contenders:
  --contenders LIST    names, space or comma separated (default "ompi or-reliable or-bounded");
                       built in: ompi (no preload), or-reliable (OPTIREDUCE_MODE=reliable),
                       or-bounded (the library's defaults), or-udp (OPTIREDUCE_TRANSPORT=udp),
                       or-ofi (OPTIREDUCE_TRANSPORT=ofi), gloo (torch.distributed gloo,
                       /usr/bin/python3; not with cluster:)
  --contender NAME=ASSIGNMENTS
                       define (or redefine) a contender and add it to the list: space-separated
                       VAR=VALUE settings forwarded to its ranks with -x, OptiReduce preloaded,
                       e.g. --contender 'or-fec=OPTIREDUCE_TRANSPORT=ofi OPTIREDUCE_FEC=4';
                       the pseudo-setting preload=no leaves the library out (MPI variants)
  --baseline NAME      the contender ratios are taken against (default ompi)
  --env VAR=VALUE      forwarded to every contender's ranks (repeatable)

how long:
  --warmup N           untimed iterations first: calls (latency) or steps (default 30 calls,
                       10 steps); they are checked and recorded but not in p50/p99
  --iters N            timed iterations (default 50 calls, 200 for --small, 30 steps)
  --rounds N           rounds (default 3; medians need 3)
  --order rotate|fixed contender order per round: rotate (A B C, B C A, C A B: each contender
                       takes each position; the default) or fixed (A B C, A B C, ...)
  --ranks N            ranks (default 4; cluster: the number of hosts)
  --timeout S          kill one job after S seconds (default 900)

output and others:
  --build-dir DIR      build with lib/liboptireduce.so and bin/optireduce-allreduce-bench
                       (default build)
  --out-dir DIR        where the results go (default results/bench/<timestamp>)
  --tolerance X        largest relative RMS error of a bounded call that reports no dropped entry
                       (default 1e-3)
  --syscalls           count each rank's system calls with strace -c (DIR/runs/*/strace.*) and
                       report send and receive calls per allreduce call; strace slows every
                       contender down: its timings are not comparable, run it on its own
  --inject-wrong-result
                       testing: every contender's first call returns one wrong entry on rank 0;
                       the check must then fail (exit 1, "WRONG" in the table)
  --dry-run            print the jobs' commands, run nothing
  -h, --help           this text

Output directory: table.md (also printed on stdout), summary.json, calls.csv (every call of every
job: round, contender, latency, kind, dropped entries, relative RMS error), iterations.csv (every
iteration: a call, or a step), meta.json (settings, load average before and after, commit), and
runs/r<round>-<contender>/ with each job's command, stdout, stderr, JSON and OptiReduce report.
Progress goes to stderr. Exit code: 0 when every job ran and every result was right, 1 otherwise,
2 on bad usage or when the network cannot be set up.
EOF_USAGE
}

die() { echo "$prog: $*" >&2; exit 2; }
need() { [ $# -ge 2 ] || die "$1 needs a value (see --help)"; }

# Built-in contenders: their settings (pseudo-settings: preload=no, runner=gloo).
builtin_contender() {
  case $1 in
    ompi) echo "preload=no" ;;
    gloo) echo "runner=gloo" ;;
    or-reliable) echo "OPTIREDUCE_MODE=reliable" ;;
    or-bounded) echo "" ;;  # the library's defaults: what a user who only preloads it gets
    or-udp) echo "OPTIREDUCE_TRANSPORT=udp" ;;
    or-ofi) echo "OPTIREDUCE_TRANSPORT=ofi" ;;
    *) return 1 ;;
  esac
}
# 20 distinct sizes, geometric from 1 MiB to 7.75 MiB, multiples of 4 KiB: three size classes of
# the engine's calibration (1-2, 2-4, 4-8 MiB), none a power of two but the first.
buckets20=1024K,1140K,1272K,1416K,1576K,1756K,1956K,2176K,2424K,2700K,3008K,3352K,3732K,4156K,4628K,5156K,5744K,6396K,7124K,7936K

net=shm
mode=latency
list=""
in_place=0
barrier=mpi
contenders="ompi or-reliable or-bounded"
declare -A defs=()
baseline=ompi
common_env=()
warmup=""
iters=""
rounds=3
order=rotate
ranks=""
timeout_s=900
build_dir=build
out_dir=""
tolerance=1e-3
inject=0
syscalls=0
dry_run=0
orig_args=("$@")

while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) need "$@"; mode=latency; list=$2; shift 2 ;;
    --step) need "$@"; mode=step; list=$2; shift 2 ;;
    --buckets)
      mode=buckets; list=$buckets20
      if [ $# -ge 2 ] && [[ "$2" != --* ]]; then list=$2; shift; fi
      shift ;;
    --small)
      mode=small; list=4K,16K,64K,256K
      if [ $# -ge 2 ] && [[ "$2" != --* ]]; then list=$2; shift; fi
      shift ;;
    --in-place) in_place=1; shift ;;
    --barrier)
      need "$@"
      [[ "$2" == mpi || "$2" == host ]] || die "--barrier \"$2\": mpi or host"
      barrier=$2; shift 2 ;;
    --net) need "$@"; net=$2; shift 2 ;;
    --contenders) need "$@"; contenders=${2//,/ }; shift 2 ;;
    --contender)
      need "$@"
      [[ "$2" =~ ^([A-Za-z0-9_.+-]+)=(.*)$ ]] || die "--contender \"$2\" is not NAME=ASSIGNMENTS"
      defs[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
      [[ " $contenders " == *" ${BASH_REMATCH[1]} "* ]] || contenders+=" ${BASH_REMATCH[1]}"
      shift 2 ;;
    --baseline) need "$@"; baseline=$2; shift 2 ;;
    --env)
      need "$@"; [[ "$2" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "--env \"$2\" is not VAR=VALUE"
      common_env+=("$2"); shift 2 ;;
    --warmup) need "$@"; warmup=$2; shift 2 ;;
    --iters) need "$@"; iters=$2; shift 2 ;;
    --rounds) need "$@"; rounds=$2; shift 2 ;;
    --order) need "$@"; order=$2; shift 2 ;;
    --ranks) need "$@"; ranks=$2; shift 2 ;;
    --timeout) need "$@"; timeout_s=$2; shift 2 ;;
    --build-dir) need "$@"; build_dir=$2; shift 2 ;;
    --out-dir) need "$@"; out_dir=$2; shift 2 ;;
    --tolerance) need "$@"; tolerance=$2; shift 2 ;;
    --syscalls) syscalls=1; shift ;;
    --inject-wrong-result) inject=1; shift ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option \"$1\" (see --help)" ;;
  esac
done

# --- settings ---------------------------------------------------------------------------------------
case $mode in
  latency) list=${list:-1M,4M,16M,64M}; warmup=${warmup:-30}; iters=${iters:-50} ;;
  small) warmup=${warmup:-30}; iters=${iters:-200} ;;
  step|buckets) warmup=${warmup:-10}; iters=${iters:-30} ;;
esac
for v in warmup iters rounds timeout_s; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || die "--${v%_s} \"${!v}\" must be a non-negative integer"
done
[ "$iters" -ge 1 ] && [ "$rounds" -ge 1 ] && [ "$timeout_s" -ge 1 ] || die "--iters, --rounds and --timeout must be at least 1"
[ "$rounds" -ge 3 ] || echo "$prog: warning: --rounds $rounds: a median of fewer than 3 rounds does not tame a rare stall" >&2
case $order in rotate|fixed) ;; *) die "--order \"$order\": rotate or fixed" ;; esac
[[ "$list" =~ ^[0-9.]+[KMGkmg]?(,[0-9.]+[KMGkmg]?)*$ ]] || die "size list \"$list\" is not SIZE[,SIZE...] (e.g. 1M,6.25M,256K)"

net_kind=${net%%:*}
case $net_kind in
  shm|tcp) [ "$net" = "$net_kind" ] || die "--net $net: shm and tcp take no argument" ;;
  netns) profile=${net#netns:}; [ -n "$profile" ] && [ "$profile" != "$net" ] || die "--net netns:PROFILE (e.g. netns:loss-1)" ;;
  cluster)
    [[ "$net" =~ ^cluster:([0-9]+):([0-9]+(\.[0-9]+)?)$ ]] || die "--net cluster:HOSTS:DROP_PERMILLE (e.g. cluster:4:1)"
    hosts=${BASH_REMATCH[1]} drop=${BASH_REMATCH[2]}
    [ -z "$ranks" ] || [ "$ranks" = "$hosts" ] || die "--net $net runs one rank per host: --ranks must be $hosts"
    ranks=$hosts
    [ "$barrier" = mpi ] || die "--barrier host needs every rank on one host: not with --net $net" ;;
  *) die "--net \"$net\": shm, tcp, netns:PROFILE or cluster:HOSTS:DROP" ;;
esac
ranks=${ranks:-4}
[[ "$ranks" =~ ^[0-9]+$ ]] && [ "$ranks" -ge 2 ] || die "--ranks \"$ranks\" must be an integer of at least 2"

read -r -a contender_list <<<"$contenders"
[ ${#contender_list[@]} -gt 0 ] || die "no contender"
for c in "${contender_list[@]}"; do
  if [ -z "${defs[$c]+set}" ]; then
    defs[$c]=$(builtin_contender "$c") || die "unknown contender \"$c\" (built in: ompi gloo or-reliable or-bounded or-udp or-ofi; or --contender NAME=...)"
  fi
  for a in ${defs[$c]}; do
    [[ "$a" =~ ^[A-Za-z_][A-Za-z0-9_]*=.*$ ]] || die "contender $c: \"$a\" is not VAR=VALUE"
  done
done
[[ " ${contender_list[*]} " == *" $baseline "* ]] || die "the baseline \"$baseline\" is not among the contenders (${contender_list[*]})"

case "$build_dir" in /*) ;; *) build_dir=$root/$build_dir ;; esac
lib=$build_dir/lib/liboptireduce.so
bench_bin=$build_dir/bin/optireduce-allreduce-bench
gloo_py=$root/scripts/bench/gloo_allreduce_bench.py
py=/usr/bin/python3
[ -f "$lib" ] || die "no $lib (build first, or --build-dir)"
[ -x "$bench_bin" ] || die "no $bench_bin (build first, or --build-dir)"
[ -x "$py" ] || die "$py not found"
command -v mpirun >/dev/null || die "mpirun not found (scripts/setup.sh installs Open MPI)"
command -v timeout >/dev/null || die "timeout not found (coreutils)"
[ "$syscalls" = 0 ] || command -v strace >/dev/null || die "--syscalls needs strace (apt-get install strace)"
if [ "$net_kind" = netns ] || [ "$net_kind" = cluster ]; then
  [ "$(id -u)" -eq 0 ] || die "--net $net must run as root (network namespaces)"
fi
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# Ranks that mpirun starts on this host inherit its environment: an OPTIREDUCE_* setting or a
# preload of the calling shell would reach every contender, Open MPI's included. Each contender
# gets only the settings this script forwards.
leaked=$(compgen -e | grep -E '^(OPTIREDUCE_|LD_PRELOAD$)' | tr '\n' ' ')
if [ -n "$leaked" ]; then
  echo "$prog: note: ignoring $leaked from the environment (use --env or --contender)" >&2
  # shellcheck disable=SC2086
  unset $leaked
fi

if [ -z "$out_dir" ]; then
  out_dir=$root/results/bench/$(date +%Y%m%d-%H%M%S)
  [ -e "$out_dir" ] && out_dir=$out_dir-$$
fi
case "$out_dir" in /*) ;; *) out_dir=$PWD/$out_dir ;; esac
if [ "$dry_run" = 0 ]; then mkdir -p "$out_dir/runs" || die "cannot create $out_dir"; fi

# --- one job's command ------------------------------------------------------------------------------
# OptiReduce's UCX and Open MPI on the emulated network (or loopback) only: shared memory would
# bypass it. A contender's own settings come last and win.
net_env=()
mpi_net=()
case $net_kind in
  tcp|netns)
    # shellcheck disable=SC2054  # "tcp,self" is one argument
    mpi_net=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
    net_env=(OPTIREDUCE_UCX_TLS=tcp OPTIREDUCE_UCX_NET_DEVICES=lo) ;;
  cluster) net_env=(OPTIREDUCE_UCX_TLS=tcp OPTIREDUCE_UCX_NET_DEVICES=eth0) ;;
esac
mode_env=()
[ "$mode" = small ] && mode_env=(OPTIREDUCE_MIN_BYTES=4)

program_args() {  # dir name: sets prog_args
  prog_args=(--warmup "$warmup" --iters "$iters" --tolerance "$tolerance" --barrier "$barrier" --json "$1/out.json" --label "$2")
  [ "$inject" = 1 ] && prog_args+=(--corrupt-result 1)
  if [ "$mode" = step ] || [ "$mode" = buckets ]; then
    prog_args+=(step --buckets "$list")
  else
    prog_args+=(latency --sizes "$list")
    [ "$in_place" = 1 ] && prog_args+=(--in-place)
  fi
  return 0
}

# Sets cmd to the job's command; returns 1 with the reason in skip_reason when the contender
# cannot run on this network.
job_command() {  # contender dir
  local c=$1 dir=$2 preload=1 runner=mpi a
  local -a settings=()
  cmd=()
  for a in ${defs[$c]}; do
    case $a in
      preload=no) preload=0 ;;
      runner=gloo) runner=gloo ;;
      *) settings+=("$a") ;;
    esac
  done
  program_args "$dir" "$c"
  # --syscalls: strace -c per rank (MPI: one file per rank; Gloo: its launcher and all its ranks).
  if [ "$runner" = gloo ]; then
    [ "$net_kind" != cluster ] || { skip_reason="gloo starts its ranks on one host: not with --net cluster"; return 1; }
    for a in "${common_env[@]}"; do cmd+=("$a"); done
    [ ${#cmd[@]} -eq 0 ] || cmd=(env "${cmd[@]}")
    [ "$syscalls" = 1 ] && cmd+=(strace -f -qq -c -o "$dir/strace.all")
    cmd+=("$py" "$gloo_py" --ranks "$ranks" --timeout "$timeout_s" "${prog_args[@]}")
  else
    local -a program=("$bench_bin")
    # shellcheck disable=SC2016  # expanded by the rank's shell: the rank number is known there
    [ "$syscalls" = 1 ] && program=(sh -c 'exec strace -f -qq -c -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' "$dir/strace" "$bench_bin")
    # -x VAR=VALUE, each variable once, the last setting winning.
    local -A value=()
    local -a names=() env=()
    env=("${common_env[@]}")
    if [ "$preload" = 1 ]; then
      env+=(LD_PRELOAD="$lib" OPTIREDUCE_REPORT="$dir/report.json" "${net_env[@]}" "${mode_env[@]}")
    fi
    env+=("${settings[@]}")
    for a in "${env[@]}"; do
      [ -n "${value[${a%%=*}]+set}" ] || names+=("${a%%=*}")
      value[${a%%=*}]=${a#*=}
    done
    local -a x=()
    for a in "${names[@]}"; do x+=(-x "$a=${value[$a]}"); done
    if [ "$net_kind" = cluster ]; then
      cmd=("$root/scripts/cluster.sh" --hosts "$hosts" --drop "$drop" --stats "$dir/links.json" -q --mpirun --
           "${x[@]}" "${program[@]}" "${prog_args[@]}")
    else
      cmd=(mpirun -np "$ranks" --oversubscribe "${mpi_net[@]}" "${x[@]}" "${program[@]}" "${prog_args[@]}")
    fi
  fi
  if [ "$net_kind" = netns ]; then
    cmd=("$root/scripts/netem.sh" --profile "$profile" --stats "$dir/netem.json" -- "${cmd[@]}")
  fi
  return 0
}

quote() {  # a command line to paste into a shell; plain words stay as they are
  local s="" a
  for a in "$@"; do
    if [[ "$a" =~ ^[A-Za-z0-9_./:=,+@%-]+$ ]]; then s+=" $a"
    elif [[ "$a" != *"'"* ]]; then s+=" '$a'"
    else s+=" $(printf '%q' "$a")"; fi
  done
  echo "${s# }"
}
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# --- meta ---------------------------------------------------------------------------------------------
write_meta() {  # state
  local defs_json="" c
  for c in "${contender_list[@]}"; do defs_json+="$c=${defs[$c]}"$'\n'; done
  BM_STATE=$1 BM_DEFS=$defs_json BM_CMD=$(quote "$0" "${orig_args[@]}") BM_NET=$net BM_MODE=$mode BM_LIST=$list \
  BM_WARMUP=$warmup BM_ITERS=$iters BM_ROUNDS=$rounds BM_RANKS=$ranks BM_ORDER=$order BM_BASELINE=$baseline \
  BM_CONTENDERS="${contender_list[*]}" BM_BUILD=$build_dir BM_LOAD0=$load_start BM_UPTIME0=$uptime_start \
  BM_INPLACE=$in_place BM_BARRIER=$barrier BM_TOL=$tolerance BM_SYSCALLS=$syscalls BM_COMMIT=$(git -C "$root" rev-parse --short HEAD 2>/dev/null) \
  BM_DIRTY=$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null | wc -l) BM_START=$start_date \
  "$py" - "$out_dir/meta.json" <<'PY'
import json, os, sys
e = os.environ
defs = dict(l.split("=", 1) for l in e["BM_DEFS"].splitlines() if l)
json.dump({"state": e["BM_STATE"], "command": e["BM_CMD"], "net": e["BM_NET"], "mode": e["BM_MODE"],
           "list": e["BM_LIST"], "in_place": e["BM_INPLACE"] == "1", "barrier": e["BM_BARRIER"], "warmup": int(e["BM_WARMUP"]),
           "iters": int(e["BM_ITERS"]), "rounds": int(e["BM_ROUNDS"]), "ranks": int(e["BM_RANKS"]),
           "order": e["BM_ORDER"], "baseline": e["BM_BASELINE"], "contenders": e["BM_CONTENDERS"].split(),
           "definitions": defs, "tolerance": float(e["BM_TOL"]), "syscalls": e["BM_SYSCALLS"] == "1", "build_dir": e["BM_BUILD"],
           "commit": e["BM_COMMIT"], "uncommitted_changes": int(e["BM_DIRTY"] or 0), "started": e["BM_START"],
           "host_cpus": os.cpu_count(), "loadavg_start": e["BM_LOAD0"], "uptime_start": e["BM_UPTIME0"],
           "loadavg_end": open("/proc/loadavg").read().split()[:3] if e["BM_STATE"] == "complete" else None,
           "uptime_end": os.popen("uptime").read().strip() if e["BM_STATE"] == "complete" else None},
          open(sys.argv[1], "w"), indent=1)
PY
}

# --- the rounds ----------------------------------------------------------------------------------------
n=${#contender_list[@]}
load_start=$(loadavg)
uptime_start=$(uptime)
start_date=$(date -Iseconds)
echo "$prog: $net, $mode ($list), $ranks ranks, $warmup warm-up + $iters timed, $rounds round(s), contenders ${contender_list[*]} (baseline $baseline); load average $load_start" >&2
[ "$dry_run" = 1 ] || { echo "$prog: results in $out_dir" >&2; write_meta partial; : >"$out_dir/jobs.tsv"; }
failed=0
for ((r = 1; r <= rounds; r++)); do
  for ((k = 0; k < n; k++)); do
    if [ "$order" = rotate ]; then c=${contender_list[$(((k + r - 1) % n))]}; else c=${contender_list[$k]}; fi
    dir=$out_dir/runs/r$r-$c
    if ! job_command "$c" "$dir"; then
      echo "$prog: [round $r/$rounds] $c skipped: $skip_reason" >&2
      [ "$dry_run" = 1 ] || printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$c" skip 0 "$(loadavg)" "$skip_reason" >>"$out_dir/jobs.tsv"
      continue
    fi
    if [ "$dry_run" = 1 ]; then quote timeout -k 30 "$timeout_s" "${cmd[@]}"; continue; fi
    mkdir -p "$dir"
    quote "${cmd[@]}" >"$dir/cmd"
    load=$(loadavg)
    echo "$prog: [round $r/$rounds] $c ($((k + 1))/$n), load $load" >&2
    t0=$(date +%s.%N)
    # timeout signals the wrapper (netem.sh, cluster.sh), whose traps remove their namespaces.
    timeout -k 30 "$timeout_s" "${cmd[@]}" </dev/null >"$dir/stdout" 2>"$dir/stderr"
    rc=$?
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$c" "$rc" "$secs" "$load" "" >>"$out_dir/jobs.tsv"
    if [ "$rc" -ne 0 ]; then
      failed=1
      why=$(grep -m2 -iE 'error|wrong|timed out' "$dir/stderr" | tr '\n' ' ')
      [ -n "$why" ] || why=$(grep -v '^\s*$' "$dir/stderr" | tail -n 3 | tr '\n' ' ')
      echo "$prog: [round $r/$rounds] $c FAILED (exit $rc after $secs s): ${why:0:400}" >&2
    else
      echo "$prog: [round $r/$rounds] $c done in $secs s" >&2
    fi
  done
done
[ "$dry_run" = 1 ] && exit 0

write_meta complete
"$py" "$root/scripts/bench/summarize.py" "$out_dir" || failed=1
echo "$prog: results in $out_dir" >&2
exit "$failed"

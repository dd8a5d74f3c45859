#!/usr/bin/env bash
# bench.sh: the project's benchmark driver. Every contender (Open MPI, OptiReduce in a mode or on a
# transport, Gloo) runs in processes of its own, one launch per contender and round, exactly as a
# user runs it; rounds interleave the contenders (and the networks); every figure is a median over
# rounds and every ratio is against a baseline measured in the same run. Every call's result is
# checked against the exact sum. See --help; docs/benchmarks.md has the command of each measurement.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prog=bench.sh

usage() {
  cat <<'EOF_USAGE'
usage: scripts/bench.sh [options]

Times float32 MPI_Allreduce(SUM) for each contender in its own mpirun (build/bin/optireduce-bench,
plain MPI; OptiReduce contenders get LD_PRELOAD=liboptireduce.so; Gloo runs scripts/bench/
gloo_bench.py), round after round, and prints a markdown table per network: medians over rounds of
each round's p50 and p99, ratios to the baseline of the same run, dropped fraction, worst relative
RMS error, calls that were not exact, calls spent calibrating. Raw per-call figures go to the
output directory.

what to measure (one of):
  --sizes LIST         latency of each size, comma-separated, K/M/G = KiB/MiB/GiB, decimals allowed
                       (the default mode; default 1M,4M,16M,64M)
  --counts LIST        latency of each element count in (e.g. 4M: 2^22 elements per rank), so that
                       contenders of different formats or collectives (format=, collective=
                       below) share a row
  --step LIST          a DDP-shaped step: one in-place buffer per bucket, reduced in reverse order,
                       the step timed (e.g. 0.25M,6.25M,6.25M,6.25M,5.5M)
  --buckets [LIST]     a step of 20 distinct bucket sizes (1 to 7.75 MiB, three size classes),
                       for the calls each contender spends calibrating; or the LIST given
  --small [LIST]       small messages (default 4K,16K,64K,256K) with OPTIREDUCE_MIN_BYTES=4 for
                       every OptiReduce contender, so that the library intercepts them
  --sweep MIN:MAX[:F]  latency of sizes from MIN to MAX, each F (default 2) times the one before
  --model LIST         a model's data-parallel step replayed: a compute sleep, then one allreduce
                       per DDP bucket (resnet50, gpt2, bert-large; optireduce-bench model)
  --scale LIST         with --model: the fraction of each model replayed (one value or one per
                       model; e.g. 1,0.25 for ResNet-50 whole and 5 of GPT-2's 19 buckets)
  --warmup-calls N     untimed calls per size class before the warm-up iterations (default 22
                       for --model, else 0): they cover the engine's calibration of each class
  --in-place           latency mode: MPI_IN_PLACE instead of separate send and receive buffers
  --barrier mpi|host   what starts each iteration: the contender's own barrier (mpi, the default)
                       or one that sends nothing over the network (host: shared memory, or Unix
                       sockets for Gloo; not with cluster:). Over a lossy network the MPI barrier's
                       own messages are lost and retransmitted, and its tail lands in every
                       contender's figures

where (--net NET[,NET...]: each network gets its own table; rounds alternate over them):
  shm                  plain mpirun on this host (Open MPI picks shared memory; so does UCX)
  tcp                  this host's loopback, TCP only: Open MPI --mca pml ob1 --mca btl tcp,self
                       on lo; OptiReduce's UCX held to tcp on lo
  netns:PROFILE        the tcp settings inside a fresh network namespace of scripts/netem.sh per
                       job: clean, loss-0.1, loss-1, loss-3, tail-3, tail-6 (root)
  cluster:HOSTS:DROP[:PER_HOST[:RATE]]
                       scripts/cluster.sh --hosts HOSTS --drop DROP (per mille per link and
                       direction; veth, MTU 1500), PER_HOST ranks per host (default 1: --ranks-per-host),
                       every link shaped to RATE (tc syntax, e.g. 1gbit; default none), UCX's
                       network lanes held to eth0 (root); a last :gro-on turns the hosts'
                       receive offload on (cluster.sh --gro on), e.g. cluster:4:0:1:gro-on

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
                       the pseudo-setting preload=no leaves the library out (MPI variants);
                       format=f32|bf16|fp16 and collective=allreduce|reduce_scatter_block pick
                       what the contender's optireduce-bench calls (16-bit: Horovod's datatype
                       and op), e.g. --contender 'ompi-fp16=preload=no format=fp16';
                       library=PATH preloads another build's liboptireduce.so, to compare two
                       builds in one run, e.g. --contender 'before=library=/tmp/old/lib/liboptireduce.so'
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
  --plot               also draw each network's latency CDF per contender (cdf-<entry>.png, with
                       python3-matplotlib)

output and others:
  --build-dir DIR      build with lib/liboptireduce.so and bin/optireduce-bench
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

Output directory (with several networks, one sub-directory per network and table.md joining
their tables): table.md (also printed on stdout), summary.json, calls.csv (every call of every
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

nets=shm
mode=latency
scale=""
warmup_calls=""
plot=0
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
    --counts) need "$@"; mode=counts; list=$2; shift 2 ;;
    --step) need "$@"; mode=step; list=$2; shift 2 ;;
    --buckets)
      mode=buckets; list=$buckets20
      if [ $# -ge 2 ] && [[ "$2" != --* ]]; then list=$2; shift; fi
      shift ;;
    --small)
      mode=small; list=4K,16K,64K,256K
      if [ $# -ge 2 ] && [[ "$2" != --* ]]; then list=$2; shift; fi
      shift ;;
    --sweep) need "$@"; mode=sweep; list=$2; shift 2 ;;
    --model) need "$@"; mode=model; list=$2; shift 2 ;;
    --scale) need "$@"; scale=$2; shift 2 ;;
    --warmup-calls) need "$@"; warmup_calls=$2; shift 2 ;;
    --plot) plot=1; shift ;;
    --in-place) in_place=1; shift ;;
    --barrier)
      need "$@"
      [[ "$2" == mpi || "$2" == host ]] || die "--barrier \"$2\": mpi or host"
      barrier=$2; shift 2 ;;
    --net) need "$@"; nets=$2; shift 2 ;;
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
  counts) warmup=${warmup:-30}; iters=${iters:-50} ;;
  small) warmup=${warmup:-30}; iters=${iters:-200} ;;
  step|buckets) warmup=${warmup:-10}; iters=${iters:-30} ;;
  sweep) warmup=${warmup:-30}; iters=${iters:-50} ;;
  model) warmup=${warmup:-1}; iters=${iters:-5}; warmup_calls=${warmup_calls:-22} ;;
esac
warmup_calls=${warmup_calls:-0}
for v in warmup iters rounds timeout_s warmup_calls; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || die "--${v%_s} \"${!v}\" must be a non-negative integer"
done
[ "$iters" -ge 1 ] && [ "$rounds" -ge 1 ] && [ "$timeout_s" -ge 1 ] || die "--iters, --rounds and --timeout must be at least 1"
[ "$rounds" -ge 3 ] || echo "$prog: warning: --rounds $rounds: a median of fewer than 3 rounds does not tame a rare stall" >&2
case $order in rotate|fixed) ;; *) die "--order \"$order\": rotate or fixed" ;; esac
case $mode in
  model)
    [[ "$list" =~ ^(resnet50|gpt2|bert-large)(,(resnet50|gpt2|bert-large))*$ ]] || die "--model \"$list\": a comma list of resnet50, gpt2, bert-large"
    [ -z "$scale" ] || [[ "$scale" =~ ^[0-9.]+(,[0-9.]+)*$ ]] || die "--scale \"$scale\" is not X[,X...]" ;;
  sweep)
    [[ "$list" =~ ^([0-9.]+[KMGkmg]?):([0-9.]+[KMGkmg]?)(:([0-9.]+))?$ ]] || die "--sweep \"$list\" is not MIN:MAX[:FACTOR] (e.g. 4K:64M:2)"
    sweep_min=${BASH_REMATCH[1]} sweep_max=${BASH_REMATCH[2]} sweep_factor=${BASH_REMATCH[4]:-2} ;;
  *) [[ "$list" =~ ^[0-9.]+[KMGkmg]?(,[0-9.]+[KMGkmg]?)*$ ]] || die "size list \"$list\" is not SIZE[,SIZE...] (e.g. 1M,6.25M,256K)" ;;
esac
[ -z "$scale" ] || [ "$mode" = model ] || die "--scale goes with --model"

# Sets net, net_kind, profile, hosts, drop, per_host, rate, gro for one network of --net (and checks it).
set_net() {
  net=$1 net_kind=${1%%:*}
  case $net_kind in
    shm|tcp) [ "$net" = "$net_kind" ] || die "--net $net: shm and tcp take no argument" ;;
    netns) profile=${net#netns:}; [ -n "$profile" ] && [ "$profile" != "$net" ] || die "--net netns:PROFILE (e.g. netns:loss-1)" ;;
    cluster)
      [[ "$net" =~ ^cluster:([0-9]+):([0-9]+(\.[0-9]+)?)(:([0-9]+)(:([0-9]+[kmg]?bit))?)?(:gro-(on|off))?$ ]] ||
        die "--net cluster:HOSTS:DROP_PERMILLE[:RANKS_PER_HOST[:RATE]][:gro-on] (e.g. cluster:4:1 or cluster:2:0:2:1gbit)"
      hosts=${BASH_REMATCH[1]} drop=${BASH_REMATCH[2]} per_host=${BASH_REMATCH[5]:-1} rate=${BASH_REMATCH[7]}
      gro=${BASH_REMATCH[9]:-off}
      [ "$per_host" -ge 1 ] || die "--net $net: at least one rank per host"
      [ -z "$ranks" ] || [ "$ranks" = "$((hosts * per_host))" ] || die "--net $net runs $per_host rank(s) per host: --ranks must be $((hosts * per_host))"
      [ "$barrier" = mpi ] || die "--barrier host needs every rank on one host: not with --net $net" ;;
    *) die "--net \"$net\": shm, tcp, netns:PROFILE or cluster:HOSTS:DROP" ;;
  esac
  return 0
}
IFS=, read -r -a net_list <<<"$nets"
[ ${#net_list[@]} -gt 0 ] || die "--net: no network"
need_root=0
for nt in "${net_list[@]}"; do
  set_net "$nt"
  [ "$net_kind" = cluster ] && ranks=$((hosts * per_host))
  [ "$net_kind" = netns ] || [ "$net_kind" = cluster ] && need_root=1
done
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
    case $a in library=*) [ -f "${a#*=}" ] || die "contender $c: library=${a#*=}: no such file (a liboptireduce.so)" ;; esac
  done
done
[[ " ${contender_list[*]} " == *" $baseline "* ]] || die "the baseline \"$baseline\" is not among the contenders (${contender_list[*]})"

case "$build_dir" in /*) ;; *) build_dir=$root/$build_dir ;; esac
lib=$build_dir/lib/liboptireduce.so
bench_bin=$build_dir/bin/optireduce-bench
gloo_py=$root/scripts/bench/gloo_bench.py
py=/usr/bin/python3
[ -f "$lib" ] || die "no $lib (build first, or --build-dir)"
[ -x "$bench_bin" ] || die "no $bench_bin (build first, or --build-dir)"
[ -x "$py" ] || die "$py not found"
command -v mpirun >/dev/null || die "mpirun not found (scripts/setup.sh installs Open MPI)"
command -v timeout >/dev/null || die "timeout not found (coreutils)"
[ "$syscalls" = 0 ] || command -v strace >/dev/null || die "--syscalls needs strace (apt-get install strace)"
[ "$need_root" = 0 ] || [ "$(id -u)" -eq 0 ] || die "--net $nets must run as root (network namespaces)"
[ "$plot" = 0 ] || "$py" -c 'import matplotlib' 2>/dev/null || die "--plot needs matplotlib for $py (apt-get install python3-matplotlib)"
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
# One directory per network: the output directory itself when there is one network.
net_dir() {  # net
  if [ ${#net_list[@]} -eq 1 ]; then echo "$out_dir"; else echo "$out_dir/${1//[:\/]/-}"; fi
}
if [ "$dry_run" = 0 ]; then
  for nt in "${net_list[@]}"; do mkdir -p "$(net_dir "$nt")/runs" || die "cannot create $(net_dir "$nt")"; done
fi

mode_env=()
[ "$mode" = small ] && mode_env=(OPTIREDUCE_MIN_BYTES=4)
# The command line of one job: net_settings, program_args, job_command, quote.
. "$root/scripts/bench/job_command.sh"
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# --- meta ---------------------------------------------------------------------------------------------
write_meta() {  # state dir
  local defs_json="" c
  for c in "${contender_list[@]}"; do defs_json+="$c=${defs[$c]}"$'\n'; done
  BM_STATE=$1 BM_DEFS=$defs_json BM_CMD=$(quote "$0" "${orig_args[@]}") BM_NET=$net BM_MODE=$mode BM_LIST=$list \
  BM_WARMUP=$warmup BM_ITERS=$iters BM_ROUNDS=$rounds BM_RANKS=$ranks BM_ORDER=$order BM_BASELINE=$baseline \
  BM_CONTENDERS="${contender_list[*]}" BM_BUILD=$build_dir BM_LOAD0=$load_start BM_UPTIME0=$uptime_start \
  BM_INPLACE=$in_place BM_BARRIER=$barrier BM_TOL=$tolerance BM_SYSCALLS=$syscalls BM_COMMIT=$(git -C "$root" rev-parse --short HEAD 2>/dev/null) \
  BM_DIRTY=$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null | wc -l) BM_START=$start_date \
  BM_SCALE=$scale BM_WARMUP_CALLS=$warmup_calls "$py" "$root/scripts/bench/write_meta.py" "$2/meta.json"
}

# --- the rounds ----------------------------------------------------------------------------------------
n=${#contender_list[@]}
load_start=$(loadavg)
uptime_start=$(uptime)
start_date=$(date -Iseconds)
echo "$prog: $nets, $mode ($list), $ranks ranks, $warmup warm-up + $iters timed, $rounds round(s), contenders ${contender_list[*]} (baseline $baseline); load average $load_start" >&2
if [ "$dry_run" = 0 ]; then
  echo "$prog: results in $out_dir" >&2
  for nt in "${net_list[@]}"; do set_net "$nt"; write_meta partial "$(net_dir "$nt")"; : >"$(net_dir "$nt")/jobs.tsv"; done
fi
failed=0
nnets=${#net_list[@]}
for ((r = 1; r <= rounds; r++)); do
 for ((q = 0; q < nnets; q++)); do
  # Networks rotate from round to round too, so that a slow drift of the machine spreads over them.
  set_net "${net_list[$(((q + r - 1) % nnets))]}"
  ndir=$(net_dir "$net")
  [ "$nnets" = 1 ] || echo "$prog: [round $r/$rounds] network $net" >&2
  for ((k = 0; k < n; k++)); do
    if [ "$order" = rotate ]; then c=${contender_list[$(((k + r - 1) % n))]}; else c=${contender_list[$k]}; fi
    dir=$ndir/runs/r$r-$c
    if ! job_command "$c" "$dir"; then
      echo "$prog: [round $r/$rounds] $c skipped: $skip_reason" >&2
      [ "$dry_run" = 1 ] || printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$c" skip 0 "$(loadavg)" "$skip_reason" >>"$ndir/jobs.tsv"
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
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$c" "$rc" "$secs" "$load" "" >>"$ndir/jobs.tsv"
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
done
[ "$dry_run" = 1 ] && exit 0

tables=()
for nt in "${net_list[@]}"; do
  set_net "$nt"
  ndir=$(net_dir "$nt")
  write_meta complete "$ndir"
  "$py" "$root/scripts/bench/summarize.py" "$ndir" || failed=1
  [ "$plot" = 0 ] || "$py" "$root/scripts/bench/plot_cdf.py" "$ndir" >&2 || failed=1
  tables+=("$ndir/table.md")
done
[ "$nnets" = 1 ] || for t in "${tables[@]}"; do cat "$t"; echo; done >"$out_dir/table.md"
echo "$prog: results in $out_dir" >&2
exit "$failed"

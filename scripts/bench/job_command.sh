# One job of scripts/bench.sh: its command line for a contender on the current network. Sourced by
# bench.sh, whose settings (mode, list, contenders' definitions, network) it reads.
# shellcheck shell=bash disable=SC2154
# OptiReduce's UCX and Open MPI on the emulated network (or loopback) only: shared memory would
# bypass it. A contender's own settings come last and win.
net_settings() {  # sets mpi_net and net_env for the current network
  net_env=()
  mpi_net=()
  case $net_kind in
    tcp|netns)
      # shellcheck disable=SC2054  # "tcp,self" is one argument
      mpi_net=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
      net_env=(OPTIREDUCE_UCX_TLS=tcp OPTIREDUCE_UCX_NET_DEVICES=lo) ;;
    # Several ranks per host keep UCX's shared memory among them: only its network lanes are held.
    cluster) net_env=(OPTIREDUCE_UCX_NET_DEVICES=eth0)
             [ "${per_host:-1}" -gt 1 ] || net_env+=(OPTIREDUCE_UCX_TLS=tcp) ;;
  esac
}

program_args() {  # dir name [bench flags...]: sets prog_args
  prog_args=(--warmup "$warmup" --iters "$iters" --warmup-calls "$warmup_calls" --tolerance "$tolerance"
             --barrier "$barrier" --json "$1/out.json" --label "$2" "${@:3}")
  [ "$inject" = 1 ] && prog_args+=(--corrupt-result 1)
  [ "$in_place" = 1 ] && prog_args+=(--in-place)
  case $mode in
    step|buckets) prog_args+=(step --buckets "$list") ;;
    sweep) prog_args+=(sweep --min "$sweep_min" --max "$sweep_max" --factor "$sweep_factor") ;;
    model)
      prog_args+=(model --model "$list")
      [ -z "$scale" ] || prog_args+=(--scale "$scale") ;;
    counts) prog_args+=(latency --counts "$list") ;;
    *) prog_args+=(latency --sizes "$list") ;;
  esac
  return 0
}

# Sets cmd to the job's command; returns 1 with the reason in skip_reason when the contender
# cannot run on this network.
job_command() {  # contender dir
  local c=$1 dir=$2 preload=1 runner=mpi library=$lib a
  local -a settings=() call_shape=()
  cmd=()
  net_settings
  for a in ${defs[$c]}; do
    case $a in
      preload=no) preload=0 ;;
      runner=gloo) runner=gloo ;;
      library=*) library=${a#*=} ;;
      format=*|collective=*) call_shape+=("--${a%%=*}" "${a#*=}") ;;
      *) settings+=("$a") ;;
    esac
  done
  [ "$runner" = mpi ] || [ ${#call_shape[@]} -eq 0 ] || { skip_reason="gloo runs float32 allreduces only"; return 1; }
  program_args "$dir" "$c" "${call_shape[@]}"
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
      env+=(LD_PRELOAD="$library" OPTIREDUCE_REPORT="$dir/report.json" "${net_env[@]}" "${mode_env[@]}")
    fi
    env+=("${settings[@]}")
    for a in "${env[@]}"; do
      [ -n "${value[${a%%=*}]+set}" ] || names+=("${a%%=*}")
      value[${a%%=*}]=${a#*=}
    done
    local -a x=()
    for a in "${names[@]}"; do x+=(-x "$a=${value[$a]}"); done
    if [ "$net_kind" = cluster ]; then
      local -a shape=(--ranks-per-host "$per_host")
      [ -z "$rate" ] || shape+=(--rate "$rate")
      shape+=(--gro "${gro:-off}")
      cmd=("$root/scripts/cluster.sh" --hosts "$hosts" --drop "$drop" "${shape[@]}" --stats "$dir/links.json" -q --mpirun --
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

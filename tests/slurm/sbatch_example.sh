#!/usr/bin/env bash
# slurm.sbatch_example: submits scripts/slurm/optireduce.sbatch with sbatch to a single-node Slurm
# that scripts/slurm/local-slurm.sh starts for the test, waits for it (bounded), then checks:
#   - the job exited 0 and its output shows both launches (srun --mpi=pmix, mpirun) exiting 0;
#   - each launch wrote its own report, named after the job id, with 4 ranks that all ran the
#     engine (intercepted_calls > 0, engine_failures == 0);
#   - the local Slurm is gone afterwards: no daemon and no temporary directory left.
#   sbatch_example.sh SLURM_SCRIPTS_DIR BUILD_DIR TIMEOUT_EXE WORKDIR
set -uo pipefail
scripts=$1 build=$2 timeout_exe=$3 work=$4

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: not root: slurmd and the test's private namespaces need root"; exit 77
fi
for tool in munged slurmctld slurmd sbatch srun unshare; do
  command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: \`$tool\` not found: apt-get install slurm-wlm munge (scripts/setup.sh does)"; exit 77; }
done

rm -rf "$work" && mkdir -p "$work/out" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Small enough for a busy 2-core machine: 4 ranks, 1 MiB, 5 calls (+1 warm-up) each way.
cmd=("$timeout_exe" -k 10 140 "$scripts/local-slurm.sh" --logs "$work/logs" --
  env ORJOB_BUILD="$build" ORJOB_OUT="$work/out"
  "$timeout_exe" -k 5 110 sbatch --wait --parsable -N 1 -n 4 --ntasks-per-node=4 --time=5
    --output="$work/out/job-%j.out" "$scripts/optireduce.sbatch"
    "$build/bin/optireduce-bench" --sizes 1M --iters 5 --warmup 1)
echo "+ ${cmd[*]}"
start=$(date +%s)
"${cmd[@]}" > "$work/sbatch.stdout" 2> "$work/local-slurm.stderr"
rc=$?
echo "exit $rc after $(($(date +%s) - start)) s"
cat "$work/local-slurm.stderr"
job=$(grep -Eo '^[0-9]+' "$work/sbatch.stdout" | head -n 1)
out="$work/out/job-${job:-none}.out"
if [ -f "$out" ]; then echo "--- $out"; cat "$out"; echo "---"; fi

bad=0
fail() { echo "FAIL: $*"; bad=1; }
case $rc in
  0) ;;
  124|137) fail "sbatch --wait did not return in time (the job or the local Slurm hung)" ;;
  2) fail "the local Slurm could not be set up (see above)" ;;
  *) fail "sbatch --wait exited $rc (the job failed)" ;;
esac
[ -n "$job" ] || fail "no job id from sbatch --parsable"
if [ -f "$out" ]; then
  grep -q "^== srun: exit 0$" "$out" || fail "the job output has no successful srun launch"
  grep -q "^== mpirun: exit 0$" "$out" || fail "the job output has no successful mpirun launch"
  grep -q "^job $job: done$" "$out" || fail "the job output does not end with \"job $job: done\""
else
  fail "no job output $out"
fi

# The local Slurm must be gone: its temporary directory and every daemon that used it.
tmpdir=$(sed -n 's/.*single-node Slurm up in \([^ ]*\) .*/\1/p' "$work/local-slurm.stderr" | head -n 1)
if [ -n "$tmpdir" ]; then
  [ ! -e "$tmpdir" ] || fail "the local Slurm's directory $tmpdir is still there"
  if pgrep -f "$tmpdir" >/dev/null; then fail "processes of the local Slurm are still running:"; pgrep -a -f "$tmpdir"; fi
else
  fail "local-slurm.sh did not say where it ran"
fi

[ -n "$job" ] && /usr/bin/python3 - "$work/out" "$job" <<'PY' || bad=1
import json, os, sys
out, job = sys.argv[1], sys.argv[2]
bad = []
for how in ("srun", "mpirun"):
    path = os.path.join(out, f"optireduce-{job}-{how}.json")
    if not os.path.exists(path):
        bad.append(f"{how}: no report {path}")
        continue
    with open(path) as f:
        ranks = json.load(f)["ranks"]
    if len(ranks) != 4:
        bad.append(f"{how}: {len(ranks)} ranks in the report, expected 4")
    for r in ranks:
        print(f"{how}: rank {r['rank']} on {r['host']}: {r['intercepted_calls']} engine calls, "
              f"{r['engine_failures']} failures, transports {r['transports']}")
        if r["intercepted_calls"] == 0:
            bad.append(f"{how}: rank {r['rank']} intercepted no call")
        if r["engine_failures"]:
            bad.append(f"{how}: rank {r['rank']}: {r['engine_failures']} engine failure(s)")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
[ "$bad" = 0 ] && echo PASS
exit "$bad"

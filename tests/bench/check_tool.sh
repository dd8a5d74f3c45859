#!/usr/bin/env bash
# optireduce-bench's subcommands, tiny, 2 ranks on shared memory with the library preloaded
# (OPTIREDUCE_MODE=reliable: every engine call must be exact; OPTIREDUCE_STEP_ASIDE=off: on one host
# the library may otherwise hand a size class to the MPI's allreduce), checking what they wrote,
# never how fast anything was:
#   sweep:  the sizes from --min to --max, doubling; 512K is below OPTIREDUCE_MIN_BYTES (kind none,
#           the MPI's), 1M is the engine's; every result exact
#   step:   two buckets reduced in reverse order of the list, each result exact
#   model:  a scaled ResNet-50 of 1 MiB buckets: the DDP buckets (1 + 4 of 97), the compute sleep
#           scaled alike, the preparatory calls of its one size class, iterations no shorter than
#           their calls
#   formats: an fp16 reduce-scatter and an in-place bf16 allreduce (Horovod's datatype and op) of
#           512K elements, served by the engine, every result exact
#   errors: a wrong result (--corrupt-result) exits 3, of float32 and of a 16-bit reduce-scatter;
#           bad usage exits 2 with one line naming it
#   check_tool.sh MPIEXEC LIBRARY BENCH WORKDIR
set -uo pipefail
mpiexec=$1 lib=$2 bench=$3 work=$4
rm -rf "$work" && mkdir -p "$work" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail() { echo "FAIL: $*"; exit 1; }
job() {  # name args...: runs the bench with the library preloaded, returns its exit code
  local name=$1
  shift
  timeout -k 10 100 "$mpiexec" -np 2 --oversubscribe -x LD_PRELOAD="$lib" -x OPTIREDUCE_MODE=reliable -x OPTIREDUCE_STEP_ASIDE=off \
    "$bench" --json "$work/$name.json" "$@" >"$work/$name.stdout" 2>"$work/$name.stderr"
}

job sweep --warmup 1 --iters 2 sweep --min 512K --max 1M || fail "sweep exited $?: $(tail -n 3 "$work/sweep.stderr")"
job step --warmup 1 --iters 2 step --buckets 1M,0.5M || fail "step exited $?: $(tail -n 3 "$work/step.stderr")"
job model --warmup 1 --iters 2 --warmup-calls 2 model --model resnet50 --scale 0.04 --bucket-mb 1 --compute-ms 20 \
  || fail "model exited $?: $(tail -n 3 "$work/model.stderr")"
grep -q "optireduce-bench: resnet50: p50 .* ms over 2 timed steps; 15 of 15 calls by the engine" "$work/model.stdout" \
  || fail "model: no summary line on stdout: $(cat "$work/model.stdout")"

job rs16 --warmup 1 --iters 2 --format fp16 --collective reduce_scatter_block latency --counts 512K \
  || fail "rs16 exited $?: $(tail -n 3 "$work/rs16.stderr")"
job bf16 --warmup 1 --iters 2 --format bf16 --in-place latency --counts 512K \
  || fail "bf16 exited $?: $(tail -n 3 "$work/bf16.stderr")"
job wrong16 --warmup 0 --iters 2 --corrupt-result 2 --format bf16 --collective reduce_scatter_block latency --counts 512K
rc=$?
[ "$rc" -eq 3 ] || fail "a wrong bf16 reduce-scatter result: exit $rc, expected 3"
grep -q "wrong result: entry 0" "$work/wrong16.stderr" || fail "a wrong bf16 result: not reported: $(cat "$work/wrong16.stderr")"

job wrong --warmup 0 --iters 2 --corrupt-result 1 latency --sizes 1M
rc=$?
[ "$rc" -eq 3 ] || fail "a wrong result: exit $rc, expected 3"
grep -q "wrong result: entry 0" "$work/wrong.stderr" || fail "a wrong result: not reported: $(cat "$work/wrong.stderr")"

# Bad usage, before MPI starts: one line, exit 2.
for bad in "--sizes 1M step --buckets 1M" "latency --sizes 3" "model --model vgg" "sweep --min 1M --max 4K" \
  "latency --sizes 4K --counts 1K" "--format fp8 latency"; do
  # shellcheck disable=SC2086  # the words of $bad are the arguments
  out=$("$bench" $bad 2>&1)
  rc=$?
  [ "$rc" -eq 2 ] || fail "\"$bad\": exit $rc, expected 2"
  [ "$(wc -l <<<"$out")" -eq 1 ] && [[ "$out" == "optireduce-bench: error: "* ]] \
    || fail "\"$bad\": expected one \"optireduce-bench: error:\" line, got: $out"
  echo "ok: \"$bad\": $out"
done

/usr/bin/python3 - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
load = lambda name: json.load(open(os.path.join(work, name + ".json")))
bad = []
def expect(what, got, want):
    if got != want:
        bad.append(f"{what}: {got!r}, expected {want!r}")

for name in ("sweep", "step", "model"):
    d = load(name)
    expect(f"{name}: mode", d["mode"], name)
    expect(f"{name}: library loaded", d["optireduce_loaded"], True)
    for e in d["entries"]:
        c = e["check"]
        expect(f"{name} {e['name']}: not exact, wrong, failed", (c["not_exact"], c["wrong"], c["failed"]), (0, 0, 0))
        expect(f"{name} {e['name']}: calls checked", c["calls"], 3 * e["calls_per_iteration"])
        expect(f"{name} {e['name']}: iterations", len(e["iteration_ms"]), 3)

for name, fmt, coll in (("rs16", "fp16", "reduce_scatter_block"), ("bf16", "bf16", "allreduce")):
    d = load(name)
    expect(f"{name}: format, collective", (d["format"], d["collective"]), (fmt, coll))
    e = d["entries"][0]
    c = e["check"]
    expect(f"{name}: entry", (e["name"], e["buckets_bytes"]), ("512K-elements", [1 << 20]))
    expect(f"{name}: not exact, wrong, failed", (c["not_exact"], c["wrong"], c["failed"]), (0, 0, 0))
    expect(f"{name}: calls by the engine (reliable mode)", (c["calls"], e["kinds_all"]["exact"]), (3, 3))

sweep = load("sweep")["entries"]
expect("sweep: entries", [e["name"] for e in sweep], ["512K", "1M"])
expect("sweep 512K: kinds (below OPTIREDUCE_MIN_BYTES)", sweep[0]["kinds_all"]["none"], 3)
expect("sweep 1M: kinds (reliable mode)", sweep[1]["kinds_all"]["exact"], 3)

step = load("step")["entries"][0]
expect("step: buckets", step["buckets_bytes"], [1 << 20, 1 << 19])
expect("step: call order (reverse of the list)", step["calls"]["bytes"][:2], [1 << 19, 1 << 20])

model = load("model")["entries"][0]
expect("model: model", model["model"], {"name": "resnet50", "params": 25557032, "scale": 0.04, "full_bucket_count": 98})
expect("model: buckets", model["buckets_bytes"], [1 << 20] * 5)
expect("model: compute ms (20 x 0.04)", round(model["compute_ms"], 6), 0.8)
expect("model: preparatory calls (one size class)", model["preparatory_calls"], 2)
expect("model: engine calls", model["kinds_all"]["exact"], 15)
for it, comm in zip(model["iteration_ms"], model["comm_ms"]):
    if it < comm or it < 0.8:
        bad.append(f"model: an iteration of {it} ms with calls of {comm} ms and a sleep of 0.8 ms")
for b in bad:
    print("FAIL:", b)
print("PASS" if not bad else "")
sys.exit(1 if bad else 0)
PY

#!/usr/bin/env bash
# demo.main_job_4hosts: scripts/demo.sh --main-only as root, the demo's main job as a user runs it:
# train_mlp across 4 emulated hosts (scripts/cluster.sh, 1 per mille loss on every link and
# direction), once with Open MPI alone, once with the library preloaded. It must exit 0 and:
#   - print the two jobs side by side;
#   - the library's report: 4 ranks on the hosts h0..h3, each with bounded calls, none failed, at
#     most the loss budget (0.10) of the entries compensated;
#   - both jobs learned: final test accuracy above 70 % (chance is 10 %), identical replicas for
#     Open MPI's exact job.
#   demo_main_job.sh REPOSITORY BUILD_DIR
set -uo pipefail
repo=$1 build=$2
. "$(dirname "$0")/skip_unless_root_netns.sh"
[ -d /usr/share/datasets/fashion-mnist ] || { echo "SKIP: no Fashion-MNIST (apt-get install dataset-fashion-mnist)"; exit 77; }

out=$(BUILD_DIR=$build "$repo/scripts/demo.sh" --main-only 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: scripts/demo.sh --main-only exited $rc"; exit 1; }
grep -q 'Open MPI  OptiReduce (preloaded)' <<<"$out" || { echo "FAIL: no side-by-side table"; exit 1; }
/usr/bin/python3 - "$build/optireduce-demo-report.json" "$build/demo-cluster/openmpi.json" "$build/demo-cluster/optireduce.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
ranks = report["ranks"]
problems = []
if sorted(r["host"] for r in ranks) != ["h0", "h1", "h2", "h3"]:
    problems.append(f"hosts {[r['host'] for r in ranks]}, want h0..h3")
for r in ranks:
    if r["bounded_calls"] <= 0:
        problems.append(f"rank {r['rank']}: no bounded call")
    if r["engine_failures"] or r["fallbacks"]:
        problems.append(f"rank {r['rank']}: {r['engine_failures']} engine failures, {r['fallbacks']} fallbacks")
    if r["entries_reduced"] <= 0 or r["entries_dropped"] > 0.10 * r["entries_reduced"]:
        problems.append(f"rank {r['rank']}: {r['entries_dropped']} of {r['entries_reduced']} entries compensated")
for path in sys.argv[2:]:
    end = [json.loads(l) for l in open(path) if '"end"' in l][-1]
    if not end["final_accuracy"] > 70:
        problems.append(f"{path}: final accuracy {end['final_accuracy']}")
    if path.endswith("openmpi.json") and end["replica_spread"] != 0:
        problems.append(f"{path}: replicas differ under exact Open MPI")
for p in problems:
    print("FAIL:", p)
sys.exit(1 if problems else 0)
PY

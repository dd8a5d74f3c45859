"""What the cluster tests read of an optireduce-bench job: its JSON outputs, and the problems
every such job must not have (the engine ran on every rank, its results match the MPI's)."""
import json
import os


def load(work, name):
    with open(os.path.join(work, name)) as f:
        return json.load(f)


def bench_problems(bench):
    bad = []
    for s in bench["sizes"]:
        if s["engine_calls_min_over_ranks"] == 0:
            bad.append(f"{s['bytes']} bytes: the engine did not run on every rank")
        if not s["results_match"]:
            bad.append(f"{s['bytes']} bytes: engine result differs from PMPI")
    return bad

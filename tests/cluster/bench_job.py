"""What the cluster tests read of an optireduce-bench job: its JSON outputs, and the problems
every such job must not have (the engine ran every call, every result is the exact sum)."""
import json
import os


def load(work, name):
    with open(os.path.join(work, name)) as f:
        return json.load(f)


def bench_problems(bench):
    bad = []
    for e in bench["entries"]:
        if e["kinds_all"]["none"] or e["kinds_all"]["mpi"]:
            bad.append(f"{e['name']}: calls not run by the engine: {e['kinds_all']}")
        if e["check"]["not_exact"] or e["check"]["failed"]:
            bad.append(f"{e['name']}: {e['check']['not_exact']} result(s) not exact, {e['check']['failed']} failed call(s)")
    return bad

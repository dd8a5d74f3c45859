#!/usr/bin/python3
"""Usage: report_at_exit.py --report R --trace T --ranks N [--expect-failed-call] -- COMMAND...

Runs COMMAND (a job launched as torchrun launches that never calls destroy_process_group) and
checks what the backend wrote at the interpreter's exit: OPTIREDUCE_REPORT=R with N ranks, each
with its engine calls and passthroughs, and OPTIREDUCE_TRACE=T with every rank's calls (a failed
one among them with --expect-failed-call). Exit 0 when COMMAND exited 0 and both are right.
"""
import argparse
import json
import os
import sys

from checks import run_wrapped


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--report", required=True)
    p.add_argument("--trace", required=True)
    p.add_argument("--ranks", type=int, required=True)
    p.add_argument("--expect-failed-call", action="store_true")
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    env = dict(os.environ, OPTIREDUCE_REPORT=a.report, OPTIREDUCE_TRACE=a.trace)
    rc = run_wrapped(a.command, (a.report, a.trace), env)
    failures = [] if rc == 0 else [f"the job exited {rc}"]
    try:
        with open(a.report) as f:
            ranks = json.load(f)["ranks"]
        if len(ranks) != a.ranks:
            failures.append(f"the report has {len(ranks)} ranks, not {a.ranks}")
        for r in ranks:
            if r["intercepted_calls"] < 1 or r["passthrough_calls"] < 1 or r["engines_created"] != 1:
                failures.append(f"rank {r['rank']}: intercepted {r['intercepted_calls']}, passed through "
                                f"{r['passthrough_calls']}, engines {r['engines_created']}")
    except (OSError, ValueError, KeyError) as error:
        failures.append(f"no report at exit: {error}")
    try:
        with open(a.trace) as f:
            lines = [line.split() for line in f if line.strip()]
        if {int(fields[0]) for fields in lines} != set(range(a.ranks)):
            failures.append(f"the trace has calls of ranks {sorted({int(x[0]) for x in lines})}")
        if a.expect_failed_call and not any(fields[4] != "ok" for fields in lines):
            failures.append("the trace has no failed call")
    except (OSError, ValueError, IndexError) as error:
        failures.append(f"no trace: {error}")
    for f in failures:
        print(f"report_at_exit: FAIL: {f}", file=sys.stderr)
    if not failures:
        print(f"report_at_exit: PASS: the report of {a.ranks} ranks and the trace were written at exit")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Runs an MPI job and checks the line rank 0 prints on stderr at MPI_Finalize.

Usage: check_finalize_line.py --lines N [--report PATH] [--lossy] [--waited] -- COMMAND...

Passes when the job exits 0 and exactly N lines of its stderr are the finalize line
("optireduce: ... allreduce [and ... reduce-scatter] calls over R ranks ..."). With --report (the job's OPTIREDUCE_REPORT),
every figure of the line must be what the report's ranks add up to; --lossy: entries were
compensated; --waited: deadlines let late data go.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys

LINE = re.compile(
    r"^optireduce: (\d+) allreduce(?: and \d+ reduce-scatter)? calls over (\d+) ranks \((\d+) through the engine, (\d+) "
    r"bounded, (\d+) cut by a deadline\), ([\d.e+]+ [mu]?s) in allreduce(?: and reduce-scatter)?; (\d+) of (\d+) entries "
    r"compensated, (\d+) fallbacks to exact calls, (\d+) divergent calls; deadlines saved ([\d.e+]+ [mu]?s) of waiting, cost ([\d.e+-]+) % of entries$")
UNITS = {"us": 1, "ms": 1e3, "s": 1e6}


def fail(message):
    print(f"check_finalize_line: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def microseconds(text):
    value, unit = text.split()
    return float(value) * UNITS[unit]


def close(shown, exact, what):
    # The line rounds to 3 significant digits.
    if not math.isclose(shown, exact, rel_tol=0.01, abs_tol=1e-9):
        fail(f"{what}: the line says {shown:g}, the report adds up to {exact:g}")


SCATTERS = re.compile(r"^optireduce: \d+ allreduce and (\d+) reduce-scatter calls over ")


def reduce_scatter_calls(rank):
    return rank["passthrough_by_operation"]["reduce_scatter"] + sum(rank["intercepted_by_operation"]["reduce_scatter"].values())


def compare(fields, report, line):
    ranks = report["ranks"]
    total = lambda key: sum(r[key] for r in ranks)  # noqa: E731
    scatters = SCATTERS.match(line)
    want_scatters = sum(reduce_scatter_calls(r) for r in ranks)
    if (int(scatters.group(1)) if scatters else 0) != want_scatters:
        fail(f"the line counts {scatters.group(1) if scatters else 'no'} reduce-scatter calls, the report {want_scatters}")
    # The first count is of the allreduce calls alone: with the reduce-scatters, all calls.
    counts = [int(fields[0]) + want_scatters] + [int(f) for f in (fields[1], fields[2], fields[3], fields[4], fields[6],
                                                                  fields[7], fields[8], fields[9])]
    want = [total("intercepted_calls") + total("passthrough_calls"), len(ranks), total("intercepted_calls"),
            total("bounded_calls"), total("cut_calls"), total("entries_dropped"), total("entries_reduced"),
            max(r["fallbacks"] for r in ranks), max(r["divergent_calls"] for r in ranks)]
    if counts != want:
        fail(f"calls, ranks, engine, bounded, cut, dropped, entries, fallbacks, divergent: the line says {counts}, "
             f"the report {want}")
    close(microseconds(fields[5]), sum(sum(r["time_in_allreduce_us"].values()) for r in ranks), "time in allreduce")
    close(microseconds(fields[10]), sum(r["late_arrivals"]["call_wait_us"] for r in ranks), "wait saved")
    close(float(fields[11]), 100 * want[5] / want[6] if want[6] else 0.0, "share of entries")
    return counts


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, required=True, help="how many finalize lines stderr must hold")
    parser.add_argument("--report", help="the job's OPTIREDUCE_REPORT, to check the figures against")
    parser.add_argument("--lossy", action="store_true", help="the line must show entries compensated")
    parser.add_argument("--waited", action="store_true", help="the line must show wait saved (late data)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.report and os.path.exists(args.report):
        os.remove(args.report)
    result = subprocess.run(command, capture_output=True, text=True)
    sys.stdout.write(result.stdout)
    sys.stdout.write(result.stderr)
    if result.returncode != 0:
        fail(f"the job exited {result.returncode}" + (" (killed by timeout)" if result.returncode in (124, 137) else ""))
    lines = [line for line in result.stderr.splitlines() if line.startswith("optireduce: ") and " calls over " in line]
    if len(lines) != args.lines:
        fail(f"{len(lines)} finalize lines on stderr, expected {args.lines}")
    for line in lines:
        match = LINE.match(line)
        if not match:
            fail(f"the finalize line does not read as expected: {line}")
        if args.report:
            with open(args.report) as f:
                counts = compare(match.groups(), json.load(f), line)
            if args.lossy and counts[5] == 0:
                fail(f"a lossy run shows nothing compensated: {line}")
            if args.waited and microseconds(match.group(11)) <= 0:
                fail(f"a run with a late rank shows no wait saved: {line}")
    if any(line.startswith("optireduce") for line in result.stdout.splitlines()):
        fail("the library wrote to stdout")
    print(f"check_finalize_line: PASS: {len(lines)} finalize line(s)" + (f": {lines[0]}" if lines else ""))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Runs an MPI job that writes OPTIREDUCE_REPORT and OPTIREDUCE_TRACE, then optireduce-report on
both, and checks the numbers of its tables against the files themselves and against what the job
is known to do.

Usage: check_report_tool.py --tool optireduce-report --report R --trace T --ranks N --calls C
           --bounded B --entries E --png-dir D -- COMMAND...
The job makes C engine calls per rank of E entries each, B of them bounded.
"""
import argparse
import json
import math
import os
import subprocess
import sys

from checks import run_wrapped

FAILURES = []


def check(ok, what):
    print(f"check_report_tool: {'ok' if ok else 'FAIL'}: {what}")
    if not ok:
        FAILURES.append(what)


def table_rows(text, first_column):
    """Rows of the table whose header starts with first_column, keyed by their first cell."""
    rows, inside = {}, False
    for line in text.splitlines():
        cells = line.split()
        if cells[:1] == [first_column]:
            inside = True
            continue
        if inside and cells and not line.startswith("("):
            rows[cells[0]] = cells
        elif inside:
            break
    return rows


def nearest_rank(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def run_tool(tool, path, png):
    out = subprocess.run([tool, path, "--png", png], capture_output=True, text=True, timeout=120)
    print(out.stdout, end="")
    check(out.returncode == 0, f"optireduce-report {os.path.basename(path)} exits 0 ({out.stderr.strip()})")
    size = png_size(png) if os.path.exists(png) else None
    check(size is not None and size[0] >= 400 and size[1] >= 400, f"{png} is a PNG ({size})")
    return out.stdout


def check_report(args, png):
    with open(args.report) as f:
        report = json.load(f)
    text = run_tool(args.tool, args.report, png)
    rows = table_rows(text, "rank")
    ranks = report["ranks"]
    check_cost_columns(text, rows, ranks, args)
    check(sorted(rows) == sorted([str(r) for r in range(args.ranks)] + ["all"]), f"one row per rank and 'all' ({sorted(rows)})")
    for r in ranks:
        row = rows.get(str(r["rank"]), [])
        want = [str(args.calls), str(r["passthrough_calls"]), str(args.bounded), str(r["fallback_calls"]),
                f"{r['bytes_reduced'] / 2**20:.2f}", f"{100 * r['entries_dropped'] / r['entries_reduced']:.4f}",
                f"{r['latency_us']['p50'] / 1000:.3f}", f"{r['latency_us']['p99'] / 1000:.3f}"]
        check(row[1:9] == want, f"rank {r['rank']}: {row[1:9]} == {want}")
        check(r["bytes_reduced"] == 4 * args.calls * args.entries, f"rank {r['rank']} reduced {r['bytes_reduced']} bytes")
    total = rows.get("all", [])
    dropped = sum(r["entries_dropped"] for r in ranks)
    want = [str(args.ranks * args.calls), str(sum(r["passthrough_calls"] for r in ranks)), str(args.ranks * args.bounded),
            str(sum(r["fallback_calls"] for r in ranks)), f"{args.ranks * 4 * args.calls * args.entries / 2**20:.2f}",
            f"{100 * dropped / (args.ranks * args.calls * args.entries):.4f}",
            f"{max(r['latency_us']['p50'] for r in ranks) / 1000:.3f}"]
    check(total[1:8] == want, f"all: {total[1:8]} == {want}")
    return dropped


def check_cost_columns(text, rows, ranks, args):
    """cut, time_s and late_wait_s per rank and summed; the size-class table; reasons; the cost line."""
    seconds = lambda us: f"{us / 1e6:.3f}"  # noqa: E731
    for r in ranks + [None]:
        group = ranks if r is None else [r]
        row = rows.get("all" if r is None else str(r["rank"]), [])
        want = [str(sum(x["cut_calls"] for x in group)),
                seconds(sum(sum(x["time_in_allreduce_us"].values()) for x in group)),
                seconds(sum(x["late_arrivals"]["call_wait_us"] for x in group))]
        check(row[12:15] == want, f"{'all' if r is None else 'rank ' + str(r['rank'])}: cut, time_s, late_wait_s "
              f"{row[12:15]} == {want}")
    classes = table_rows(text, "size_class")
    want = {}
    for r in ranks:
        for c in r["size_classes"]:
            want[c["bytes_from"]] = want.get(c["bytes_from"], 0) + c["calls"]
    shown = {k: v[1] for k, v in classes.items()}
    check(sorted(map(int, shown.values())) == sorted(want.values()) and sum(want.values()) == args.ranks * args.calls,
          f"size classes: calls {shown} == {want}")
    # 32768 floats per call: every call is in the 128K-256K class.
    check(list(shown) == ["128K-256K"], f"the calls' size class is 128K-256K ({list(shown)})")
    reasons = {}
    for r in ranks:
        for name, n in r["passthrough_by_reason"].items():
            reasons[name] = reasons.get(name, 0) + n
    line = " ".join(f"{k}={n}" for k, n in sorted(reasons.items()) if n) or "none"
    check(f"passthrough by reason: {line}" in text, f"passthrough by reason: {line}")
    # Every engine call of the job is a float32 allreduce.
    engine = f"engine calls by operation: allreduce float32 {args.ranks * args.calls}"
    check(engine in text, engine)
    dropped = sum(r["entries_dropped"] for r in ranks)
    cost = (f"cost: deadlines saved {seconds(sum(r['late_arrivals']['call_wait_us'] for r in ranks))} s of waiting, cost "
            f"{100 * dropped / (args.ranks * args.calls * args.entries):.4f} % of entries")
    check(cost in text, cost)


def check_trace(args, png, report_dropped):
    calls = [line.split() for line in open(args.trace) if line.split()]
    rows = table_rows(run_tool(args.tool, args.trace, png), "kind")
    check(len(calls) == args.ranks * args.calls, f"the trace holds {len(calls)} calls")
    bounded = [c for c in calls if c[3] == "bounded"]
    calibration = [c for c in calls if c[3] == "calibration"]
    check(rows.get("bounded", [None, None])[1] == str(args.ranks * args.bounded),
          f"bounded calls {rows.get('bounded')}")
    check(rows.get("calibration", [None, None])[1] == str(args.ranks * (args.calls - args.bounded)),
          f"calibration calls {rows.get('calibration')}")
    latency = [float(c[9]) for c in bounded]
    deadline = [float(c[5]) + float(c[6]) for c in bounded]
    dropped = sum(int(c[10]) for c in bounded)
    want = [str(len(bounded)), str(len(bounded) * args.entries), str(dropped),
            f"{100 * dropped / (len(bounded) * args.entries):.4f}", f"{nearest_rank(latency, 50) / 1000:.3f}",
            f"{nearest_rank(latency, 99) / 1000:.3f}", f"{max(latency) / 1000:.3f}",
            f"{nearest_rank(deadline, 50) / 1000:.3f}", "0"]
    check(rows.get("bounded", [])[1:] == want, f"bounded row {rows.get('bounded', [])[1:]} == {want}")
    check(all(int(c[10]) == 0 for c in calibration), "calibration calls drop nothing")
    # Trace and report describe the same calls: the same entries dropped, every one in bounded calls.
    check(dropped == report_dropped and rows["all"][3] == str(report_dropped),
          f"entries dropped: trace {dropped}, table {rows['all'][3]}, report {report_dropped}")
    check(dropped > 0, "the injected loss shows (some entries dropped)")


def main():
    p = argparse.ArgumentParser()
    for name in ("--tool", "--report", "--trace", "--png-dir"):
        p.add_argument(name, required=True)
    for name in ("--ranks", "--calls", "--bounded", "--entries"):
        p.add_argument(name, type=int, required=True)
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args()
    os.makedirs(args.png_dir, exist_ok=True)
    rc = run_wrapped(args.command, (args.report, args.trace))
    if rc != 0:
        print(f"check_report_tool: FAIL: the job exited {rc}" + (" (killed by timeout)" if rc in (124, 137) else ""))
        return 1
    report_dropped = check_report(args, os.path.join(args.png_dir, "report.png"))
    check_trace(args, os.path.join(args.png_dir, "trace.png"), report_dropped)
    print(f"check_report_tool: {'FAIL' if FAILURES else 'PASS'} ({len(FAILURES)} failed checks)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())

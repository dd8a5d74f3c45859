#!/usr/bin/python3
"""Runs an MPI job that writes OPTIREDUCE_REPORT and checks the report it leaves.

Usage: check_report.py --report PATH --ranks N [checks] -- COMMAND...

Used for programs that cannot query the library themselves (Fortran) and for the report's own
test. The stale report of an earlier run is removed first, so a job that writes nothing fails.
"""
import argparse
import json
import math
import os
import subprocess
import sys


def fail(message):
    print(f"check_report: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_rank(entry, args):
    rank = entry.get("rank")
    where = f"ranks[] entry of rank {rank}"
    for field in ("rank", "intercepted_calls", "passthrough_calls", "bytes_reduced"):
        if not isinstance(entry.get(field), int) or entry[field] < 0:
            fail(f"{where}: {field} is {entry.get(field)!r}, expected a non-negative integer")
    intercepted = entry["intercepted_calls"]
    if args.intercepted is not None and intercepted != args.intercepted:
        fail(f"{where}: intercepted_calls is {intercepted}, expected {args.intercepted}")
    if intercepted <= 0:
        fail(f"{where}: intercepted_calls is 0: the engine never ran (library not preloaded or bypassed)")
    if args.passthrough is not None and entry["passthrough_calls"] != args.passthrough:
        fail(f"{where}: passthrough_calls is {entry['passthrough_calls']}, expected {args.passthrough}")
    if entry["passthrough_calls"] < args.min_passthrough:
        fail(f"{where}: passthrough_calls is {entry['passthrough_calls']}, expected at least {args.min_passthrough}")
    if args.bytes is not None and entry["bytes_reduced"] != args.bytes:
        fail(f"{where}: bytes_reduced is {entry['bytes_reduced']}, expected {args.bytes}")
    if entry["bytes_reduced"] <= 0:
        fail(f"{where}: bytes_reduced is 0 although calls were intercepted")
    if entry.get("dropped_fraction") != 0:
        fail(f"{where}: dropped_fraction is {entry.get('dropped_fraction')!r}, expected 0 (exact run)")
    latency = entry.get("latency_us")
    if not isinstance(latency, dict) or not all(number(latency.get(k)) for k in ("p50", "p99", "max")):
        fail(f"{where}: latency_us is {latency!r}, expected numbers p50, p99, max")
    if not 0 < latency["p50"] <= latency["p99"] <= latency["max"]:
        fail(f"{where}: latency_us is {latency!r}, expected 0 < p50 <= p99 <= max")
    check_new_fields(entry, where, args)
    check_operations(entry, where, args)
    transports = entry.get("transports", "")
    for want in args.transport_includes:
        if want not in transports:
            fail(f"{where}: transports is {transports!r}, expected it to name {want!r}")
    for unwanted in args.transport_excludes:
        if unwanted in transports:
            fail(f"{where}: transports is {transports!r}, which must not use {unwanted!r}")


def check_new_fields(entry, where, args):
    """The cost fields: passthrough reasons, time in allreduce, size classes, cut calls, late data."""
    reasons = entry.get("passthrough_by_reason")
    if not isinstance(reasons, dict) or not all(isinstance(n, int) for n in reasons.values()):
        fail(f"{where}: passthrough_by_reason is {reasons!r}, expected counts by reason")
    if sum(reasons.values()) != entry["passthrough_calls"]:
        fail(f"{where}: passthrough_by_reason {reasons} does not add up to passthrough_calls {entry['passthrough_calls']}")
    for name, want in args.reason:
        if reasons.get(name) != want:
            fail(f"{where}: passthrough_by_reason[{name!r}] is {reasons.get(name)!r}, expected {want} ({reasons})")
    times = entry.get("time_in_allreduce_us")
    if not isinstance(times, dict) or not all(number(times.get(k)) and times[k] >= 0 for k in ("engine", "passthrough")):
        fail(f"{where}: time_in_allreduce_us is {times!r}, expected non-negative numbers engine, passthrough")
    classes = entry.get("size_classes")
    if not isinstance(classes, list) or sum(c.get("calls", 0) for c in classes) != entry["intercepted_calls"]:
        fail(f"{where}: size_classes {classes!r} do not add up to intercepted_calls {entry['intercepted_calls']}")
    for c in classes:
        lat = c.get("latency_us", {})
        if c["bytes_below"] != 2 * c["bytes_from"] or not 0 < lat.get("p50", 0) <= lat.get("p99", 0) <= lat.get("max", 0):
            fail(f"{where}: size class {c!r}: expected [2^k, 2^(k+1)) bytes and 0 < p50 <= p99 <= max")
    if not 0 <= entry.get("cut_calls", -1) <= entry.get("bounded_calls", 0):
        fail(f"{where}: cut_calls is {entry.get('cut_calls')!r}, expected 0 to bounded_calls {entry.get('bounded_calls')}")
    late = entry.get("late_arrivals")
    if not isinstance(late, dict) or not all(number(late.get(k)) and late[k] >= 0 for k in ("messages", "bytes", "wait_us",
                                                                                     "call_wait_us")):
        fail(f"{where}: late_arrivals is {late!r}, expected non-negative messages, bytes, wait_us, call_wait_us")
    if late["call_wait_us"] > late["wait_us"] * (1 + 1e-9):
        fail(f"{where}: late_arrivals {late!r}: the wait per call exceeds the sum over messages")
    contributions = entry.get("contributions")
    if not isinstance(contributions, dict) or not all(isinstance(contributions.get(k), int) and contributions[k] >= 0
                                                      for k in ("added_on_arrival", "waited_in_slot")):
        fail(f"{where}: contributions is {contributions!r}, expected non-negative added_on_arrival, waited_in_slot")
    # The first peer in the owner's summation order is always in its turn: where the transport
    # holds payloads (UCX eager, datagrams), some contributions are summed where they arrived.
    if args.added_on_arrival and contributions["added_on_arrival"] == 0:
        fail(f"{where}: contributions is {contributions!r}: none was summed where the transport held it")


def check_operations(entry, where, args):
    """The breakdown of intercepted calls by operation and format, and of passthrough calls by
    operation: each adds up to its total."""
    by_operation = entry.get("intercepted_by_operation")
    shapes = {(op, fmt): n for op, formats in (by_operation or {}).items() if isinstance(formats, dict)
              for fmt, n in formats.items()}
    if set(shapes) != {(op, fmt) for op in ("allreduce", "reduce_scatter") for fmt in ("float32", "float16", "bfloat16")}:
        fail(f"{where}: intercepted_by_operation is {by_operation!r}, expected allreduce and reduce_scatter by format")
    if sum(shapes.values()) != entry["intercepted_calls"]:
        fail(f"{where}: intercepted_by_operation {by_operation} does not add up to intercepted_calls "
             f"{entry['intercepted_calls']}")
    for op, fmt, want in args.intercepted_as:
        if shapes.get((op, fmt)) != want:
            fail(f"{where}: intercepted_by_operation[{op!r}][{fmt!r}] is {shapes.get((op, fmt))!r}, expected {want}")
    passed = entry.get("passthrough_by_operation")
    if not isinstance(passed, dict) or sum(passed.values()) != entry["passthrough_calls"]:
        fail(f"{where}: passthrough_by_operation {passed!r} does not add up to passthrough_calls {entry['passthrough_calls']}")
    for op, want in args.passthrough_as:
        if passed.get(op) != want:
            fail(f"{where}: passthrough_by_operation[{op!r}] is {passed.get(op)!r}, expected {want}")


def operation_format_count(text):
    op, fmt, count = text.split(":")
    return op, fmt, int(count)


def check_step_aside(ranks, args):
    """Calls stepped aside to the MPI's allreduce: never fallbacks, the same on every rank."""
    counts = [entry.get("mpi_calls") for entry in ranks]
    if not all(isinstance(n, int) and 0 <= n <= entry["intercepted_calls"] for n, entry in zip(counts, ranks)):
        fail(f"mpi_calls {counts}: expected counts from 0 to intercepted_calls")
    if args.mpi_calls is not None and any(n != args.mpi_calls for n in counts):
        fail(f"mpi_calls {counts}: expected {args.mpi_calls} on every rank")
    if args.agreed_mpi_calls and len(set(counts)) != 1:
        fail(f"mpi_calls {counts} differ between ranks: the step aside is agreed")
    if any(n and entry.get("fallback_calls") for n, entry in zip(counts, ranks)):
        fail(f"ranks that stepped aside count fallback calls: {[(e['mpi_calls'], e['fallback_calls']) for e in ranks]}")


def check_top(report, args):
    """The library version and every effective setting (the names optireduce-info lists)."""
    if args.version is not None and report.get("version") != args.version:
        fail(f"version is {report.get('version')!r}, expected {args.version!r}")
    config = report.get("config")
    if not isinstance(config, dict):
        fail(f"config is {config!r}, expected an object")
    if args.info_tool:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPTIREDUCE_")}
        info = json.loads(subprocess.run([args.info_tool, "--json"], capture_output=True, text=True, env=env,
                                         check=True).stdout)
        want = sorted(p["name"][len("OPTIREDUCE_"):].lower() for p in info["config"])
        if sorted(config) != want:
            fail(f"config has {sorted(config)}, expected every parameter of optireduce-info: {want}")
    for key, value in args.config:
        if config.get(key) != value:
            fail(f"config[{key!r}] is {config.get(key)!r}, expected {value!r}")


def name_count(text):
    name, _, count = text.partition("=")
    return name, int(count)


def name_value(text):
    name, _, value = text.partition("=")
    return name, value


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--report", required=True)
    parser.add_argument("--ranks", type=int, required=True, help="entries expected in ranks[]")
    parser.add_argument("--intercepted", type=int, help="exact intercepted_calls of every rank (default: > 0)")
    parser.add_argument("--passthrough", type=int, help="exact passthrough_calls of every rank")
    parser.add_argument("--min-passthrough", type=int, default=0)
    parser.add_argument("--bytes", type=int, help="exact bytes_reduced of every rank")
    parser.add_argument("--added-on-arrival", action="store_true",
                        help="some scatter-reduce contributions were summed where the transport held them")
    parser.add_argument("--reason", action="append", default=[], type=name_count, metavar="NAME=N",
                        help="exact passthrough_by_reason[NAME] of every rank")
    parser.add_argument("--intercepted-as", action="append", default=[], type=operation_format_count,
                        metavar="OPERATION:FORMAT:N", help="exact intercepted_by_operation[OPERATION][FORMAT] of every rank")
    parser.add_argument("--passthrough-as", action="append", default=[], type=name_count, metavar="OPERATION=N",
                        help="exact passthrough_by_operation[OPERATION] of every rank")
    parser.add_argument("--config", action="append", default=[], type=name_value, metavar="KEY=VALUE",
                        help="the report's config[KEY] (the effective value's text)")
    parser.add_argument("--version", help="the report's library version")
    parser.add_argument("--info-tool", help="optireduce-info: config must hold every parameter it lists")
    parser.add_argument("--transport-includes", action="append", default=[])
    parser.add_argument("--transport-excludes", action="append", default=[])
    parser.add_argument("--mpi-calls", type=int, help="exact mpi_calls (stepped aside) of every rank")
    parser.add_argument("--agreed-mpi-calls", action="store_true",
                        help="mpi_calls is the same on every rank (a decision the ranks agree on)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")

    if os.path.exists(args.report):
        os.remove(args.report)
    rc = subprocess.call(command)
    if rc != 0:
        fail(f"the job exited {rc}" + (" (killed by timeout)" if rc in (124, 137) else ""))
    if not os.path.exists(args.report):
        fail(f"the job wrote no report at {args.report}")
    with open(args.report) as f:
        text = f.read()
    try:
        report = json.loads(text)
    except json.JSONDecodeError as e:
        fail(f"{args.report} is not valid JSON ({e}):\n{text}")

    ranks = report.get("ranks")
    if not isinstance(ranks, list):
        fail(f"no 'ranks' array in the report:\n{text}")
    if len(ranks) != args.ranks:
        fail(f"'ranks' has {len(ranks)} entries, expected one per rank ({args.ranks})")
    if not all(isinstance(entry, dict) for entry in ranks):
        fail("'ranks' holds something other than objects")
    seen = sorted(entry.get("rank", -1) for entry in ranks)
    if seen != list(range(args.ranks)):
        fail(f"'ranks' covers ranks {seen}, expected 0..{args.ranks - 1} once each")
    check_top(report, args)
    for entry in ranks:
        check_rank(entry, args)
    check_step_aside(ranks, args)
    print(f"check_report: PASS: {args.report}: {len(ranks)} ranks, intercepted_calls "
          f"{[e['intercepted_calls'] for e in ranks]}, transports {sorted({e.get('transports', '') for e in ranks})}")


if __name__ == "__main__":
    main()

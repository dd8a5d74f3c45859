#!/usr/bin/python3
"""What scripts/demo.sh prints after its main job.

    digest.py report REPORT.json
        each rank's line of the library's JSON report (OPTIREDUCE_REPORT); exit 1 if a rank ran
        no call through the engine
    digest.py compare OPTIREDUCE_JOB.json OPTIREDUCE_REPORT.json OPENMPI_JOB.json
        the same training job with the library and with Open MPI alone (train_mlp --json, rank 0),
        side by side: its allreduce calls, the bounded ones, what they compensated
"""
import json
import sys


def load_report(path):
    with open(path) as f:
        return json.load(f)


def print_report(report):
    ranks = report["ranks"]
    print(f"  library {report['version']}, mode {report['config']['mode']}, "
          f"min_bytes {report['config']['min_bytes']}")
    print(f"  {'rank':>4} {'host':>6} {'intercepted':>11} {'bounded':>7} {'cut':>4} {'p50 us':>9} {'p99 us':>9} "
          f"{'dropped':>9}  transports")
    for r in ranks:
        lat = r["latency_us"]
        print(f"  {r['rank']:>4} {r['host']:>6} {r['intercepted_calls']:>11} {r['bounded_calls']:>7} "
              f"{r['cut_calls']:>4} {lat['p50']:>9.0f} {lat['p99']:>9.0f} {r['dropped_fraction']:>9.2g}  "
              f"{r['transports']}")
    idle = [r["rank"] for r in ranks if r["intercepted_calls"] == 0]
    if idle:
        print(f"demo: FAILED: rank(s) {idle} intercepted no MPI_Allreduce call: the engine never ran there",
              file=sys.stderr)
        return 1
    print(f"demo: OK: all {len(ranks)} ranks ran their gradient reductions through the engine")
    return 0


def job_end(path):
    """The start and end records of a train_mlp --json file."""
    start = end = None
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("event") == "start":
                start = rec
            elif rec.get("event") == "end":
                end = rec
    if start is None or end is None:
        raise SystemExit(f"digest.py: {path} holds no complete train_mlp run (start and end records)")
    return start, end


def compare(ours_json, report_path, ompi_json):
    start, ours = job_end(ours_json)
    _, ompi = job_end(ompi_json)
    report = load_report(report_path)
    ranks = report["ranks"]
    bounded = sum(r["bounded_calls"] for r in ranks)
    cut = sum(r["cut_calls"] for r in ranks)
    intercepted = sum(r["intercepted_calls"] for r in ranks)
    reduced = sum(r["entries_reduced"] for r in ranks)
    dropped = sum(r["entries_dropped"] for r in ranks)
    ms = lambda s: f"{1e3 * s:.1f} ms"  # noqa: E731
    ratio = lambda a, b: f" ({a / b:.2f}x)" if b > 0 else ""  # noqa: E731
    spread = lambda e: "identical" if e["replica_spread"] == 0 else f"differ ({e['replica_spread']:.3g})"  # noqa: E731
    print(f"  {start['ranks']} ranks, one {start['gradient_bytes'] / 2**20:.2f} MiB allreduce per step, "
          f"{ours['steps']} steps")
    rows = [
        ("allreduce per step, p50 (rank 0)", ms(ompi["comm_time_p50"]),
         ms(ours["comm_time_p50"]) + ratio(ours["comm_time_p50"], ompi["comm_time_p50"])),
        ("allreduce per step, p99 (rank 0)", ms(ompi["comm_time_p99"]),
         ms(ours["comm_time_p99"]) + ratio(ours["comm_time_p99"], ompi["comm_time_p99"])),
        ("time in allreduce (rank 0)", f"{ompi['comm_time']:.2f} s",
         f"{ours['comm_time']:.2f} s" + ratio(ours["comm_time"], ompi["comm_time"])),
        ("training time", f"{ompi['train_time']:.2f} s",
         f"{ours['train_time']:.2f} s" + ratio(ours["train_time"], ompi["train_time"])),
        ("final test accuracy", f"{ompi['final_accuracy']:.2f} %", f"{ours['final_accuracy']:.2f} %"),
        ("replicas", spread(ompi), spread(ours)),
        ("calls through the engine, all ranks", "-", f"{intercepted} ({bounded} bounded, {cut} cut by a deadline)"),
        ("entries compensated", "0", f"{dropped} of {reduced} ({100 * dropped / reduced if reduced else 0:.3g} %)"),
    ]
    w = max(len(r[0]) for r in rows)
    w1 = max(len("Open MPI"), max(len(r[1]) for r in rows))
    print(f"  {'':<{w}}  {'Open MPI':>{w1}}  OptiReduce (preloaded)")
    for name, a, b in rows:
        print(f"  {name:<{w}}  {a:>{w1}}  {b}")
    print("  (the library's first call creates its engine and its first calls per size class calibrate, exact: "
          "they hold its p99)")
    if bounded == 0:
        print("demo: FAILED: no call ran bounded: the library never bounded a call across the hosts", file=sys.stderr)
        return 1
    return 0


def main(argv):
    if len(argv) == 3 and argv[1] == "report":
        return print_report(load_report(argv[2]))
    if len(argv) == 5 and argv[1] == "compare":
        return compare(argv[2], argv[3], argv[4])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/python3
"""Bounded calls against their bound, from the last rank's entry, in scripts/bench.sh results.

usage: scripts/bench/bound_check.py [--show N] [--past N] [--outside MS] OUT_DIR [OUT_DIR ...]

Reads each job of a bench.sh output directory (runs/r<round>-<contender>/: out.json, cmd,
report.json) run with OPTIREDUCE_TRACE (in --env or a contender's definition), and the trace
(one file shared by the ranks, and by the jobs of a run: a job begins where a rank's sequence
goes back). For every bounded call it compares the time from the last rank's entry to the last
rank's end (the bench's after_last_entry_ms: the ranks share this machine's clock) with

    bound = max over ranks (deadline_scatter + deadline_gather + 2 resend waits per phase)
            + stall (max over ranks of the trace's stall_us, where the trace has it)

(a resend wait: max(3 ms, a tenth of the phase's deadline), DeadlineController::resend_wait_us;
two rounds, OPTIREDUCE_RESEND_ROUNDS' default). A stall is time the engine itself counted as a
rank descheduled or silent past the quiet gap; the phases may stretch by as much. It prints, per
contender: bounded calls, p50/p99 from the last entry, calls past the bound without and with the
stall allowance, the slowest calls and the calls past with every rank's trace line, divergent
calls by the bench's bitwise check and by the engines' reports, and the calls whose time from the
last entry exceeds the slowest rank's own latency in the engine by more than --outside ms (waits
of the call outside the engine's phases: the agreements over the job's MPI after it), and, where
the trace has its held column, how many calls had a phase held past its deadline by each rule.
Exit code: 0 when no call is past its bound with the stall allowance and the divergence counts
agree, 1 otherwise, 2 on bad input.
"""
import argparse
import collections
import glob
import json
import os
import re
import shlex
import sys

RESEND_FLOOR_US, RESEND_SHARE, RESEND_ROUNDS = 3000.0, 0.10, 2
DIVERGED = 32  # tools/bench/runner.hpp: kDiverged


def die(message):
    print(f"bound_check: error: {message}", file=sys.stderr)
    sys.exit(2)


def resend_wait(budget_us):
    return max(RESEND_FLOOR_US, RESEND_SHARE * budget_us)


def percentile(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(p / 100.0 * len(v) + 0.5)) - 1))]


def trace_path(cmd_text):
    for word in shlex.split(cmd_text):
        if word.startswith("OPTIREDUCE_TRACE="):
            return word.split("=", 1)[1]
    return None


def read_trace(path):
    """Per job in file order: {sequence: {rank: fields}}."""
    jobs, last, job_of = [], {}, collections.defaultdict(int)
    with open(path) as f:
        for line in f:
            fields = line.split()
            if len(fields) < 13 or not fields[0].isdigit():
                continue
            rank, seq = int(fields[0]), int(fields[1])
            if rank in last and seq <= last[rank]:
                job_of[rank] += 1
            last[rank] = seq
            while len(jobs) <= job_of[rank]:
                jobs.append(collections.defaultdict(dict))
            jobs[job_of[rank]][seq][rank] = fields
    return jobs


def bound_of(ranks):
    base = stall = 0.0
    for f in ranks.values():
        ds, dg = float(f[5]), float(f[6])
        base = max(base, ds + dg + RESEND_ROUNDS * (resend_wait(ds) + resend_wait(dg)))
        if len(f) > 13:
            stall = max(stall, float(f[13]))
    return base / 1e3, stall / 1e3


def jobs_of(out_dir):
    runs = sorted(glob.glob(os.path.join(out_dir, "runs", "r*-*")) + glob.glob(os.path.join(out_dir, "*", "runs", "r*-*")))
    found = []
    for run in runs:
        m = re.match(r"r(\d+)-(.+)$", os.path.basename(run))
        if not m or not os.path.exists(os.path.join(run, "out.json")):
            continue
        with open(os.path.join(run, "cmd")) as f:
            trace = trace_path(f.read())
        found.append((int(m.group(1)), m.group(2), run, trace))
    return sorted(found)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dirs", nargs="+")
    ap.add_argument("--show", type=int, default=5, help="slowest calls shown (default 5)")
    ap.add_argument("--past", type=int, default=10, help="calls past the bound shown (default 10)")
    ap.add_argument("--outside", type=float, default=20.0,
                    help="ms beyond the slowest rank's engine latency counted as a wait outside the engine (default 20)")
    args = ap.parse_args()
    by_contender = collections.defaultdict(list)
    traces = {}
    for out_dir in args.out_dirs:
        if not os.path.isdir(out_dir):
            die(f"{out_dir}: not a directory")
        for rnd, contender, run, trace in jobs_of(out_dir):
            if not trace:
                die(f"{run}: the job ran without OPTIREDUCE_TRACE")
            if trace not in traces:
                if not os.path.exists(trace):
                    die(f"{trace}: no such trace")
                traces[trace] = [read_trace(trace), 0]
            jobs, used = traces[trace]
            if used >= len(jobs):
                die(f"{trace}: fewer jobs than runs using it")
            traces[trace][1] += 1
            by_contender[contender].append((out_dir, rnd, run, jobs[used]))
    if not by_contender:
        die("no job with out.json under " + " ".join(args.out_dirs))
    ok = True
    for contender, jobs in by_contender.items():
        rows, mismatched, bitwise, reported = [], 0, 0, 0
        for out_dir, rnd, run, calls in jobs:
            with open(os.path.join(run, "out.json")) as f:
                entry = json.load(f)["entries"][0]
            if entry["calls_per_iteration"] != 1:
                die(f"{run}: {entry['calls_per_iteration']} calls per iteration: latency mode only")
            after, kinds, flags = entry["after_last_entry_ms"], entry["calls"]["kind"], entry["calls"]["flags"]
            bitwise += sum(1 for fl in flags if fl & DIVERGED)
            try:
                with open(os.path.join(run, "report.json")) as f:
                    reported += max(int(r.get("divergent_calls", 0)) for r in json.load(f)["ranks"])
            except (OSError, ValueError, KeyError):
                die(f"{run}: no readable report.json")
            for c, kind in enumerate(kinds):
                ranks = calls.get(c + 1, {})
                if kind != "bounded":
                    continue
                if not ranks or any(f[3] != "bounded" for f in ranks.values()):
                    mismatched += 1
                    continue
                base, stall = bound_of(ranks)
                rows.append((after[c], base, stall, rnd, c + 1, ranks, c >= entry["warmup"]))
        timed = [r[0] for r in rows if r[6]]
        past = [r for r in rows if r[0] > r[1]]
        past_stall = [r for r in past if r[0] > r[1] + r[2]]
        ok = ok and not past_stall and bitwise == reported
        print(f"## {contender}: {len(rows)} bounded calls ({len(timed)} timed) in {len(jobs)} job(s)"
              + (f"; {mismatched} without matching trace lines" if mismatched else ""))
        print(f"from the last rank's entry (timed): p50 {percentile(timed, 50):.1f} ms, p99 {percentile(timed, 99):.1f} ms, "
              f"max {max(timed) if timed else float('nan'):.1f} ms")
        print(f"past deadlines + resend waits: {len(past)}; past that + the stall the engine counted: {len(past_stall)}")
        print(f"divergent calls: {bitwise} by the bench's bitwise check, {reported} by the reports")
        # Time from the last entry beyond the slowest rank's own latency in the engine: waits of the
        # call outside the engine's phases (the agreements over the job's MPI after a bounded call).
        outside = [r for r in rows if r[0] - max(float(f[9]) for f in r[5].values()) / 1e3 > args.outside]
        print(f"calls more than {args.outside:g} ms longer from the last entry than the slowest rank's engine latency: "
              f"{len(outside)}" + "".join(f"; round {r[3]} call {r[4]}: {r[0]:.1f} ms, engine "
                                          f"{max(float(f[9]) for f in r[5].values()) / 1e3:.1f} ms"
                                          for r in sorted(outside, key=lambda r: -r[0])[:5]))

        def show(title, selected, n):
            if not selected:
                return
            print(f"{title}:")
            for lat, base, stall, rnd, seq, ranks, _ in sorted(selected, key=lambda r: -r[0])[:n]:
                print(f"  round {rnd} call {seq}: {lat:.1f} ms from the last entry; bound {base:.1f} ms + stall {stall:.1f} ms")
                for rank in sorted(ranks):
                    print("    " + " ".join(ranks[rank]))
        # The trace's held column (per phase: the rule that kept it open past its deadline).
        def held(ranks):
            return "".join(sorted({c for f in ranks.values() if len(f) > 14 for c in f[14] if c != "-"}))
        if any(len(f) > 14 for r in rows for f in r[5].values()):
            count = collections.Counter(held(r[5]) or "-" for r in rows)
            count_past = collections.Counter(held(r[5]) or "-" for r in past)
            print("calls by the rules that held a phase past its deadline on some rank (f flowing, l late, e entry, s stall): "
                  + ", ".join(f"{k} {v}" for k, v in sorted(count.items())) + "; of those past deadlines + resend waits: "
                  + (", ".join(f"{k} {v}" for k, v in sorted(count_past.items())) or "none"))
        show("slowest calls", rows, args.show)
        show("past deadlines + resend waits + stall", past_stall, args.past)
        show("past deadlines + resend waits, within the stall", [r for r in past if r not in past_stall], args.past)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

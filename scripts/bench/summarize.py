#!/usr/bin/python3
"""The tables of one scripts/bench.sh run: reads OUT_DIR/meta.json, OUT_DIR/jobs.tsv and every
job's OUT_DIR/runs/r<round>-<contender>/out.json, writes OUT_DIR/table.md (and prints it),
OUT_DIR/summary.json, OUT_DIR/calls.csv and OUT_DIR/iterations.csv.

    /usr/bin/python3 scripts/bench/summarize.py OUT_DIR

Figures per entry (a size, or the step) and contender: the median over rounds of each round's
p50 and p99 (of the timed iterations, max over ranks); ratios are those medians over the
baseline's, and "per round" gives the range of the ratio of the two within each round. Checks and
counts cover every call of every round, warm-up included. Exit code 1 when a job failed or a
result was wrong.
"""
import csv
import json
import os
import statistics
import sys

KINDS = ("none", "exact", "calibration", "bounded", "fallback", "mpi")


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def size_label(entry):
    b = entry["buckets_bytes"]
    if "model" in entry:
        m = entry["model"]
        return (f"{m['name']} x{m['scale']:g} ({len(b)} buckets, {sum(b) / (1 << 20):.4g} MiB, "
                f"compute {entry['compute_ms']:.4g} ms)")
    if entry["name"] != "step":
        return entry["name"]
    return f"step ({len(b)} buckets, {sum(b) / (1 << 20):.4g} MiB)"


def fmt_ms(x):
    return "–" if x is None else (f"{x:.3g}" if x < 10 else f"{x:.1f}")


def fmt_ratio(x):
    return "–" if x is None else f"{x:.2f}"


def fmt_frac(x):
    if x is None:
        return "–"
    return "0" if x == 0 else f"{100 * x:.3g} %"


def fmt_err(x):
    return "0" if x == 0 else f"{x:.2g}"


def kinds_text(k):
    parts = [f"{name} {k[name]}" for name in KINDS if k.get(name)]
    return ", ".join(parts) if parts else "–"


# System calls that move a message (strace -c names), for --syscalls.
SEND_CALLS = ("sendmsg", "sendmmsg", "sendto", "write", "writev")
RECV_CALLS = ("recvmsg", "recvmmsg", "recvfrom", "read", "readv")


def strace_counts(run_dir):
    """{syscall: calls} summed over the job's strace -c files, or None without any."""
    files = [f for f in os.listdir(run_dir) if f.startswith("strace.")] if os.path.isdir(run_dir) else []
    if not files:
        return None
    counts = {}
    for name in files:
        with open(os.path.join(run_dir, name)) as f:
            for line in f:
                p = line.split()
                # "% time seconds usecs/call calls [errors] syscall"
                if len(p) >= 5 and p[0][0].isdigit() and p[3].isdigit() and p[-1] != "total":
                    counts[p[-1]] = counts.get(p[-1], 0) + int(p[3])
    return counts


def main():
    out = sys.argv[1]
    meta = load(os.path.join(out, "meta.json")) or {}
    jobs = []
    with open(os.path.join(out, "jobs.tsv")) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) >= 5:
                jobs.append({"round": int(p[0]), "contender": p[1], "exit": p[2], "seconds": float(p[3]),
                             "load": p[4], "note": p[5] if len(p) > 5 else ""})
    contenders = meta.get("contenders") or sorted({j["contender"] for j in jobs})
    base = meta.get("baseline", contenders[0])

    # runs[contender][round] = the job's JSON
    runs = {c: {} for c in contenders}
    status = {c: [] for c in contenders}
    for j in jobs:
        d = load(os.path.join(out, "runs", f"r{j['round']}-{j['contender']}", "out.json"))
        status[j["contender"]].append(j)
        if d is not None:
            runs[j["contender"]][j["round"]] = d

    names = []
    for c in contenders:
        for d in runs[c].values():
            for e in d["entries"]:
                if e["name"] not in names:
                    names.append(e["name"])

    def entry(c, rnd, name):
        d = runs[c].get(rnd)
        if not d:
            return None
        return next((e for e in d["entries"] if e["name"] == name), None)

    rows = []
    any_bad = any(j["exit"] not in ("0", "skip") for j in jobs)
    for name in names:
        for c in contenders:
            es = {r: entry(c, r, name) for r in runs[c]}
            es = {r: e for r, e in es.items() if e}
            row = {"entry": name, "contender": c, "rounds": sorted(es), "label": None}
            skipped = [j["note"] for j in status[c] if j["exit"] == "skip"]
            failed = [j for j in status[c] if j["exit"] not in ("0", "skip")]
            if not es:
                row["check"] = ("skipped: " + skipped[0]) if skipped else (
                    f"job failed (exit {failed[0]['exit']})" if failed else "no data")
                rows.append(row)
                continue
            any_e = next(iter(es.values()))
            row["label"] = size_label(any_e)
            row["p50_ms"] = statistics.median(e["p50_ms"] for e in es.values())
            row["p99_ms"] = statistics.median(e["p99_ms"] for e in es.values())
            row["p50_per_round"] = {r: e["p50_ms"] for r, e in es.items()}
            if all("p99_after_last_entry_ms" in e for e in es.values()):
                row["p50_after_ms"] = statistics.median(e["p50_after_last_entry_ms"] for e in es.values())
                row["p99_after_ms"] = statistics.median(e["p99_after_last_entry_ms"] for e in es.values())
            row["p99_per_round"] = {r: e["p99_ms"] for r, e in es.items()}
            ent = sum(e["timed_entries"] for e in es.values())
            drp = sum(e["timed_dropped_entries"] for e in es.values())
            engine = any(e["kinds_all"].get(k) for e in es.values() for k in KINDS if k != "none")
            row["dropped_fraction"] = (drp / ent if ent else 0.0) if engine else None
            row["worst_call_dropped_fraction"] = max(e["timed_worst_call_dropped_fraction"] for e in es.values())
            row["max_rel_rms_error"] = max(e["check"]["max_rel_rms_error"] for e in es.values())
            row["calls"] = sum(e["check"]["calls"] for e in es.values())
            row["not_exact"] = sum(e["check"]["not_exact"] for e in es.values())
            row["wrong"] = sum(e["check"]["wrong"] for e in es.values())  # failed calls are wrong too
            row["calibration_calls_per_round"] = {r: e["kinds_all"].get("calibration", 0) for r, e in es.items()}
            row["kinds_timed"] = {k: sum(e["kinds_timed"].get(k, 0) for e in es.values()) for k in KINDS}
            row["kinds_all"] = {k: sum(e["kinds_all"].get(k, 0) for e in es.values()) for k in KINDS}
            lo = [load(os.path.join(out, "runs", f"r{r}-{c}", "netem.json")) for r in es]
            lo = [x["measured_drop_fraction"] for x in lo if x]
            if lo:
                row["lo_drop_fraction_median"] = statistics.median(lo)
            sc = [strace_counts(os.path.join(out, "runs", f"r{r}-{c}")) for r in es]
            sc = [(x, runs[c][r]) for x, r in zip(sc, es) if x]
            if sc:
                # Per rank and per allreduce call of the whole job (warm-up and start-up included).
                per = lambda names, x, d: sum(x.get(n, 0) for n in names) / (
                    d["ranks"] * sum(e["check"]["calls"] for e in d["entries"]))
                row["send_syscalls_per_call"] = statistics.median(per(SEND_CALLS, x, d) for x, d in sc)
                row["recv_syscalls_per_call"] = statistics.median(per(RECV_CALLS, x, d) for x, d in sc)
                row["syscalls"] = sc[0][0]
            notes = []
            if row["wrong"]:
                notes.append(f"WRONG: {row['wrong']} call(s)")
                any_bad = True
            if failed:
                notes.append(f"{len(failed)} job(s) failed")
            row["check"] = "; ".join(notes) if notes else "ok"
            rows.append(row)

    # Ratios against the baseline of the same run (and of the same round, for the range).
    for row in rows:
        b = next((x for x in rows if x["entry"] == row["entry"] and x["contender"] == base), None)
        if not b or "p50_ms" not in b or "p50_ms" not in row:
            continue
        row["p50_ratio"] = row["p50_ms"] / b["p50_ms"] if b["p50_ms"] else None
        if "p99_after_ms" in row and b.get("p99_after_ms"):
            row["p50_after_ratio"] = row["p50_after_ms"] / b["p50_after_ms"] if b["p50_after_ms"] else None
            row["p99_after_ratio"] = row["p99_after_ms"] / b["p99_after_ms"]
        row["p99_ratio"] = row["p99_ms"] / b["p99_ms"] if b["p99_ms"] else None
        per = [row["p50_per_round"][r] / b["p50_per_round"][r] for r in row["p50_per_round"]
               if r in b["p50_per_round"] and b["p50_per_round"][r]]
        row["p50_ratio_per_round"] = [min(per), max(per)] if per else None
        per = [row["p99_per_round"][r] / b["p99_per_round"][r] for r in row["p99_per_round"]
               if r in b["p99_per_round"] and b["p99_per_round"][r]]
        row["p99_ratio_per_round"] = [min(per), max(per)] if per else None

    # --- table.md ---------------------------------------------------------------------------------
    m = meta
    unit = "steps" if m.get("mode") in ("step", "buckets", "model") else "calls"
    lines = [f"## bench: {m.get('net')}, {m.get('mode')}, {m.get('ranks')} ranks, {m.get('warmup')} warm-up + "
             f"{m.get('iters')} timed {unit}, {m.get('rounds')} rounds ({m.get('order')} order), baseline {base}"
             f"{', host barrier (nothing over the network)' if m.get('barrier') == 'host' else ''}",
             "",
             f"load average at start {m.get('loadavg_start')}, at end {' '.join(m.get('loadavg_end') or [])}; "
             f"{m.get('host_cpus')} CPUs; commit {m.get('commit')}"
             f"{' (with uncommitted changes)' if m.get('uncommitted_changes') else ''}; `{m.get('command')}`",
             "",
             "| entry | contender | p50 ms | p99 ms | p50 ratio | p99 ratio | p50 ratio per round | p99 ratio per round "
             "| dropped | worst RMS error | not exact | calibrating calls | timed calls | check |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]

    with_sc = any("send_syscalls_per_call" in r for r in rows)
    if with_sc:
        lines[-2] += " send syscalls per call | recv syscalls per call |"
        lines[-1] += " --- | --- |"

    def sc_cells(row):
        if not with_sc:
            return ""
        if "send_syscalls_per_call" not in row:
            return " – | – |"
        return f" {row['send_syscalls_per_call']:.4g} | {row['recv_syscalls_per_call']:.4g} |"

    def rng(x):
        return "–" if not x else (f"{x[0]:.2f}" if abs(x[0] - x[1]) < 0.005 else f"{x[0]:.2f}–{x[1]:.2f}")

    for row in rows:
        if "p50_ms" not in row:
            lines.append(f"| {row['entry']} | {row['contender']} | – | – | – | – | – | – | – | – | – | – | – | {row['check']} |"
                         + sc_cells(row))
            continue
        cal = sorted(set(row["calibration_calls_per_round"].values()))
        cal_s = str(cal[0]) if len(cal) == 1 else f"{cal[0]}–{cal[-1]}"
        lines.append(
            f"| {row['label']} | {row['contender']} | {fmt_ms(row['p50_ms'])} | {fmt_ms(row['p99_ms'])} | "
            f"{fmt_ratio(row.get('p50_ratio'))} | {fmt_ratio(row.get('p99_ratio'))} | {rng(row.get('p50_ratio_per_round'))} | "
            f"{rng(row.get('p99_ratio_per_round'))} | {fmt_frac(row['dropped_fraction'])} | {fmt_err(row['max_rel_rms_error'])} | "
            f"{row['not_exact']} / {row['calls']} | {cal_s} | {kinds_text(row['kinds_timed'])} | {row['check']} "
            f"({len(row['rounds'])} of {m.get('rounds')} rounds) |" + sc_cells(row))
    lines += ["",
              "p50, p99: medians over rounds of each round's p50 and p99 of the timed iterations (max over ranks). "
              f"Ratios: to {base}'s medians; per round: the range of the same-round ratios. dropped: share of the "
              "timed calls' result entries that lacked a contribution (summed over ranks). worst RMS error: the "
              "largest relative RMS error of any call (warm-up included) against the exact sum. not exact: calls "
              "with any entry off the exact sum, of all calls. calibrating calls: calls of kind calibration per "
              "round. timed calls: the kinds of the timed calls, all rounds (none: not the engine)."
              + (" syscalls per call: send-type (sendmsg, sendmmsg, sendto, write, writev) and receive-type "
                 "(recvmsg, recvmmsg, recvfrom, read, readv) system calls of the whole job per rank and allreduce "
                 "call, start-up and warm-up included (median over rounds); timings under strace are not "
                 "comparable." if with_sc else ""), ""]
    after = [r for r in rows if "p99_after_ms" in r]
    if after and m.get("mode") == "latency":
        lines += ["From the last rank's entry (the iteration's barrier may release ranks at different times: "
                  "a delayed barrier message on a lossy network; ranks share this machine's clock):", "",
                  "| contender | entry | p50 ms | p99 ms | p50 ratio | p99 ratio |", "| --- | --- | --- | --- | --- | --- |"]
        for row in after:
            lines.append(f"| {row['contender']} | {row['label']} | {fmt_ms(row['p50_after_ms'])} | "
                         f"{fmt_ms(row['p99_after_ms'])} | {fmt_ratio(row.get('p50_after_ratio'))} | "
                         f"{fmt_ratio(row.get('p99_after_ratio'))} |")
        lines.append("")
    table = "\n".join(lines)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table)
    print(table)

    # --- summary.json, calls.csv, iterations.csv ----------------------------------------------------
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"meta": meta, "jobs": jobs, "rows": rows}, f, indent=1)
    with open(os.path.join(out, "calls.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["round", "contender", "entry", "call", "phase", "bytes", "latency_ms", "kind", "entries",
                    "dropped_entries", "rel_rms_error", "flags"])
        for c in contenders:
            for r, d in sorted(runs[c].items()):
                for e in d["entries"]:
                    k = e["calls"]
                    warm = e["warmup"] * e["calls_per_iteration"]
                    for i in range(len(k["ms"])):
                        w.writerow([r, c, e["name"], i + 1, "warmup" if i < warm else "timed", k["bytes"][i],
                                    k["ms"][i], k["kind"][i], k["entries"][i], k["dropped"][i],
                                    k["rel_rms_error"][i], k["flags"][i]])
    with open(os.path.join(out, "iterations.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["round", "contender", "entry", "iteration", "phase", "latency_ms"])
        for c in contenders:
            for r, d in sorted(runs[c].items()):
                for e in d["entries"]:
                    for i, ms in enumerate(e["iteration_ms"]):
                        w.writerow([r, c, e["name"], i + 1, "warmup" if i < e["warmup"] else "timed", ms])
    return 1 if any_bad else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Tables and plots of a scripts/compare.sh run.

    summarize.py --meta META.json --out-dir results --tag compare ROUND_DIR...

Each ROUND_DIR is one (round, profile) of compare.sh: round.json, netem.json, probe.json and the
jobs' <impl>-latency.json / <impl>-model.json (+ .report.json from OptiReduce). Writes
OUT/TAG.json (everything, per round and summarised), OUT/TAG.md (tables) and OUT/TAG-*.png.
Summary figures are medians over rounds of each round's figure; ratios are taken between
implementations of the same profile (same run, same emulated network).
"""
import argparse
import json
import os
import statistics
import sys

NAMES = {"ompi": "Open MPI (ob1/tcp)", "gloo": "Gloo (torch.distributed)", "or-reliable": "OptiReduce reliable (UCX tcp)",
         "or-ucx": "OptiReduce bounded (UCX tcp)", "or-ofi": "OptiReduce bounded (ofi datagrams)"}
SHORT = {"ompi": "Open MPI", "gloo": "Gloo", "or-reliable": "OR reliable", "or-ucx": "OR bounded/UCX",
         "or-ofi": "OR bounded/ofi"}


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def records(rounds, profile, impl, kind, key):
    """Every round's records of one implementation and job kind in a profile: the latency job's
    per-size entries (key "sizes") or the model job's per-model runs (key "runs")."""
    return [x for r in rounds if r.get("profile") == profile for j in r["jobs"]
            if j["impl"] == impl and j["kind"] == kind and j.get("result") for x in j["result"].get(key, [])]


def engine_figures(recs):
    """Dropped fraction and call kinds of OptiReduce's timed windows, summed over rounds (None
    for the other implementations)."""
    eng = [x["engine"] for x in recs if x.get("engine")]
    if not eng:
        return {"dropped_fraction": None, "bounded_calls": None, "fallback_calls": None}
    n = sum(e["entries_reduced"] for e in eng)
    return {"dropped_fraction": sum(e["entries_dropped"] for e in eng) / n if n else None,
            "bounded_calls": sum(e["bounded_calls"] for e in eng), "fallback_calls": sum(e["fallback_calls"] for e in eng)}


def fmt_size(b):
    return f"{b >> 20} MiB" if b % (1 << 20) == 0 else f"{b} B"


def f(x, spec=".2f", none="–"):
    return none if x is None else format(x, spec)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meta", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--tag", default="compare")
    ap.add_argument("rounds", nargs="+")
    a = ap.parse_args()
    meta = load(a.meta) or {}
    impls = meta.get("implementations", [])

    rounds = []
    for d in a.rounds:
        r = load(os.path.join(d, "round.json")) or {}
        r["dir"] = d
        net = load(os.path.join(d, "netem.json")) or {}
        r["netem"] = {k: v for k, v in net.items() if k != "tail_probe"}
        probe = load(os.path.join(d, "probe.json"))
        r["probe"] = probe
        jobs = {}
        try:
            for line in open(os.path.join(d, "jobs.txt")):
                impl, kind, rc, secs = line.split()
                jobs[(impl, kind)] = {"exit_code": int(rc), "wall_s": float(secs)}
        except OSError:
            pass
        r["jobs"] = []
        for (impl, kind), j in jobs.items():
            doc = load(os.path.join(d, f"{impl}-{kind}.json"))
            rep = load(os.path.join(d, f"{impl}-{kind}.report.json"))
            j.update(impl=impl, kind=kind, result=doc)
            if rep:
                j["report"] = {k: [x.get(k) for x in rep.get("ranks", [])] for k in
                               ("dropped_fraction", "bounded_calls", "fallback_calls", "fallbacks", "divergent_calls",
                                "engine_failures", "transports")}
            if j["exit_code"] != 0 or doc is None:
                try:
                    j["stderr_tail"] = open(os.path.join(d, f"{impl}-{kind}.stderr")).read()[-1500:]
                except OSError:
                    pass
            r["jobs"].append(j)
        rounds.append(r)

    profiles = [p for p in meta.get("profiles", []) if any(r.get("profile") == p for r in rounds)]
    # ---- the profiles' measured tail
    prof_rows = []
    for p in profiles:
        pr = [r for r in rounds if r.get("profile") == p and r.get("probe")]
        ratios = [r["probe"]["p99_over_p50"] for r in pr]
        prof_rows.append({"profile": p, "p99_over_p50_per_round": ratios, "p99_over_p50": med(ratios),
                          "p50_ms": med(r["probe"]["p50_ms"] for r in pr), "p99_ms": med(r["probe"]["p99_ms"] for r in pr),
                          "background": (pr[0]["netem"].get("background") if pr else None),
                          "drop_permille": (pr[0]["netem"].get("drop_permille") if pr else None)})
    tail_of = {row["profile"]: row["p99_over_p50"] for row in prof_rows}

    # ---- latency
    lat = []
    sizes = sorted({s["bytes"] for r in rounds for j in r["jobs"] if j["kind"] == "latency" and j.get("result")
                    for s in j["result"]["sizes"]})
    for p in profiles:
        for b in sizes:
            for impl in impls:
                per = [x for x in records(rounds, p, impl, "latency", "sizes") if x["bytes"] == b]
                if not per:
                    continue
                lat.append({"profile": p, "profile_p99_over_p50": tail_of.get(p), "bytes": b, "impl": impl,
                            "rounds": len(per), "p50_ms": med(x["p50_ms"] for x in per),
                            "p99_ms": med(x["p99_ms"] for x in per),
                            "p50_ms_per_round": [x["p50_ms"] for x in per],
                            "p99_ms_per_round": [x["p99_ms"] for x in per],
                            **engine_figures(per),
                            "samples_ms": [v for x in per for v in x["samples_ms"]]})
    for row in lat:
        for base in ("ompi", "gloo"):
            ref = next((x for x in lat if x["profile"] == row["profile"] and x["bytes"] == row["bytes"] and x["impl"] == base), None)
            if ref and ref["p50_ms"] and ref["p99_ms"]:
                row[f"p50_vs_{base}"] = row["p50_ms"] / ref["p50_ms"]
                row[f"p99_vs_{base}"] = row["p99_ms"] / ref["p99_ms"]

    # ---- iteration time
    its = []
    models = []
    for r in rounds:
        for j in r["jobs"]:
            if j["kind"] == "model" and j.get("result"):
                for m in j["result"].get("runs", []):
                    if m["model"] not in models:
                        models.append(m["model"])
    for p in profiles:
        for mname in models:
            for impl in impls:
                per = [x for x in records(rounds, p, impl, "model", "runs") if x["model"] == mname]
                if not per:
                    continue
                its.append({"profile": p, "profile_p99_over_p50": tail_of.get(p), "model": mname, "impl": impl,
                            "rounds": len(per), "s_per_iter": med(m["s_per_iter_median"] for m in per),
                            "s_per_iter_per_round": [m["s_per_iter_median"] for m in per],
                            "comm_s": med(m["comm_s_median"] for m in per), "compute_s": per[0]["compute_s"],
                            "scale": per[0]["scale"], "buckets": len(per[0]["buckets_bytes"]),
                            "full_bucket_count": per[0]["full_bucket_count"], **engine_figures(per)})
    for row in its:
        for base in ("ompi", "gloo"):
            ref = next((x for x in its if x["profile"] == row["profile"] and x["model"] == row["model"] and x["impl"] == base), None)
            if ref and ref["s_per_iter"]:
                row[f"speedup_vs_{base}"] = ref["s_per_iter"] / row["s_per_iter"]

    failed = [{"round": r.get("round"), "profile": r.get("profile"), "impl": j["impl"], "kind": j["kind"],
               "exit_code": j["exit_code"], "stderr_tail": j.get("stderr_tail", "")[-400:]}
              for r in rounds for j in r["jobs"] if j["exit_code"] != 0 or not j.get("result")]

    # ---- markdown
    md = []
    md.append(f"# {a.tag}: allreduce side by side on emulated networks\n")
    md.append(f"Command: `{meta.get('command', 'scripts/compare.sh')}`; {meta.get('ranks')} ranks on a "
              f"{meta.get('host_cpus')}-CPU machine (load average at the end: "
              f"{', '.join(f'{x:.1f}' for x in meta.get('loadavg_at_end', []))}). Medians over "
              f"{meta.get('reps')} rounds; ratios are within the same profile of the same run.\n")
    if meta.get("state") == "partial":
        md.append("**Partial**: written while the run was going on (or it was stopped); not every round is in.\n")
    if meta.get("skipped"):
        md.append("Skipped: " + "; ".join(meta["skipped"]) + "\n")
    md.append("## Profiles (tail probe: Open MPI ob1/tcp, 4 ranks, 4 MiB allreduce, "
              f"{meta.get('probe_iters')} calls per round)\n")
    md.append("| profile | P99/P50 (median) | per round | probe p50 ms | probe p99 ms | background |")
    md.append("|---|---|---|---|---|---|")
    for row in prof_rows:
        bg = row["background"] or {}
        bgs = (f"iperf3 {bg.get('burst')} bursts, {bg.get('flows')} stream(s) at {bg.get('rate')}, mean gap {bg.get('gap_ms')} ms"
               if bg.get("flows") else "none")
        if row.get("drop_permille"):
            bgs += f"; drop {row['drop_permille']:g} per mille"
        md.append(f"| {row['profile']} | {f(row['p99_over_p50'])} | {', '.join(f(x) for x in row['p99_over_p50_per_round'])} | "
                  f"{f(row['p50_ms'], '.1f')} | {f(row['p99_ms'], '.1f')} | {bgs} |")
    if lat:
        md.append("\n## Latency per call (ms, max over ranks; median over rounds of each round's p50 and p99)\n")
        md.append("| profile (P99/P50) | size | implementation | p50 | p99 | p99/p50 | p50 vs Open MPI | p99 vs Open MPI | p99 vs Gloo | dropped |")
        md.append("|---|---|---|---|---|---|---|---|---|---|")
        for row in lat:
            md.append(f"| {row['profile']} ({f(row['profile_p99_over_p50'], '.1f')}) | {fmt_size(row['bytes'])} | {SHORT[row['impl']]} | "
                      f"{f(row['p50_ms'], '.1f')} | {f(row['p99_ms'], '.1f')} | {f(row['p99_ms'] / row['p50_ms'] if row['p50_ms'] else None, '.1f')} | "
                      f"{f(row.get('p50_vs_ompi'))} | {f(row.get('p99_vs_ompi'))} | {f(row.get('p99_vs_gloo'))} | "
                      f"{f(row['dropped_fraction'], '.2e')} |")
    if its:
        md.append("\n## Iteration time (s/iteration, median over rounds of each round's median; compute sleep + "
                  "one allreduce per DDP bucket, no overlap; "
                  f"OptiReduce calibrated on {meta.get('model_calibration_calls')} calls per size class)\n")
        md.append("| profile (P99/P50) | model (replayed) | implementation | s/it | comm s | speedup vs Open MPI | speedup vs Gloo | dropped |")
        md.append("|---|---|---|---|---|---|---|---|")
        for row in its:
            md.append(f"| {row['profile']} ({f(row['profile_p99_over_p50'], '.1f')}) | {row['model']} ({row['buckets']}/"
                      f"{row['full_bucket_count']} buckets, compute {row['compute_s']:.3f} s) | {SHORT[row['impl']]} | "
                      f"{f(row['s_per_iter'], '.3f')} | {f(row['comm_s'], '.3f')} | {f(row.get('speedup_vs_ompi'))} | "
                      f"{f(row.get('speedup_vs_gloo'))} | {f(row['dropped_fraction'], '.2e')} |")
    if failed:
        md.append("\n## Failed jobs\n")
        for x in failed:
            md.append(f"- round {x['round']} {x['profile']} {x['impl']} {x['kind']}: exit {x['exit_code']}")
    text = "\n".join(md) + "\n"

    os.makedirs(a.out_dir, exist_ok=True)
    base = os.path.join(a.out_dir, a.tag)
    with open(base + ".md", "w") as fh:
        fh.write(text)
    doc = {"what": "scripts/compare.sh: allreduce implementations side by side on scripts/netem.sh profiles",
           "meta": meta, "profiles": prof_rows, "latency": lat, "iteration_time": its, "failed_jobs": failed,
           "rounds": [{k: v for k, v in r.items() if k != "probe"} | {"probe": {k: v for k, v in (r.get("probe") or {}).items()
                                                                                  if k != "samples_ms"}} for r in rounds]}
    with open(base + ".json", "w") as fh:
        json.dump(doc, fh, indent=1)
    print(text)
    print(f"written: {base}.json, {base}.md", file=sys.stderr)

    # ---- plots
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("summarize: no matplotlib: no plots", file=sys.stderr)
        return 1 if failed else 0
    pngs = []
    for p in profiles:
        rows = [x for x in lat if x["profile"] == p]
        if not rows:
            continue
        fig, axes = plt.subplots(1, len(sizes), figsize=(4.2 * len(sizes), 3.6), squeeze=False)
        for ax, b in zip(axes[0], sizes):
            for row in [x for x in rows if x["bytes"] == b]:
                xs = sorted(row["samples_ms"])
                ys = [(i + 1) / len(xs) for i in range(len(xs))]
                ax.step(xs, ys, where="post", label=SHORT[row["impl"]])
            ax.set_xscale("log")
            ax.set_title(f"{p} (P99/P50 {f(tail_of.get(p), '.1f')}), {fmt_size(b)}")
            ax.set_xlabel("latency per call, ms (max over ranks)")
            ax.set_ylabel("fraction of calls")
            ax.grid(alpha=0.3)
        axes[0][0].legend(fontsize=8)
        fig.tight_layout()
        path = f"{base}-cdf-{p}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        pngs.append(path)
    def grouped_bars(rows, panels, key, fields, ylabel, title, name, log):
        """One panel per key value; per profile a group of bars, one per implementation; fields:
        [(field, alpha, label suffix)], drawn over each other (p99 light behind p50 solid)."""
        fig, axes = plt.subplots(1, len(panels), figsize=(4.8 * len(panels), 3.8), squeeze=False)
        present = [i for i in impls if any(x["impl"] == i for x in rows)]
        w = 0.8 / max(1, len(present))
        for ax, v in zip(axes[0], panels):
            for k, impl in enumerate(present):
                sel = [next((x for x in rows if x["profile"] == p and x[key] == v and x["impl"] == impl), None) for p in profiles]
                xs = [i + k * w for i in range(len(profiles))]
                color = None
                for field, alpha, suffix in fields:
                    bars = ax.bar(xs, [r[field] if r and r[field] else 0 for r in sel], w, alpha=alpha, color=color,
                                  label=f"{SHORT[impl]}{suffix}" if v == panels[0] else None)
                    color = bars.patches[0].get_facecolor()[:3]
            ax.set_xticks([i + w * (len(present) - 1) / 2 for i in range(len(profiles))])
            ax.set_xticklabels([f"{p}\n({f(tail_of.get(p), '.1f')})" for p in profiles])
            if log:
                ax.set_yscale("log")
            ax.set_ylabel(ylabel)
            ax.set_title(title(v))
            ax.grid(alpha=0.3, axis="y")
        axes[0][0].legend(fontsize=7, ncol=2 if len(fields) > 1 else 1)
        fig.tight_layout()
        path = f"{base}-{name}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        pngs.append(path)

    if lat:
        grouped_bars(lat, sizes, "bytes", [("p99_ms", 0.45, " p99"), ("p50_ms", 1.0, " p50")], "ms per call",
                     lambda b: f"{fmt_size(b)}: p50 (solid), p99 (light)", "bars", True)
    if its:
        grouped_bars(its, models, "model", [("s_per_iter", 1.0, "")], "s / iteration",
                     lambda m: f"{m} (replayed)", "itertime", False)
    print("plots: " + ", ".join(pngs), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

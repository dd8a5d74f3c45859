"""Tables and plots of scripts/tta/tta.py's results (results/tta*/results.json).

    /usr/bin/python3 scripts/tta/report.py results/tta/results.json    # rewrites table.md and the plots
"""
import json
import os
import statistics
import sys

LABELS = {"openmpi": "Open MPI", "gloo": "Gloo", "optireduce-ucx": "OptiReduce (UCX/TCP)",
          "optireduce-udp": "OptiReduce (UDP datagrams)",
          "optireduce-ofi": "OptiReduce (OFI datagrams)",
          "backend-udp": "OptiReduce torch backend (torchrun launch, UDP)"}


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, spec, none="–"):
    return none if value is None else format(value, spec)


# --- time to accuracy --------------------------------------------------------------------------------
def summarize(results):
    """One row per (profile, implementation): medians over repetitions."""
    rows = []
    for profile in results["profiles"]:
        for impl in results["implementations"]:
            runs = [r for r in results["runs"] if r["profile"] == profile and r["impl"] == impl]
            if not runs:
                continue
            ends = [r.get("end") or {} for r in runs]
            ok = [r for r in runs if r.get("rc") == 0 and r.get("end")]
            reached = [e.get("time_to_target") for e in ends if e.get("time_to_target") is not None]
            rows.append({
                "profile": profile, "impl": impl, "runs": len(runs), "ok": len(ok),
                "reached": len(reached),
                # Only when every run reached the target: a median over the ones that did would flatter.
                "time_to_target": median(reached) if len(reached) == len(runs) else None,
                "steps_to_target": median([e.get("steps_to_target") for e in ends])
                if len(reached) == len(runs) else None,
                "final_accuracy": median([e.get("final_accuracy") for e in ends]),
                "train_time": median([e.get("train_time") for e in ends]),
                "comm_share": median([e.get("comm_share") for e in ends]),
                "step_p50_ms": median([1e3 * e["step_time_p50"] for e in ends if e.get("step_time_p50")]),
                "step_p99_ms": median([1e3 * e["step_time_p99"] for e in ends if e.get("step_time_p99")]),
                "dropped_fraction": median([e.get("dropped_fraction") for e in ends]),
                "lo_drop": median([(r.get("netem") or {}).get("measured_drop_fraction") for r in runs]),
            })
    clean = {r["impl"]: r for r in rows if r["profile"] == "clean"}
    for r in rows:
        base = clean.get(r["impl"])
        r["tail_penalty"] = (r["time_to_target"] / base["time_to_target"]
                             if base and base["time_to_target"] and r["time_to_target"] is not None else None)
        baselines = [x["time_to_target"] for x in rows if x["profile"] == r["profile"]
                     and x["impl"] in ("openmpi", "gloo") and x["time_to_target"] is not None]
        # Below 1: OptiReduce reached the target sooner than the better of the two baselines.
        r["vs_best_baseline"] = (r["time_to_target"] / min(baselines)
                                 if r["impl"] not in ("openmpi", "gloo") and baselines and r["time_to_target"] else None)
    return rows


def tta_table(results, rows):
    target = results["config"]["target"]
    lines = [f"| profile | implementation | time to {target:g} % (s) | steps | tail penalty | "
             f"final accuracy after {results['config']['steps']} steps (%) | communication share | "
             "step p50 / p99 (ms) | dropped | time / best of Open MPI, Gloo |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        tta = fmt(r["time_to_target"], ".1f")
        if r["time_to_target"] is None:
            tta = f"not reached ({r['reached']}/{r['runs']} runs)"
        if r["ok"] < r["runs"]:
            tta += f" [{r['runs'] - r['ok']} run(s) failed]"
        lines.append(
            f"| {r['profile']} | {LABELS.get(r['impl'], r['impl'])} | {tta} | {fmt(r['steps_to_target'], '.0f')} | "
            f"{fmt(r['tail_penalty'], '.2f')} | {fmt(r['final_accuracy'], '.2f')} | "
            f"{fmt(r['comm_share'] and 100 * r['comm_share'], '.0f')} % | "
            f"{fmt(r['step_p50_ms'], '.0f')} / {fmt(r['step_p99_ms'], '.0f')} | "
            f"{fmt(r['dropped_fraction'] and 100 * r['dropped_fraction'], '.2f', '–' if r['dropped_fraction'] is None else '0')}"
            f"{'' if r['dropped_fraction'] is None else ' %'} | "
            f"{fmt(r['vs_best_baseline'], '.2f')} |")
    return "\n".join(lines)


def plot_tta(results, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    profiles, impls = results["profiles"], results["implementations"]
    cols = min(2, len(profiles))
    nrows = (len(profiles) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(6 * cols, 4 * nrows), squeeze=False)
    target = results["config"]["target"]
    for ax, profile in zip(axes.flat, profiles):
        for impl in impls:
            runs = [r for r in results["runs"] if r["profile"] == profile and r["impl"] == impl and r.get("evals")]
            for i, r in enumerate(runs):
                xs = [e["train_time"] for e in r["evals"]]
                ys = [e["accuracy"] for e in r["evals"]]
                ax.plot(xs, ys, marker=".", color=f"C{impls.index(impl)}", alpha=1.0 if i == 0 else 0.4,
                        label=LABELS.get(impl, impl) if i == 0 else None)
        ax.axhline(target, color="grey", linestyle="--", linewidth=0.8)
        ax.set_title(f"profile {profile}")
        ax.set_xlabel("training time, evaluation excluded (s)")
        ax.set_ylabel("test accuracy (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    for ax in list(axes.flat)[len(profiles):]:
        ax.axis("off")
    fig.suptitle(f"{results['config']['describe']}", fontsize=9)
    fig.tight_layout()
    accuracy_png = os.path.join(out_dir, "accuracy_vs_time.png")
    fig.savefig(accuracy_png, dpi=110)
    plt.close(fig)

    rows = summarize(results)
    fig, ax = plt.subplots(figsize=(max(6, 1.8 * len(profiles) * len(impls) / 2), 4))
    width = 0.8 / max(1, len(impls))
    for k, impl in enumerate(impls):
        xs, ys, notes = [], [], []
        for i, profile in enumerate(profiles):
            row = next((r for r in rows if r["profile"] == profile and r["impl"] == impl), None)
            if row is None:
                continue
            xs.append(i + (k - (len(impls) - 1) / 2) * width)
            ys.append(row["time_to_target"] or 0)
            notes.append("n/r" if row["time_to_target"] is None else f"{row['time_to_target']:.0f}")
        bars = ax.bar(xs, ys, width, label=LABELS.get(impl, impl), color=f"C{k}")
        for bar, note in zip(bars, notes):
            ax.annotate(note, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom",
                        fontsize=7)
    ax.set_ylim(bottom=0)
    ax.set_xticks(range(len(profiles)))
    ax.set_xticklabels(profiles)
    ax.set_ylabel(f"training time to {target:g} % test accuracy (s)")
    ax.set_title("time to accuracy (n/r: not reached in the budget)", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    bars_png = os.path.join(out_dir, "time_to_accuracy.png")
    fig.savefig(bars_png, dpi=110)
    plt.close(fig)
    return [accuracy_png, bars_png]


# --- ablation: fill policy and Hadamard under injected loss ----------------------------------------------
def tail_mean(run, k=3):
    """Mean test accuracy of the last k evaluations: less noisy than the last one alone."""
    accs = [e["accuracy"] for e in (run.get("evals") or [])[-k:] if e.get("accuracy") is not None]
    return sum(accs) / len(accs) if accs else None


def ablation_rows(results):
    runs = results["runs"]
    base_runs = [r for r in runs if r["impl"] == "openmpi" and r.get("end")]
    base_acc = median([r["end"].get("final_accuracy") for r in base_runs])
    base_tail = median([tail_mean(r) for r in base_runs])
    base_steps = median([r["end"].get("steps_to_target") for r in base_runs])
    rows = []
    keys = []
    for r in runs:
        key = (r.get("drop"), r.get("fill"), r.get("hadamard"))
        if r["impl"] != "openmpi" and key not in keys:
            keys.append(key)
    for key in keys:
        group = [r for r in runs if (r.get("drop"), r.get("fill"), r.get("hadamard")) == key and r["impl"] != "openmpi"]
        ends = [r.get("end") or {} for r in group]
        acc = median([e.get("final_accuracy") for e in ends])
        tail = median([tail_mean(r) for r in group])
        reached = [e.get("steps_to_target") for e in ends if e.get("steps_to_target") is not None]
        steps = median(reached) if len(reached) == len(group) else None
        fallback = median([((r.get("evals") or [{}])[-1].get("library_calls") or {}).get("fallback") for r in group])
        rows.append({"drop": key[0], "fill": key[1], "hadamard": key[2], "runs": len(group),
                     "final_accuracy": acc, "delta_accuracy": None if acc is None or base_acc is None else acc - base_acc,
                     "tail_accuracy": tail,
                     "delta_tail": None if tail is None or base_tail is None else tail - base_tail,
                     "steps_to_target": steps,
                     "delta_steps": None if steps is None or not base_steps else steps / base_steps - 1,
                     "dropped_fraction": median([e.get("dropped_fraction") for e in ends]),
                     "fallback_calls": fallback,
                     "replica_spread": median([e.get("replica_spread") for e in ends])})
    return base_acc, base_steps, rows, base_tail


def ablation_table(results):
    base_acc, base_steps, rows, base_tail = ablation_rows(results)
    target = results["config"]["target"]
    lines = [f"Baseline (Open MPI, exact, no loss): final accuracy {fmt(base_acc, '.2f')} % (mean of the last 3 "
             f"evaluations {fmt(base_tail, '.2f')} %), steps to {target:g} %: {fmt(base_steps, '.0f', 'not reached')}.",
             "",
             "| injected drop | fill | Hadamard | final accuracy (%) | vs baseline (points) | last-3 mean (%) | "
             "vs baseline (points) | steps to target | vs baseline steps | dropped entries | fallback calls |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['drop']} | {r['fill']} | {r['hadamard']} | {fmt(r['final_accuracy'], '.2f')} | "
                     f"{fmt(r['delta_accuracy'], '+.2f')} | {fmt(r['tail_accuracy'], '.2f')} | "
                     f"{fmt(r['delta_tail'], '+.2f')} | {fmt(r['steps_to_target'], '.0f', 'not reached')} | "
                     f"{fmt(r['delta_steps'] and 100 * r['delta_steps'], '+.0f')}{'' if r['delta_steps'] is None else ' %'} | "
                     f"{fmt(r['dropped_fraction'] and 100 * r['dropped_fraction'], '.2f')} % | "
                     f"{fmt(r['fallback_calls'], '.0f')} |")
    lines += ["", verdict(rows)]
    return "\n".join(lines)


def verdict(rows):
    """Which fill and Hadamard setting trained best: accuracy (mean of each run's last 3
    evaluations) averaged over the drop rates, and the best setting at each drop rate."""
    def mean_acc(pred):  # over the last 3 evaluations of each run, then over the runs
        vals = [r["tail_accuracy"] for r in rows if pred(r) and r["tail_accuracy"] is not None]
        return sum(vals) / len(vals) if vals else None

    out = []
    combos = sorted({(r["fill"], r["hadamard"]) for r in rows})
    scored = [(mean_acc(lambda r, c=c: (r["fill"], r["hadamard"]) == c), c) for c in combos]
    scored = [s for s in scored if s[0] is not None]
    if not scored:
        return "No ablation run finished."
    for fill in sorted({r["fill"] for r in rows}):
        out.append(f"fill={fill}: mean accuracy (last 3 evaluations, all drop rates) {fmt(mean_acc(lambda r: r['fill'] == fill), '.2f')} %")
    for had in sorted({r["hadamard"] for r in rows}):
        out.append(f"hadamard={had}: mean accuracy (last 3 evaluations, all drop rates) {fmt(mean_acc(lambda r: r['hadamard'] == had), '.2f')} %")
    for drop in sorted({r["drop"] for r in rows}, key=float):
        here = [r for r in rows if r["drop"] == drop and r["tail_accuracy"] is not None]
        if here:
            top = max(here, key=lambda r: r["tail_accuracy"])
            low = min(here, key=lambda r: r["tail_accuracy"])
            out.append(f"drop {drop}: best fill={top['fill']} hadamard={top['hadamard']} ({top['tail_accuracy']:.2f} %), "
                       f"worst fill={low['fill']} hadamard={low['hadamard']} ({low['tail_accuracy']:.2f} %)")
    best = max(scored)
    spread = max(s[0] for s in scored) - min(s[0] for s in scored)
    out.append(f"best combination over all drop rates: OPTIREDUCE_FILL={best[1][0]} OPTIREDUCE_HADAMARD={best[1][1]} "
               f"({best[0]:.2f} %; spread between combinations {spread:.2f} points)")
    return "\n".join("- " + line for line in out)


def plot_ablation(results, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    _, _, rows, base_acc = ablation_rows(results)
    drops = sorted({r["drop"] for r in rows}, key=float)
    combos = sorted({(r["fill"], r["hadamard"]) for r in rows})
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / max(1, len(combos))
    for k, combo in enumerate(combos):
        xs, ys = [], []
        for i, d in enumerate(drops):
            row = next((r for r in rows if r["drop"] == d and (r["fill"], r["hadamard"]) == combo), None)
            if row and row["tail_accuracy"] is not None:
                xs.append(i + (k - (len(combos) - 1) / 2) * width)
                ys.append(row["tail_accuracy"])
        ax.bar(xs, ys, width, label=f"fill {combo[0]}, Hadamard {combo[1]}", color=f"C{k}")
    if base_acc is not None:
        ax.axhline(base_acc, color="black", linestyle="--", linewidth=0.8, label="Open MPI, no loss")
    ax.set_xticks(range(len(drops)))
    ax.set_xticklabels([f"drop {d}" for d in drops])
    ax.set_ylabel("test accuracy, mean of the last 3 evaluations (%)")
    values = [r["tail_accuracy"] for r in rows if r["tail_accuracy"] is not None] + ([base_acc] if base_acc else [])
    if values:
        ax.set_ylim(max(0, min(values) - 3), min(100, max(values) + 2))
    ax.legend(fontsize=7, ncol=2)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path = os.path.join(out_dir, "ablation.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def write(results, out_dir):
    """table.md and the plots; returns (markdown, [png paths])."""
    header = [f"# {results['title']}", "", results["config"]["describe"], "",
              f"Machine: {results['machine']['describe']}", ""]
    if results.get("notes"):
        header += ["Notes:"] + [f"- {n}" for n in results["notes"]] + [""]
    if results["mode"] == "ablation":
        body = ablation_table(results)
        plotter = plot_ablation
    else:
        body = tta_table(results, summarize(results))
        plotter = plot_tta
    markdown = "\n".join(header) + body + "\n"
    with open(os.path.join(out_dir, "table.md"), "w") as f:
        f.write(markdown)
    try:
        pngs = plotter(results, out_dir)
    except ImportError as error:
        pngs = []
        print(f"tta: no plots: matplotlib not importable ({error}); apt-get install python3-matplotlib",
              file=sys.stderr)
    return body, pngs


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: report.py results.json")
    data = json.load(open(sys.argv[1]))
    table, plots = write(data, os.path.dirname(os.path.abspath(sys.argv[1])))
    print(table)
    for p in plots:
        print(f"plot: {p}")

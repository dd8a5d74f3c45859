#!/usr/bin/python3
"""Latency CDFs of one scripts/bench.sh network (bench.sh --plot): for every entry (a size, a step, a
model), the timed iterations of every round, one curve per contender, from OUT_DIR/iterations.csv
(written by summarize.py). Writes OUT_DIR/cdf-<entry>.png and prints their paths.

    /usr/bin/python3 scripts/bench/plot_cdf.py OUT_DIR
"""
import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    out = sys.argv[1]
    with open(os.path.join(out, "meta.json")) as f:
        meta = json.load(f)
    samples = {}  # entry -> contender -> [ms]
    with open(os.path.join(out, "iterations.csv")) as f:
        for row in csv.DictReader(f):
            if row["phase"] == "timed":
                samples.setdefault(row["entry"], {}).setdefault(row["contender"], []).append(float(row["latency_ms"]))
    if not samples:
        print(f"plot_cdf.py: no timed iteration in {out}/iterations.csv", file=sys.stderr)
        return 1
    for entry, by_contender in samples.items():
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        for contender in meta.get("contenders") or sorted(by_contender):
            v = sorted(by_contender.get(contender, []))
            if v:
                ax.step([v[0]] + v, [0] + [(i + 1) / len(v) for i in range(len(v))], where="post",
                        label=f"{contender} ({len(v)})")
        ax.set_xscale("log")
        ax.set_xlabel("latency, max over ranks (ms, log scale)")
        ax.set_ylabel("fraction of timed iterations")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{entry}: {meta.get('net')}, {meta.get('ranks')} ranks, {meta.get('rounds')} rounds", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
        load_end = meta.get("loadavg_end")
        load = f"load {meta.get('loadavg_start')}" + (f" to {' '.join(load_end)}" if load_end else "")
        fig.text(0.01, 0.01, f"{meta.get('started', '')[:10]}, {meta.get('host_cpus')} CPUs, {load}; "
                 f"`{meta.get('command')}`", fontsize=5, alpha=0.7)
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        path = os.path.join(out, f"cdf-{entry.replace('/', '-')}.png")
        fig.savefig(path, dpi=120)
        plt.close(fig)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

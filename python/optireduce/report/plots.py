"""The PNG: for a trace, the latency CDF and, over the calls, the deadlines and the dropped
fraction; for a report (which holds only percentiles), latency per rank and per size class, and
the dropped fraction per rank."""
from .summary import byte_text


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    return plt


def trace_png(trace, path):
    plt = _pyplot()
    calls = trace.calls
    figure, (cdf, deadline, dropped) = plt.subplots(3, 1, figsize=(8, 10))
    kinds = list(dict.fromkeys(c.kind for c in calls))
    for kind in kinds:
        latency = sorted(c.latency_us / 1000 for c in calls if c.kind == kind)
        cdf.step(latency, [(i + 1) / len(latency) for i in range(len(latency))], where="post",
                 label=f"{kind} ({len(latency)})")
    cdf.set_xlabel("latency (ms)")
    cdf.set_ylabel("fraction of calls")
    cdf.set_title("latency CDF, every rank's calls")
    cdf.legend()

    # One point per call position (the n-th call of each rank), over the ranks.
    positions = sorted({c.index for c in calls})
    by_position = {p: [c for c in calls if c.index == p] for p in positions}
    scatter = [max(c.deadline_scatter_us for c in by_position[p]) / 1000 for p in positions]
    gather = [max(c.deadline_gather_us for c in by_position[p]) / 1000 for p in positions]
    taken = [max(c.latency_us for c in by_position[p]) / 1000 for p in positions]
    deadline.plot(positions, scatter, label="scatter-reduce deadline")
    deadline.plot(positions, gather, label="all-gather deadline")
    deadline.plot(positions, taken, label="latency (slowest rank)", alpha=0.6)
    deadline.set_xlabel("call (n-th call of each rank)")
    deadline.set_ylabel("ms")
    deadline.set_title("deadlines over calls (0: exact call)")
    deadline.legend()

    fraction = [sum(c.dropped_entries for c in by_position[p]) / max(1, sum(c.entries for c in by_position[p]))
                for p in positions]
    dropped.plot(positions, [100 * f for f in fraction], color="tab:red")
    dropped.set_xlabel("call (n-th call of each rank)")
    dropped.set_ylabel("dropped entries (%)")
    dropped.set_title("dropped fraction over calls, all ranks")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def report_png(report, path):
    plt = _pyplot()
    ranks = report.ranks
    labels = [str(r.get("rank", "?")) for r in ranks]
    figure, (latency, classes, dropped) = plt.subplots(3, 1, figsize=(8, 10))
    width = 0.25
    for i, q in enumerate(("p50", "p99", "max")):
        values = [(r.get("latency_us") or {}).get(q) or 0 for r in ranks]
        latency.bar([x + (i - 1) * width for x in range(len(ranks))], [v / 1000 for v in values], width, label=q)
    latency.set_xticks(range(len(ranks)), labels)
    latency.set_xlabel("rank")
    latency.set_ylabel("latency (ms)")
    latency.set_title("latency percentiles per rank (an OPTIREDUCE_TRACE gives the whole CDF)")
    latency.legend()
    _size_classes(classes, ranks, width)
    fraction = [100 * (r.get("entries_dropped") or 0) / max(1, r.get("entries_reduced") or 0) for r in ranks]
    dropped.bar(range(len(ranks)), fraction, color="tab:red")
    dropped.set_xticks(range(len(ranks)), labels)
    dropped.set_xlabel("rank")
    dropped.set_ylabel("dropped entries (%)")
    dropped.set_title("dropped fraction per rank")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _size_classes(axes, ranks, width):
    """p50 and p99 per size class, the worst rank's."""
    worst = {}
    for r in ranks:
        for c in r.get("size_classes") or []:
            q = c.get("latency_us") or {}
            p50, p99 = worst.get(c.get("bytes_from", 0), (0, 0))
            worst[c.get("bytes_from", 0)] = (max(p50, q.get("p50") or 0), max(p99, q.get("p99") or 0))
    starts = sorted(worst)
    for i, (q, label) in enumerate(((0, "p50"), (1, "p99"))):
        axes.bar([x + (i - 0.5) * width for x in range(len(starts))], [worst[s][q] / 1000 for s in starts], width,
                 label=label)
    axes.set_xticks(range(len(starts)), [byte_text(s) + "+" for s in starts])
    axes.set_xlim(-0.75, len(starts) - 0.25)
    axes.set_xlabel("size class (bytes per call, up to twice the label)")
    axes.set_ylabel("latency (ms)")
    axes.set_title("latency per size class (worst rank)")
    if starts:
        axes.legend()


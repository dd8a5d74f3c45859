"""The summary tables printed on stdout, one for a report and one for a trace."""
import math

# Per-rank report fields shown as table columns (the rest is listed below the table).
_REPORT_SHOWN = {"rank", "host", "intercepted_calls", "passthrough_calls", "bounded_calls", "fallback_calls",
                 "bytes_reduced", "entries_reduced", "entries_dropped", "dropped_fraction", "latency_us",
                 "deadline_us", "divergent_calls", "topology", "transports", "cut_calls", "time_in_allreduce_us",
                 "late_arrivals", "passthrough_by_reason", "intercepted_by_operation", "passthrough_by_operation"}


def percentile(values, q):
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def _ms(us):
    return "-" if us is None else f"{us / 1000:.3f}"


def _pct(part, whole):
    return f"{100 * part / whole:.4f}" if whole else "0.0000"


def _int(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _quantiles(entry, field):
    q = entry.get(field)
    return q if isinstance(q, dict) else {}


def _s(us):
    return f"{us / 1e6:.3f}"


def _time_us(entry):
    times = entry.get("time_in_allreduce_us")
    return sum(v for v in times.values() if isinstance(v, (int, float))) if isinstance(times, dict) else 0


def _late_us(entry):
    late = entry.get("late_arrivals")
    return late.get("call_wait_us", 0) if isinstance(late, dict) else 0


def byte_text(n):
    """1048576 -> '1M': the form OPTIREDUCE_* byte settings take."""
    for shift, suffix in ((30, "G"), (20, "M"), (10, "K")):
        if n and n % (1 << shift) == 0:
            return f"{n >> shift}{suffix}"
    return str(n)


def _table(header, rows):
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows)]
    # Labels left, numbers right.
    line = lambda cells: "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)  # noqa: E731
                                   for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(header)] + [line(r) for r in rows])


def report_table(report):
    ranks = report.ranks
    header = ["rank", "intercepted", "passthrough", "bounded", "fallback", "MiB", "dropped%", "lat_p50_ms",
              "lat_p99_ms", "lat_max_ms", "deadline_p50_ms", "divergent", "cut", "time_s", "late_wait_s"]
    rows = []
    for r in ranks:
        lat, dl = _quantiles(r, "latency_us"), _quantiles(r, "deadline_us")
        rows.append([r.get("rank", "?"), _int(r.get("intercepted_calls")), _int(r.get("passthrough_calls")),
                     _int(r.get("bounded_calls")), _int(r.get("fallback_calls")),
                     f"{_int(r.get('bytes_reduced')) / 2**20:.2f}",
                     _pct(_int(r.get("entries_dropped")), _int(r.get("entries_reduced"))),
                     _ms(lat.get("p50")), _ms(lat.get("p99")), _ms(lat.get("max")), _ms(dl.get("p50") or None),
                     _int(r.get("divergent_calls")), _int(r.get("cut_calls")), _s(_time_us(r)), _s(_late_us(r))])

    def total(field):
        return sum(_int(r.get(field)) for r in ranks)

    def worst(field, q):
        values = [_quantiles(r, field).get(q) for r in ranks]
        values = [v for v in values if isinstance(v, (int, float))]
        return max(values) if values else None

    rows.append(["all", total("intercepted_calls"), total("passthrough_calls"), total("bounded_calls"),
                 total("fallback_calls"), f"{total('bytes_reduced') / 2**20:.2f}",
                 _pct(total("entries_dropped"), total("entries_reduced")), _ms(worst("latency_us", "p50")),
                 _ms(worst("latency_us", "p99")), _ms(worst("latency_us", "max")),
                 _ms(worst("deadline_us", "p50") or None), total("divergent_calls"), total("cut_calls"),
                 _s(sum(_time_us(r) for r in ranks)), _s(sum(_late_us(r) for r in ranks))])
    lines = [f"optireduce report {report.path}: library {report.version}, {len(ranks)} ranks",
             "config: " + " ".join(f"{k}={v}" for k, v in report.config.items()),
             _table(header, rows),
             "(row all: sums; latency and deadline of the worst rank; cut: bounded calls a deadline closed before "
             "all data was in; late_wait_s: the wait the deadlines saved, per call how late the last of its data came "
             "that arrived after it closed)",
             _cost(ranks)]
    lines += _size_class_table(ranks) + _operations(ranks) + _reasons(ranks)
    lines += _other_fields(ranks)
    lines += [f"{k}: {v}" for k, v in report.extra.items()]
    return "\n".join(lines)


def _cost(ranks):
    dropped = sum(_int(r.get("entries_dropped")) for r in ranks)
    entries = sum(_int(r.get("entries_reduced")) for r in ranks)
    return (f"cost: deadlines saved {sum(_late_us(r) for r in ranks) / 1e6:.3f} s of waiting, cost "
            f"{_pct(dropped, entries)} % of entries")


def _known_size_classes(entry):
    classes = entry.get("size_classes")
    return isinstance(classes, list) and all(isinstance(c, dict) and isinstance(c.get("bytes_from"), int)
                                             for c in classes)


def _size_class_table(ranks):
    """Engine calls per size class: calls and cut calls summed, latency of the worst rank."""
    classes = {}
    for r in ranks:
        for c in r.get("size_classes") if _known_size_classes(r) else []:
            classes.setdefault(c["bytes_from"], []).append(c)
    if not classes:
        return []
    rows = []
    for start in sorted(classes):
        group = classes[start]
        worst = lambda q: max((_quantiles(c, "latency_us").get(q) or 0) for c in group)  # noqa: E731
        rows.append([f"{byte_text(start)}-{byte_text(2 * start)}", sum(_int(c.get("calls")) for c in group),
                     sum(_int(c.get("cut_calls")) for c in group), _ms(worst("p50")), _ms(worst("p99")),
                     _ms(worst("max"))])
    return ["", _table(["size_class", "calls", "cut", "lat_p50_ms", "lat_p99_ms", "lat_max_ms"], rows),
            "(size class: bytes per call, [from, below); calls summed over ranks, latency of the worst rank)"]


def _operations(ranks):
    """Engine calls by operation and format, passthrough calls by operation, summed over ranks."""
    engine, passed = {}, {}
    for r in ranks:
        by_operation = r.get("intercepted_by_operation")
        for op, formats in (by_operation.items() if isinstance(by_operation, dict) else []):
            for fmt, n in (formats.items() if isinstance(formats, dict) else []):
                engine[f"{op} {fmt}"] = engine.get(f"{op} {fmt}", 0) + _int(n)
        for op, n in (r.get("passthrough_by_operation") or {}).items():
            passed[op] = passed.get(op, 0) + _int(n)
    lines = []
    if engine:
        lines.append("engine calls by operation: " + (", ".join(f"{k} {n}" for k, n in sorted(engine.items()) if n) or "none"))
    if passed:
        lines.append("passthrough by operation: " + (", ".join(f"{k} {n}" for k, n in sorted(passed.items()) if n) or "none"))
    return lines


def _reasons(ranks):
    summed = {}
    for r in ranks:
        for name, n in (r.get("passthrough_by_reason") or {}).items():
            summed[name] = summed.get(name, 0) + _int(n)
    shown = " ".join(f"{name}={n}" for name, n in sorted(summed.items()) if n)
    return [f"passthrough by reason: {shown or 'none'}"] if summed else []


def _other_fields(ranks):
    """Everything the table does not show, summed (numbers) or listed (the rest) over the ranks."""
    names = []
    shown = _REPORT_SHOWN | ({"size_classes"} if all(_known_size_classes(r) for r in ranks) else set())
    for r in ranks:
        names += [k for k in r if k not in shown and k not in names]
    lines = []
    for name in names:
        values = [r[name] for r in ranks if name in r]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            lines.append(f"{name}: total {_number(sum(values))}, max {_number(max(values))}")
        elif all(isinstance(v, dict) and all(isinstance(x, (int, float)) for x in v.values()) for v in values):
            keys = sorted({k for v in values for k in v})
            summed = {k: sum(v.get(k, 0) for v in values) for k in keys}
            lines.append(f"{name}: " + (" ".join(f"{k}={_number(n)}" for k, n in summed.items()) or "none"))
        else:
            distinct = []
            for v in values:
                if v not in distinct:
                    distinct.append(v)
            lines.append(f"{name}: " + "; ".join(str(v) for v in distinct))
    transports = sorted({r.get("transports", "") for r in ranks} - {""})
    if transports:
        lines.append("transports: " + "; ".join(transports))
    return lines


def _number(v):
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def trace_table(trace):
    calls = trace.calls
    ranks = sorted({c.rank for c in calls})
    header = ["kind", "calls", "entries", "dropped", "dropped%", "lat_p50_ms", "lat_p99_ms", "lat_max_ms",
              "deadline_p50_ms", "not_ok"]
    kinds = []
    for c in calls:
        if c.kind not in kinds:
            kinds.append(c.kind)

    def row(label, group):
        entries = sum(c.entries for c in group)
        dropped = sum(c.dropped_entries for c in group)
        latency = [c.latency_us for c in group]
        deadlines = [c.deadline_scatter_us + c.deadline_gather_us for c in group
                     if c.deadline_scatter_us + c.deadline_gather_us > 0]
        return [label, len(group), entries, dropped, _pct(dropped, entries), _ms(percentile(latency, 50)),
                _ms(percentile(latency, 99)), _ms(max(latency)), _ms(percentile(deadlines, 50)),
                sum(c.status != "ok" for c in group)]

    rows = [row(k, [c for c in calls if c.kind == k]) for k in kinds] + [row("all", calls)]
    per_rank = sorted({sum(c.rank == r for c in calls) for r in ranks})
    lines = [f"optireduce trace {trace.path}: {len(calls)} calls on {len(ranks)} ranks "
             f"({'/'.join(map(str, per_rank))} per rank)",
             _table(header, rows),
             "(deadline: scatter-reduce + all-gather budget of the calls that had one)"]
    if trace.malformed_lines:
        lines.append(f"malformed lines skipped: {trace.malformed_lines}")
    return "\n".join(lines)

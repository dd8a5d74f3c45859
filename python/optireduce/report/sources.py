"""Reading what a run left: an OPTIREDUCE_REPORT JSON file or an OPTIREDUCE_TRACE text file.

Report (src/report/report.cpp): {"library", "version", "config": {...}, "ranks": [{per-rank figures}]}.
Fields this version does not know are kept, so a newer report still reads.
Trace (src/report/trace.cpp): one line per engine call per rank, appended by every rank and every
communicator to one file:
    rank sequence entries kind status deadline_scatter_us deadline_gather_us scatter_us
    gather_us latency_us dropped_entries filled_entries transformed
Columns beyond these (a newer library) are ignored; malformed lines are counted, not fatal.
"""
import dataclasses
import json

TRACE_COLUMNS = ("rank", "sequence", "entries", "kind", "status", "deadline_scatter_us", "deadline_gather_us",
                 "scatter_us", "gather_us", "latency_us", "dropped_entries", "filled_entries", "transformed")
_TEXT_COLUMNS = {"kind", "status"}
_FLOAT_COLUMNS = {"deadline_scatter_us", "deadline_gather_us", "scatter_us", "gather_us", "latency_us"}


class InputError(Exception):
    """A file that is neither a report nor a trace."""


@dataclasses.dataclass
class Report:
    path: str
    version: str
    config: dict
    ranks: list   # one dict per rank, sorted by rank
    extra: dict   # top-level fields besides library, version, config, ranks


@dataclasses.dataclass
class TraceCall:
    rank: int
    sequence: int
    entries: int
    kind: str
    status: str
    deadline_scatter_us: float
    deadline_gather_us: float
    scatter_us: float
    gather_us: float
    latency_us: float
    dropped_entries: int
    filled_entries: int
    transformed: int
    index: int = 0  # position among this rank's calls in the file (sequences restart per communicator)


@dataclasses.dataclass
class Trace:
    path: str
    calls: list
    malformed_lines: int


def load(path):
    """A Report or a Trace, by content."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as error:
        raise InputError(f"{path}: {error.strerror}") from error
    if text.lstrip().startswith("{"):
        return _report(path, text)
    return _trace(path, text)


def _report(path, text):
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: not valid JSON ({error})") from error
    ranks = data.get("ranks")
    if not isinstance(ranks, list) or not all(isinstance(r, dict) for r in ranks):
        raise InputError(f"{path}: no 'ranks' array of objects: not an OPTIREDUCE_REPORT file")
    extra = {k: v for k, v in data.items() if k not in ("library", "version", "config", "ranks")}
    return Report(path, str(data.get("version", "?")), data.get("config") or {},
                  sorted(ranks, key=lambda r: r.get("rank", 0)), extra)


def _trace(path, text):
    calls, malformed, seen = [], 0, {}
    for line in text.splitlines():
        fields = line.split()
        if not fields or line.startswith("#"):
            continue
        if len(fields) < len(TRACE_COLUMNS):
            malformed += 1
            continue
        try:
            values = {name: (raw if name in _TEXT_COLUMNS else float(raw) if name in _FLOAT_COLUMNS else int(raw))
                      for name, raw in zip(TRACE_COLUMNS, fields)}
        except ValueError:
            malformed += 1
            continue
        call = TraceCall(**values)
        call.index = seen.get(call.rank, 0)
        seen[call.rank] = call.index + 1
        calls.append(call)
    if not calls:
        raise InputError(f"{path}: neither a report (JSON) nor a trace with any call line")
    return Trace(path, calls, malformed)

"""What the library did: process counters, the last call on a communicator, per-communicator mode.

Every function works in any process: without liboptireduce loaded it returns None (or raises for
set_mode, which cannot be honoured), never crashes.
"""
import ctypes
import dataclasses
import sys

from . import _capi

KINDS = ("exact", "calibration", "bounded", "fallback", "mpi")
MODES = ("bounded", "reliable", "off")
COLLECTIVES = ("allreduce", "reduce_scatter")  # enum optireduce_collective
FORMATS = ("float32", "float16", "bfloat16")  # enum optireduce_format


@dataclasses.dataclass(frozen=True)
class ProcessStats:
    """optireduce_process_stats: counters of this process since MPI_Init."""
    intercepted_calls: int
    passthrough_calls: int
    bytes_reduced: int
    entries_reduced: int
    entries_dropped: int
    dropped_fraction: float
    engines_created: int
    engine_failures: int
    bounded_calls: int
    fallback_calls: int
    # intercepted_calls by what they computed: {"allreduce": {"float32": n, ...}, "reduce_scatter": {...}}
    intercepted_by_operation: dict

    def as_dict(self):
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class CallStats:
    """optireduce_call_stats: the last engine call on one communicator."""
    sequence: int            # call number on the communicator, from 1
    entries: int
    dropped_entries: int     # lacked a contribution or arrived nowhere
    filled_entries: int      # of those, all-gather entries this rank filled in
    dropped_fraction: float
    latency_us: float
    deadline_us: tuple       # (scatter-reduce, all-gather) budgets; 0 for exact calls
    phase_us: tuple          # what each phase took
    kind: str                # one of KINDS
    ok: bool
    divergent_calls: int     # so far on this communicator, agreed by all ranks
    fallbacks: int           # times the loss budget sent it to exact calls
    collective: str          # one of COLLECTIVES
    format: str              # one of FORMATS: the call's elements

    def as_dict(self):
        return dataclasses.asdict(self)


def _plain(value):
    return tuple(value) if isinstance(value, ctypes.Array) else value


def _name(names, index):
    return names[index] if 0 <= index < len(names) else f"unknown({index})"


def loaded():
    """True when liboptireduce is loaded in this process (normally: preloaded)."""
    return _capi.library() is not None


def version():
    """The loaded library's version ("MAJOR.MINOR.PATCH"), or None when it is not loaded."""
    lib = _capi.library()
    return lib.version().decode() if lib else None


def stats():
    """This process's ProcessStats, or None when the library is not loaded."""
    lib = _capi.library()
    if lib is None:
        return None
    raw = _capi.ProcessStatsStruct()
    if lib.get_process_stats(ctypes.byref(raw)) != 0:
        return None
    values = {f: _plain(getattr(raw, f)) for f in _capi.public_fields(_capi.ProcessStatsStruct)}
    values["intercepted_by_operation"] = {c: dict(zip(FORMATS, raw.intercepted_by_operation[i]))
                                          for i, c in enumerate(COLLECTIVES)}
    return ProcessStats(**values)


def _fortran_handle(comm):
    """comm.py2f(), or None while MPI is not initialised (Open MPI aborts a conversion then)."""
    MPI = sys.modules.get("mpi4py.MPI")
    if MPI is None or not isinstance(comm, MPI.Comm):
        raise TypeError(f"expected an mpi4py communicator, got {type(comm).__name__}")
    if not MPI.Is_initialized() or MPI.Is_finalized():
        return None
    return comm.py2f()


def last_call(comm):
    """CallStats of the last engine call on `comm` (an mpi4py communicator).

    None when the library is not loaded, not initialised (before MPI_Init or after
    MPI_Finalize), or when no call on `comm` has gone through the engine yet (every call so far
    was ineligible or passed through)."""
    handle = _fortran_handle(comm)
    lib = _capi.library()
    if lib is None or handle is None:
        return None
    if lib.comm_last_call_f is None:
        return None  # the engine library of a job without MPI: no communicators
    raw = _capi.CallStatsStruct()
    if lib.comm_last_call_f(handle, ctypes.byref(raw)) != 0:
        return None
    return call_stats_of(raw)


def call_stats_of(raw):
    """CallStats of an optireduce_call_stats (None for sequence 0: no call yet)."""
    if raw.sequence == 0:
        return None
    values = {f: _plain(getattr(raw, f)) for f in _capi.public_fields(_capi.CallStatsStruct)}
    values["kind"] = KINDS[raw.kind] if 0 <= raw.kind < len(KINDS) else f"unknown({raw.kind})"
    values["ok"] = bool(raw.ok)
    values["collective"] = _name(COLLECTIVES, raw.collective)
    values["format"] = _name(FORMATS, raw.format)
    return CallStats(**values)


class NotLoadedError(RuntimeError):
    """The request needs liboptireduce in the process and it is not there."""


def set_mode(comm, mode):
    """Collective over `comm`: its eligible calls run "bounded", "reliable" or "off" (plain MPI).

    Same as comm.Set_info with "optireduce_mode". Raises ValueError for another mode,
    NotLoadedError without the library, RuntimeError outside MPI_Init..MPI_Finalize or with the
    MPI error class on failure."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
    handle = _fortran_handle(comm)
    lib = _capi.library()
    if lib is None or lib.comm_set_mode_f is None:
        raise NotLoadedError("liboptireduce is not loaded (run with LD_PRELOAD=.../liboptireduce.so)")
    if handle is None:
        raise RuntimeError("MPI is not initialised (or already finalised)")
    rc = lib.comm_set_mode_f(handle, mode.encode())
    if rc != 0:
        raise RuntimeError(f"optireduce_comm_set_mode_f({mode!r}) failed with MPI error class {rc}")

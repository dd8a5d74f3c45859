"""The C API of include/optireduce/optireduce.h, bound with ctypes.

The library is normally preloaded, so its symbols are already in the process's global scope
(``ctypes.CDLL(None)``). A library loaded some other way (linked by an extension, or dlopen'ed
with RTLD_LOCAL) is found through /proc/self/maps and reopened with RTLD_NOLOAD, which never
loads anything new: this module must not pull liboptireduce into a process that does not use it.
"""
import ctypes
import os
import threading


class ProcessStatsStruct(ctypes.Structure):
    """optireduce_process_stats. The spare room at the end is for fields a newer library appends:
    it fills the whole struct it knows, so the buffer must be at least that large."""
    _fields_ = [("intercepted_calls", ctypes.c_uint64), ("passthrough_calls", ctypes.c_uint64),
                ("bytes_reduced", ctypes.c_uint64), ("entries_reduced", ctypes.c_uint64),
                ("entries_dropped", ctypes.c_uint64), ("dropped_fraction", ctypes.c_double),
                ("engines_created", ctypes.c_uint64), ("engine_failures", ctypes.c_uint64),
                ("bounded_calls", ctypes.c_uint64), ("fallback_calls", ctypes.c_uint64),
                # [collective][format]: allreduce, reduce_scatter x float32, float16, bfloat16
                ("intercepted_by_operation", (ctypes.c_uint64 * 3) * 2),
                ("_reserved", ctypes.c_uint64 * 32)]


class CallStatsStruct(ctypes.Structure):
    """optireduce_call_stats, with spare room as above."""
    _fields_ = [("sequence", ctypes.c_uint64), ("entries", ctypes.c_uint64),
                ("dropped_entries", ctypes.c_uint64), ("filled_entries", ctypes.c_uint64),
                ("dropped_fraction", ctypes.c_double), ("latency_us", ctypes.c_double),
                ("deadline_us", ctypes.c_double * 2), ("phase_us", ctypes.c_double * 2),
                ("kind", ctypes.c_int), ("ok", ctypes.c_int),
                ("divergent_calls", ctypes.c_uint64), ("fallbacks", ctypes.c_uint64),
                ("collective", ctypes.c_int), ("format", ctypes.c_int),
                ("_reserved", ctypes.c_uint64 * 32)]


def public_fields(struct_type):
    """The field names of a mirror, without the spare room."""
    return [name for name, _ in struct_type._fields_ if not name.startswith("_")]


class Library:
    """The bound functions of one loaded liboptireduce."""

    def __init__(self, handle, origin):
        self.origin = origin  # "global scope" or the path it was found at
        self.version = handle.optireduce_version
        self.version.argtypes = []
        self.version.restype = ctypes.c_char_p
        self.get_process_stats = handle.optireduce_get_process_stats
        self.get_process_stats.argtypes = [ctypes.POINTER(ProcessStatsStruct)]
        self.get_process_stats.restype = ctypes.c_int
        # By Fortran handle (mpi4py: comm.py2f()), so no mpi.h type is needed here. Only the preload
        # library has them (None: the engine library of a job without MPI, liboptireduce-engine.so).
        self.comm_last_call_f = getattr(handle, "optireduce_comm_last_call_f", None)
        if self.comm_last_call_f is not None:
            self.comm_last_call_f.argtypes = [ctypes.c_int, ctypes.POINTER(CallStatsStruct)]
            self.comm_last_call_f.restype = ctypes.c_int
        self.comm_set_mode_f = getattr(handle, "optireduce_comm_set_mode_f", None)
        if self.comm_set_mode_f is not None:
            self.comm_set_mode_f.argtypes = [ctypes.c_int, ctypes.c_char_p]
            self.comm_set_mode_f.restype = ctypes.c_int


def _from_global_scope():
    try:
        handle = ctypes.CDLL(None)
        handle.optireduce_get_process_stats  # noqa: B018 (the lookup is the test)
    except (OSError, AttributeError):
        return None
    return Library(handle, "global scope")


def _from_mapped_files():
    """A liboptireduce*.so mapped into the process but not in the global scope."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split(None, 5)[5].strip() for line in maps if len(line.split(None, 5)) == 6}
    except OSError:
        return None
    for path in sorted(p for p in paths if os.path.basename(p).startswith("liboptireduce")):
        try:
            handle = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
            handle.optireduce_get_process_stats  # noqa: B018
        except (OSError, AttributeError):
            continue
        return Library(handle, path)
    return None


_lock = threading.Lock()
_library = None


def library():
    """The loaded library's functions, or None when liboptireduce is not in this process.

    A found library is remembered; an absent one is looked for again on the next call (a job may
    load it late, e.g. through an extension module)."""
    global _library
    with _lock:
        if _library is None:
            _library = _from_global_scope() or _from_mapped_files()
        return _library

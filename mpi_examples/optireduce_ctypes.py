"""ctypes mirrors of the structs of include/optireduce/optireduce.h, for Python jobs.

    from optireduce_ctypes import ProcessStats, CallStats
    lib = ctypes.CDLL(None)          # the preloaded liboptireduce.so is already in the process
    stats = ProcessStats()
    lib.optireduce_get_process_stats(ctypes.byref(stats))

Each struct ends with spare room: a newer library may append fields and fills the whole struct
it knows.
"""
import ctypes


class ProcessStats(ctypes.Structure):
    """optireduce_process_stats: counters of this process since MPI_Init."""
    _fields_ = [("intercepted_calls", ctypes.c_uint64), ("passthrough_calls", ctypes.c_uint64),
                ("bytes_reduced", ctypes.c_uint64), ("entries_reduced", ctypes.c_uint64),
                ("entries_dropped", ctypes.c_uint64), ("dropped_fraction", ctypes.c_double),
                ("engines_created", ctypes.c_uint64), ("engine_failures", ctypes.c_uint64),
                ("bounded_calls", ctypes.c_uint64), ("fallback_calls", ctypes.c_uint64),
                ("_reserved", ctypes.c_uint64 * 16)]


class CallStats(ctypes.Structure):
    """optireduce_call_stats: the last engine call on one communicator."""
    _fields_ = [("sequence", ctypes.c_uint64), ("entries", ctypes.c_uint64),
                ("dropped_entries", ctypes.c_uint64), ("filled_entries", ctypes.c_uint64),
                ("dropped_fraction", ctypes.c_double), ("latency_us", ctypes.c_double),
                ("deadline_us", ctypes.c_double * 2), ("phase_us", ctypes.c_double * 2),
                ("kind", ctypes.c_int), ("ok", ctypes.c_int),
                ("divergent_calls", ctypes.c_uint64), ("fallbacks", ctypes.c_uint64),
                ("_reserved", ctypes.c_uint64 * 16)]

"""liboptireduce-engine.so through ctypes: the engine's C entry point (include/optireduce/engine.h)
for processes without MPI (a torch job launched as torchrun launches).

The library is found beside the package's install (CMake writes _where.py: the build tree's lib/,
or the install prefix's library directory), else by the dynamic loader's own search
(LD_LIBRARY_PATH, ld.so.cache). It is loaded with RTLD_LOCAL: its symbols stay out of the
process's global scope. ctypes releases the GIL for every call into it; its bootstrap callbacks
take the GIL again while they run.
"""
import ctypes
import os
import threading

FORMAT_FLOAT32, FORMAT_FLOAT16, FORMAT_BFLOAT16 = 0, 1, 2
OP_SUM = 0
OK, DECLINED, UNSUPPORTED, FAILED, INVALID = range(5)
# enum optireduce_pass_reason, in order.
PASS_REASONS = ("datatype", "op", "communicator", "arguments", "size", "mode_off", "no_engine", "engine_failed",
                "nonblocking", "device_buffer", "user_op_not_sum", "user_op_unknown", "user_op_disagreement")
PASS_DATATYPE, PASS_OP = 0, 1

FILE_NAME = "liboptireduce-engine.so"

ALLGATHER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p)
FINISH_ALLGATHER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
ALLREDUCE_SUM = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64)
RELEASE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
SPLIT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p)


class Bootstrap(ctypes.Structure):
    """optireduce_bootstrap."""
    _fields_ = [("rank", ctypes.c_int), ("ranks", ctypes.c_int), ("context", ctypes.c_void_p),
                ("allgather", ALLGATHER), ("start_allgather", ALLGATHER), ("finish_allgather", FINISH_ALLGATHER),
                ("allreduce_sum", ALLREDUCE_SUM), ("release", RELEASE), ("own_path", ctypes.c_char_p),
                ("split", SPLIT)]


def _candidates():
    here = os.path.dirname(os.path.abspath(__file__))
    paths = []
    try:
        from . import _where
        paths.append(os.path.normpath(os.path.join(here, _where.LIBRARY_DIR, FILE_NAME)))
    except ImportError:  # the source tree: no CMake-written file
        pass
    paths.append(FILE_NAME + ".0")  # the loader's search
    paths.append(FILE_NAME)
    return paths


def _bind(handle):
    c = ctypes
    signatures = {
        "optireduce_version": (c.c_char_p, []),
        "optireduce_init": (c.c_int, [c.POINTER(Bootstrap), c.c_uint32, c.POINTER(c.c_uint32), c.c_char_p, c.c_size_t]),
        "optireduce_finalize": (c.c_int, [c.POINTER(Bootstrap)]),
        "optireduce_record_passthrough": (None, [c.c_int, c.c_double]),
        "optireduce_engine_open": (c.c_void_p, [c.POINTER(Bootstrap)]),
        "optireduce_engine_close": (None, [c.c_void_p]),
        "optireduce_engine_set_mode": (c.c_int, [c.c_void_p, c.c_char_p]),
        "optireduce_engine_allreduce": (c.c_int, [c.c_void_p, c.c_void_p, c.c_void_p, c.c_uint64, c.c_int, c.c_int,
                                                  c.POINTER(c.c_int)]),
        "optireduce_engine_reduce_scatter": (c.c_int, [c.c_void_p, c.c_void_p, c.c_void_p, c.POINTER(c.c_uint64),
                                                       c.c_int, c.c_int, c.POINTER(c.c_int)]),
        "optireduce_engine_last_call": (c.c_int, [c.c_void_p, c.c_void_p]),
        "optireduce_engine_error": (c.c_size_t, [c.c_void_p, c.c_char_p, c.c_size_t]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(handle, name)
        function.restype, function.argtypes = restype, argtypes
    return handle


_lock = threading.Lock()
_library = None


def library():
    """The bound liboptireduce-engine.so; RuntimeError naming where it was looked for."""
    global _library
    with _lock:
        if _library is None:
            tried = []
            for path in _candidates():
                try:
                    _library = _bind(ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW))
                    _library.path = path
                    break
                except (OSError, AttributeError) as error:
                    tried.append(f"{path} ({error})")
            if _library is None:
                raise RuntimeError("optireduce: cannot load the engine library: " + "; ".join(tried) +
                                   " (build the target optireduce-engine, or install the project)")
        return _library


def error_of(handle):
    """optireduce_engine_error of an open handle."""
    lib = library()
    text = ctypes.create_string_buffer(1024)
    lib.optireduce_engine_error(handle, text, len(text))
    return text.value.decode(errors="replace")

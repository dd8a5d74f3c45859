"""A process group's engine in a job launched without MPI (as torchrun launches): a handle of
liboptireduce-engine.so (the engine's C entry point) over a gloo bootstrap of the group's own.

Every call into the library is made on the group's communication thread, without the GIL (ctypes
releases it); the bootstrap's callbacks take it again for their gloo collectives, which release it
while they wait. The engine is created inside the group's first call it runs (every rank is there).
Calls the engine declines (below OPTIREDUCE_MIN_BYTES, mode off, an engine that failed or could not
be made) are summed over the bootstrap's gloo group (16-bit tensors in float32, rounded once, as the
engine sums them) and counted as passed through.
"""
import ctypes
import time

import torch
import torch.distributed as dist

from .. import _capi, _engine
from ._gloo_bootstrap import GlooBootstrap
from ._serial import SerialThread
from ..stats import call_stats_of

_GLOO_OPS = {dist.ReduceOp.RedOpType.SUM: dist.ReduceOp.SUM, dist.ReduceOp.RedOpType.PRODUCT: dist.ReduceOp.PRODUCT,
             dist.ReduceOp.RedOpType.MIN: dist.ReduceOp.MIN, dist.ReduceOp.RedOpType.MAX: dist.ReduceOp.MAX,
             dist.ReduceOp.RedOpType.BAND: dist.ReduceOp.BAND, dist.ReduceOp.RedOpType.BOR: dist.ReduceOp.BOR,
             dist.ReduceOp.RedOpType.BXOR: dist.ReduceOp.BXOR}


class EngineCallFailed(RuntimeError):
    """An engine call failed on every rank of the group (the failure is agreed)."""


class EnginePath:
    name = "engine"

    def __init__(self, store, rank, size, timeout, name, describe_failure, world):
        """name: of the thread; world: this is the job's default group (optireduce_init runs over it)."""
        self.lib = _engine.library()
        self.rank, self.size, self.world = rank, size, world
        prefix = "optireduce/bootstrap"
        self.gloo = dist.ProcessGroupGloo(dist.PrefixStore(prefix, store), rank, size, timeout)
        self.bootstrap = GlooBootstrap(self.gloo, rank, size, store, prefix, timeout)
        self.thread = SerialThread(name, describe_failure)
        self.handle = None
        try:
            if world:
                self.thread.run(self._init)
            self.handle = self.lib.optireduce_engine_open(ctypes.byref(self.bootstrap.struct))
            if not self.handle:
                raise RuntimeError("optireduce: the engine library is not initialised (the default process group "
                                   "must be an optireduce one)")
        except BaseException:
            self.thread.close(0)
            raise

    def _init(self):
        error = ctypes.create_string_buffer(1024)
        rc = self.lib.optireduce_init(ctypes.byref(self.bootstrap.struct), 0, None, error, len(error))
        if rc != _engine.OK:
            why = self.bootstrap.error or error.value.decode(errors="replace") or (
                "another rank's OPTIREDUCE_* settings are not valid or differ from rank 0's (that rank says which)")
            raise RuntimeError(f"optireduce: {why}")

    # --- reductions (on the thread) --------------------------------------------------------------
    def _verdict(self, rc, reason, what, fallback):
        """True when the engine ran the call or `fallback` did it instead; False where the engine
        does not take it."""
        if rc == _engine.OK:
            return True
        if rc == _engine.UNSUPPORTED:
            return False
        if rc == _engine.DECLINED:
            start = time.perf_counter()
            fallback()
            self.lib.optireduce_record_passthrough(reason.value, 1e6 * (time.perf_counter() - start))
            return True
        if rc == _engine.FAILED:
            raise EngineCallFailed(f"{what} failed: {_engine.error_of(self.handle)}")
        raise RuntimeError(f"{what}: the engine refused its arguments (optireduce_result {rc})")

    def _gloo_sum_(self, t):
        """t <- its sum over the group by gloo, 16-bit tensors in float32 rounded once as the
        engine sums them (gloo would add them in 16 bits)."""
        work = t if t.dtype == torch.float32 else t.float()
        self.gloo.allreduce([work], self.bootstrap.allreduce_options()).wait()
        if work is not t:
            t.copy_(work)

    def sum_(self, t, fmt):
        reason = ctypes.c_int(0)
        rc = self.lib.optireduce_engine_allreduce(self.handle, t.data_ptr(), t.data_ptr(), t.numel(), fmt, _engine.OP_SUM,
                                                  ctypes.byref(reason))
        return self._verdict(rc, reason, f"allreduce of {t.numel()} {t.dtype} elements", lambda: self._gloo_sum_(t))

    def reduce_scatter_(self, flat, out, counts, fmt):
        reason = ctypes.c_int(0)
        counts_c = (ctypes.c_uint64 * len(counts))(*counts)
        rc = self.lib.optireduce_engine_reduce_scatter(self.handle, flat.data_ptr(), out.data_ptr(), counts_c, fmt,
                                                       _engine.OP_SUM, ctypes.byref(reason))

        def keep_block():
            self._gloo_sum_(flat)
            start = sum(counts[:self.rank])
            out.copy_(flat[start:start + counts[self.rank]].view_as(out))
        return self._verdict(rc, reason, f"reduce-scatter of {flat.numel()} {flat.dtype} elements", keep_block)

    def exact_(self, t, op):
        start = time.perf_counter()
        options = self.bootstrap.allreduce_options(_GLOO_OPS[op])
        self.gloo.allreduce([t], options).wait()
        # As the preload library counts: a type the engine sums is passed through for its op.
        reason = _engine.PASS_OP if t.dtype in (torch.float32, torch.float16, torch.bfloat16) else _engine.PASS_DATATYPE
        self.lib.optireduce_record_passthrough(reason, 1e6 * (time.perf_counter() - start))

    def last_call(self):
        raw = _capi.CallStatsStruct()
        if self.handle is None or self.lib.optireduce_engine_last_call(self.handle, ctypes.byref(raw)) != 0:
            return None
        return call_stats_of(raw)

    def barrier(self):
        """On the thread: every rank of the group is past its earlier calls."""
        self.bootstrap.barrier()

    # --- the end ---------------------------------------------------------------------------------
    def finalize(self, timeout):
        """On the world's thread: the report and the finalize line (collective over the job)."""
        self.bootstrap.timeout = timeout
        self.lib.optireduce_finalize(ctypes.byref(self.bootstrap.struct))

    def close_handle(self):
        handle, self.handle = self.handle, None
        if handle:
            self.lib.optireduce_engine_close(handle)

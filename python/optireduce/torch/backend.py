"""The torch.distributed backend "optireduce": gradient reductions through the OptiReduce engine,
every other collective through gloo.

    import optireduce.torch                       # registers the backend
    dist.init_process_group("optireduce", ...)    # then DDP, new_group, ... as with gloo

Where each call goes:
  allreduce (one tensor: float32, float16, bfloat16; SUM or AVG), allreduce_coalesced of such
  tensors, reduce_scatter, _reduce_scatter_base (the same dtypes and ops)
                      the group's engine, on the group's communication thread; other dtypes and
                      ops of these are reduced exactly beside it, on the same thread
  everything else     a gloo group the backend makes on the same store, as gloo would

How the engine is reached depends on the launch:
  mpirun or srun with liboptireduce.so preloaded: MPI_Allreduce on a communicator of the group's
      ranks (the preloaded library serves it); settings, report and trace are the library's.
  as torchrun launches (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; no MPI): the engine's C entry
      point in liboptireduce-engine.so, over a gloo group of its own; the report is written at
      destroy_process_group() or at exit.

A collective returns at once with a Work whose future the communication thread completes, so
backward keeps computing while the reduction runs. A failed call raises from wait() (and from a
blocking call), naming what failed.
"""
import atexit
import functools
import os
import sys
import threading
import time

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future

from .. import _capi
from . import _reductions

BACKEND = "optireduce"
# At exit: how long a group's queued work and the report's gathers may take.
SHUTDOWN_TIMEOUT_S = 60.0
RedOp = dist.ReduceOp.RedOpType
_DELEGATED = ("broadcast", "allgather", "_allgather_base", "allgather_coalesced", "gather", "scatter", "reduce",
              "alltoall", "alltoall_base", "send", "recv", "recv_anysource", "monitored_barrier")


def preloaded():
    """Whether liboptireduce.so (the preload library, with MPI) is in this process."""
    lib = _capi.library()
    return lib is not None and lib.comm_last_call_f is not None


def _wait(future, timeout):
    """True when `future` completed within `timeout` seconds (None: no limit)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not future.done():
        if deadline is not None and time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


class ProcessGroupOptiReduce(dist.ProcessGroup):
    _count = 0

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        ProcessGroupOptiReduce._count += 1
        self.number = ProcessGroupOptiReduce._count - 1  # creation order, for messages
        self._world = not dist.is_initialized()          # created by init_process_group
        self._destroyed = False
        self._staging = None
        self._gloo = dist.ProcessGroupGloo(dist.PrefixStore("optireduce/gloo", store), rank, size, timeout)
        if preloaded():
            from ._mpi_path import MpiPath
            self._path = MpiPath(store, rank, size)
        else:
            from ._engine_path import EnginePath
            self._path = EnginePath(store, rank, size, timeout, f"optireduce-group-{self.number}", self._failure,
                                    self._world)

    def getBackendName(self):
        return BACKEND

    def __repr__(self):
        return f"<optireduce process group {self.number}: rank {self.rank()} of {self.size()} over {self._path.name}>"

    def _failure(self, error):
        return RuntimeError(f"optireduce: process group {self.number} ({self.size()} ranks): {type(error).__name__}: "
                            f"{error}")

    # --- the engine's collectives ------------------------------------------------------------------
    def _submit(self, inputs, outputs, job):
        """job(host_inputs, host_outputs) on the communication thread; a Work of its future, whose
        value is `outputs`. CUDA tensors are staged through host memory (_staging)."""
        if self._destroyed:
            raise RuntimeError(f"optireduce: process group {self.number} was destroyed")
        tensors = list(inputs) + list(outputs)
        cuda = [t for t in tensors if t.is_cuda]
        if cuda and len(cuda) != len(tensors):
            raise ValueError("optireduce: a collective's tensors must all be on the CPU or all on CUDA devices")
        if not cuda:
            future = self._path.thread.submit(lambda: job(inputs, outputs) and outputs)
            return _create_work_from_future(future.then(_raise_failure))
        if self._staging is None:
            from ._staging import CudaStaging
            self._staging = CudaStaging()
        staging = self._staging
        staged_in = [staging.stage(t) for t in inputs]
        staged_out = [s for s in staged_in if any(s.tensor is o for o in outputs)]
        staged_out += [staging.stage(t, copy_in=False) for t in outputs if not any(t is s.tensor for s in staged_in)]

        def work():
            try:
                job([s.ready() for s in staged_in], [s.host for s in staged_out])
            except BaseException:
                staging.finish([], staged_in + [s for s in staged_out if s not in staged_in])
                raise
            staging.finish(staged_out, [s for s in staged_in if s not in staged_out])
            return outputs
        future = self._path.thread.submit(work, staging.future(cuda[0]))
        return _create_work_from_future(future.then(_raise_failure))

    def allreduce(self, tensors, opts=None):
        tensors = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
        opts = _allreduce_options(opts)
        if len(tensors) != 1 or not _plain_dense(tensors[0]):
            return self._gloo.allreduce(tensors, opts)  # several tensors per process, sparse: gloo's way
        op = opts.reduceOp.op

        def job(inputs, _):
            flat = _contiguous(inputs[0])
            _reductions.allreduce_(self._path, flat, op)
            _copy_back(inputs[0], flat)
            return True
        return self._submit(tensors, tensors, job)

    def allreduce_coalesced(self, tensors, opts=None):
        tensors = list(tensors)
        if not tensors or not all(_plain_dense(t) for t in tensors) or len({t.dtype for t in tensors}) != 1:
            return self._gloo.allreduce_coalesced(tensors, opts) if opts is not None else \
                self._gloo.allreduce_coalesced(tensors)
        op = (opts.reduceOp if opts is not None else dist.ReduceOp.SUM).op

        def job(inputs, _):
            flat = torch.cat([t.reshape(-1) for t in inputs])
            _reductions.allreduce_(self._path, flat, op)
            offset = 0
            for t in inputs:
                t.copy_(flat[offset:offset + t.numel()].view_as(t))
                offset += t.numel()
            return True
        return self._submit(tensors, tensors, job)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        if len(output_tensors) != 1 or len(input_tensors) != 1:
            raise ValueError("optireduce: reduce_scatter takes one output tensor and one list of inputs per process")
        out, blocks = output_tensors[0], list(input_tensors[0])
        return self._reduce_scatter(out, blocks, [t.numel() for t in blocks], _op(opts))

    def _reduce_scatter_base(self, output, input, opts=None):
        if input.numel() != output.numel() * self.size():
            raise ValueError(f"optireduce: _reduce_scatter_base needs an input of {self.size()} x the output's "
                             f"{output.numel()} elements, got {input.numel()}")
        return self._reduce_scatter(output, [input], [output.numel()] * self.size(), _op(opts))

    def _reduce_scatter(self, out, inputs, counts, op):
        if len(counts) != self.size() or counts[self.rank()] != out.numel():
            raise ValueError(f"optireduce: reduce_scatter needs {self.size()} input blocks, this rank's of the "
                             f"output's {out.numel()} elements (got {counts})")
        if any(t.dtype != out.dtype for t in inputs) or not all(_plain_dense(t) for t in inputs + [out]):
            raise ValueError("optireduce: reduce_scatter's tensors must be dense and of one dtype")

        def job(host_inputs, host_outputs):
            flat = torch.cat([t.reshape(-1) for t in host_inputs])
            block = _contiguous(host_outputs[0])
            _reductions.reduce_scatter_(self._path, block, flat, counts, self.rank(), op)
            _copy_back(host_outputs[0], block)
            return True
        return self._submit(inputs, [out], job)

    # --- the rest: gloo's -------------------------------------------------------------------------
    def barrier(self, opts=None):
        # gloo's barrier waits for the work queued before it; the engine's queue too.
        _wait(self._path.thread.submit(lambda: None), None)
        return self._gloo.barrier(opts) if opts is not None else self._gloo.barrier()

    # --- the end ----------------------------------------------------------------------------------
    def _drain(self, timeout):
        """True when the work queued so far ended within `timeout` seconds."""
        return _wait(self._path.thread.submit(lambda: None), timeout)


def _raise_failure(future):
    """then() callback: torch 1.13's Future.set_exception stores the error as the value (raised only
    by the Python object it was set on); raising it here gives the Work's future a real error,
    which DDP's reducer and Work.wait() raise."""
    value = future.value()
    if isinstance(value, BaseException):
        raise value
    return value


def _delegate(name):
    def method(self, *args, **kwargs):
        return getattr(self._gloo, name)(*args, **kwargs)
    method.__name__ = name
    method.__doc__ = f"gloo's {name}"
    return method


for _name in _DELEGATED:
    setattr(ProcessGroupOptiReduce, _name, _delegate(_name))


def _allreduce_options(opts):
    if opts is None:
        return dist.AllreduceOptions()
    if isinstance(opts, dist.ReduceOp) or isinstance(opts, RedOp):  # the (tensors, op) overload
        options = dist.AllreduceOptions()
        options.reduceOp = opts if isinstance(opts, dist.ReduceOp) else dist.ReduceOp(opts)
        return options
    return opts


def _op(opts):
    return opts.reduceOp.op if opts is not None else RedOp.SUM


def _plain_dense(t):
    return t.layout == torch.strided and (t.device.type == "cpu" or t.is_cuda)


def _contiguous(t):
    return t.reshape(-1) if t.is_contiguous() else t.contiguous().reshape(-1)


def _copy_back(t, flat):
    if flat.data_ptr() != t.data_ptr():
        t.copy_(flat.view_as(t))


# --- Registration and the end of the job -------------------------------------------------------------
_lock = threading.Lock()
_groups = []  # live groups, in creation order
_atexit_registered = False


def _create(store, rank, size, timeout):
    global _atexit_registered
    group = ProcessGroupOptiReduce(store, rank, size, timeout)
    with _lock:
        _groups.append(group)
        # After the group's path started its threads (the MPI one registers its own exit handler):
        # atexit runs the latest first, so this one runs while they still work.
        if not _atexit_registered:
            atexit.register(_at_exit)
            _atexit_registered = True
    return group


def _finish(groups, timeout):
    """Drains every group, writes the report (engine library) and closes the groups; True when
    every group's work ended within `timeout`."""
    drained = all([g._drain(timeout) for g in groups])
    world = next((g for g in groups if getattr(g._path, "world", False)), None)
    if world is not None and drained:
        _wait(world._path.thread.submit(lambda: world._path.finalize(timeout)), None)
    for g in groups:
        g._destroyed = True
        if hasattr(g._path, "close_handle"):
            _wait(g._path.thread.submit(g._path.close_handle), timeout)
            g._path.thread.close(timeout if timeout is not None else SHUTDOWN_TIMEOUT_S)
        elif drained:
            _wait(g._path.thread.submit(g._path.close), timeout)
    return drained


def finish(timeout=None):
    """Ends every optireduce process group of this process: their queued work done, the engines
    closed, the report written (jobs launched without MPI; under MPI the library writes it at
    MPI_Finalize). Collective: every rank calls it, as destroy_process_group() (which calls it)."""
    with _lock:
        groups, _groups[:] = list(_groups), []
    return _finish(groups, timeout) if groups else True


def _before_destroy(group):
    if group is None or group is dist.GroupMember.WORLD:
        finish()
    elif isinstance(group, ProcessGroupOptiReduce):
        # Its engine closes with the job's (a subgroup's destroy is not collective): no call after this.
        group._drain(None)
        group._destroyed = True


def _at_exit():
    if finish(SHUTDOWN_TIMEOUT_S):
        return
    print(f"optireduce: a process group's work was still running {SHUTDOWN_TIMEOUT_S:g} s after exit began "
          "(a peer stopped?): ending this process", file=sys.stderr, flush=True)
    sys.stderr.flush()
    os._exit(1)


def _install_destroy_hook():
    """destroy_process_group() ends this backend's groups first (torch 1.13 tells a backend
    nothing): the engines close and the report is written then."""
    import torch.distributed.distributed_c10d as c10d
    original = c10d.destroy_process_group
    if getattr(original, "_optireduce", False):
        return

    @functools.wraps(original)
    def destroy_process_group(group=None):
        _before_destroy(group)
        return original(group)
    destroy_process_group._optireduce = True
    c10d.destroy_process_group = destroy_process_group
    dist.destroy_process_group = destroy_process_group


def _install_wait_raises():
    """Work.wait() raises the error of a Work made from a future, as gloo's does: torch 1.13's
    future-backed Work (the only kind a Python backend can give DDP) waits without looking."""
    from torch._C._distributed_c10d import Work
    original = Work.wait
    if getattr(original, "_optireduce", False):
        return

    @functools.wraps(original)
    def wait(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        try:
            future = self.get_future()
        except RuntimeError:  # a Work without a future (gloo's send, recv): its wait said it all
            return result
        if future.done():
            future.value()  # raises the error, if any
        return result
    wait._optireduce = True
    Work.wait = wait


def register():
    """Registers "optireduce" with torch.distributed (once; import optireduce.torch does it)."""
    if BACKEND.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND, _create)
    _install_destroy_hook()
    _install_wait_raises()


def last_call(group=None):
    """CallStats of the last engine call of an optireduce process group (None: the default
    group), or None when none ran yet."""
    group = group if group is not None else dist.distributed_c10d._get_default_group()
    if not isinstance(group, ProcessGroupOptiReduce):
        raise TypeError(f"not an optireduce process group: {group!r}")
    return group._path.last_call()

"""float16 and bfloat16 sums over MPI as the preloaded library recognises them: 2-byte elements
(MPI.BYTE.Create_contiguous(2)) reduced with an op of MPI_Op_create whose function sums the format
(widened to float32, rounded back to nearest). The library probes the op once, the ranks agree,
and the engine serves the call in 16 bits (README, "What is intercepted"). Where the engine
declines a call (below OPTIREDUCE_MIN_BYTES, a communicator whose mode is off), the MPI reduces it
with the same op, rounding to 16 bits at each step of its reduction, as Horovod's fp16 does.

Made once per process, on the thread that makes the MPI calls.
"""
import numpy
import torch

from .. import _capi
from ._mpi import mpi

_made = {}


def served():
    """True where the preload library (liboptireduce.so, with its MPI wrappers) is in the process."""
    lib = _capi.library()
    return lib is not None and lib.comm_last_call_f is not None


def _summing(dtype):
    def function(inbuf, inoutbuf, datatype):
        a = torch.from_numpy(numpy.frombuffer(inbuf, dtype=numpy.int16).copy()).view(dtype)
        b = torch.from_numpy(numpy.frombuffer(inoutbuf, dtype=numpy.int16)).view(dtype)
        b.copy_(a.float().add_(b.float()))
    return function


def datatype_and_op(dtype):
    """(the 2-byte datatype, the op summing `dtype`) for torch.float16 or torch.bfloat16."""
    MPI = mpi()
    if "type" not in _made:
        _made["type"] = MPI.BYTE.Create_contiguous(2).Commit()
    if dtype not in _made:
        _made[dtype] = MPI.Op.Create(_summing(dtype), commute=True)
    return _made["type"], _made[dtype]


def sum_(comm, t):
    """t (a contiguous CPU float16 or bfloat16 tensor) <- its sum over comm, in place."""
    MPI = mpi()
    datatype, op = datatype_and_op(t.dtype)
    comm.Allreduce(MPI.IN_PLACE, [t.view(torch.int16).numpy(), t.numel(), datatype], op=op)


def reduce_scatter_(comm, flat, out, counts):
    """out <- this rank's block (counts[rank] elements) of the sum over comm of `flat` (contiguous
    CPU float16 or bfloat16 tensors of one dtype): MPI_Reduce_scatter with the same datatype and op."""
    datatype, op = datatype_and_op(flat.dtype)
    comm.Reduce_scatter([flat.view(torch.int16).numpy(), flat.numel(), datatype],
                        [out.view(torch.int16).numpy(), out.numel(), datatype], recvcounts=list(counts), op=op)

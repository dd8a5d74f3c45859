"""Summing one CPU tensor over a communicator in place, with the MPI datatype its dtype needs.

float32 goes as MPI_FLOAT with MPI_SUM: the call the preloaded engine serves (bounded or exact,
as configured). float16 and bfloat16, which MPI has no standard type for: where the preload
library is loaded, in 16 bits with the datatype and op it recognises (_half_mpi: the engine sums
in float32 and rounds once; a mean is divided in float32 and rounded once more); without it,
widened to float64 (MPI_DOUBLE) and rounded back once, so the sum is as exact as the result type
allows. Every other dtype goes through plain MPI: float64, integers and complex with their own
MPI datatype.
"""
import torch

from . import _half_mpi
from ._mpi import mpi

_WIDENED = (torch.float16, torch.bfloat16)


def sum_inplace(comm, tensor, divisor=None):
    """tensor <- (sum of tensor over comm) / divisor; divisor None leaves the plain sum."""
    MPI = mpi()
    if tensor.device.type != "cpu":
        raise TypeError(f"optireduce.torch reduces CPU tensors only, got one on {tensor.device}")
    if divisor is not None and not (tensor.is_floating_point() or tensor.is_complex()):
        raise TypeError(f"cannot average a {tensor.dtype} tensor")
    work = tensor.detach()
    if tensor.dtype in _WIDENED and _half_mpi.served():
        if not work.is_contiguous():
            work = work.contiguous()
        _half_mpi.sum_(comm, work)
        if divisor is not None:
            work.copy_(work.float().div_(divisor))
        if work.data_ptr() != tensor.data_ptr():
            tensor.copy_(work)
        return tensor
    if tensor.dtype in _WIDENED:
        work = work.to(torch.float64)
    elif not work.is_contiguous():
        work = work.contiguous()
    array = work.numpy()
    if work.dtype == torch.float32:
        comm.Allreduce(MPI.IN_PLACE, [array, MPI.FLOAT], op=MPI.SUM)
    else:
        # mpi4py's own numpy-typecode table (mpi4py.util.dtlib would hand out duplicated types).
        datatype = MPI._typedict.get(array.dtype.char)
        if datatype is None:
            raise TypeError(f"no MPI datatype for a {tensor.dtype} tensor")
        comm.Allreduce(MPI.IN_PLACE, [array, datatype], op=MPI.SUM)
    if divisor is not None:
        work.div_(divisor)
    if work.data_ptr() != tensor.data_ptr():
        tensor.copy_(work)
    return tensor

"""Asynchronous reduce-scatter of one tensor over an mpi4py communicator, on the comm thread: each
rank keeps its block of the sum, the first phase of an allreduce alone (ZeRO, FSDP)."""
import torch

from . import _comm_thread, _half_mpi
from ._mpi import communicator, mpi
from ._sum import sum_inplace


def _blocks(comm, tensor, counts):
    size = comm.Get_size()
    if counts is None:
        if tensor.numel() % size:
            raise ValueError(f"optireduce.torch: {tensor.numel()} elements do not split into {size} equal blocks; "
                             "pass counts")
        return [tensor.numel() // size] * size, True
    counts = [int(n) for n in counts]
    if len(counts) != size or any(n < 0 for n in counts) or sum(counts) != tensor.numel():
        raise ValueError(f"optireduce.torch: counts {counts} must give one block per rank ({size}), none negative, "
                         f"adding up to the tensor's {tensor.numel()} elements")
    return counts, len(set(counts)) == 1


def reduce_scatter_sum(comm, tensor, counts=None, divisor=None):
    """This rank's block of (the sum of `tensor` over comm) / divisor, as a new tensor; the blocks
    are `counts` (None: equal). float32 goes to MPI_Reduce_scatter_block or MPI_Reduce_scatter as
    MPI_FLOAT/MPI_SUM, float16 and bfloat16 (where the preload library is loaded) to
    MPI_Reduce_scatter with the 2-byte datatype and summing op it recognises (_half_mpi): the calls
    the preloaded engine serves; other dtypes are summed as optireduce.torch sums them
    (sum_inplace) and this rank keeps its block."""
    if tensor.device.type != "cpu":
        raise TypeError(f"optireduce.torch reduces CPU tensors only, got one on {tensor.device}")
    blocks, equal = _blocks(comm, tensor, counts)
    rank = comm.Get_rank()
    start = sum(blocks[:rank])
    if tensor.dtype in (torch.float16, torch.bfloat16) and _half_mpi.served():
        out = torch.empty(blocks[rank], dtype=tensor.dtype)
        _half_mpi.reduce_scatter_(comm, tensor.detach().contiguous().reshape(-1), out, blocks)
        if divisor is not None:
            out.copy_(out.float().div_(divisor))
        return out
    if tensor.dtype != torch.float32:
        work = tensor.detach().clone()
        sum_inplace(comm, work, divisor)
        return work.reshape(-1)[start:start + blocks[rank]].clone()
    MPI = mpi()
    send = tensor.detach().contiguous().reshape(-1).numpy()
    out = torch.empty(blocks[rank], dtype=torch.float32)
    if equal:
        comm.Reduce_scatter_block([send, MPI.FLOAT], [out.numpy(), MPI.FLOAT], op=MPI.SUM)
    else:
        comm.Reduce_scatter([send, MPI.FLOAT], [out.numpy(), MPI.FLOAT], recvcounts=blocks, op=MPI.SUM)
    if divisor is not None:
        out.div_(divisor)
    return out


def reduce_scatter_async(tensor, counts=None, comm=None, average=False):
    """Reduce-scatters a CPU tensor over `comm` (None: MPI.COMM_WORLD); returns a torch Future of
    this rank's block (counts[rank] elements of the flattened sum; counts None: equal blocks),
    completed by the communication thread. `average` divides by the ranks."""
    comm = communicator(comm)
    divisor = comm.Get_size() if average else None
    return _comm_thread.instance().submit(lambda: reduce_scatter_sum(comm, tensor, counts, divisor))

"""Asynchronous sum (or mean) of one tensor over an mpi4py communicator, on the comm thread."""
from . import _comm_thread
from ._mpi import communicator
from ._sum import sum_inplace


def allreduce_async(tensor, comm=None, average=False):
    """Reduces a CPU tensor in place over `comm` (None: MPI.COMM_WORLD); returns a torch Future
    of the tensor, completed by the communication thread. float32 goes to MPI_Allreduce as
    MPI_FLOAT/MPI_SUM (the preloaded engine's call); other dtypes through plain MPI."""
    comm = communicator(comm)
    divisor = comm.Get_size() if average else None
    return _comm_thread.instance().submit(lambda: sum_inplace(comm, tensor, divisor))

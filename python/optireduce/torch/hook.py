"""The DDP communication hook: each gradient bucket averaged through MPI_Allreduce.

    model = torch.nn.parallel.DistributedDataParallel(model)     # process group: gloo
    model.register_comm_hook(None, optireduce.torch.allreduce_hook)   # None: MPI.COMM_WORLD

The process group stays whatever DDP was given (gloo) for everything else: the parameter
broadcast at construction, buffers, the user's own collectives. Only the gradient buckets go
through MPI, so the communicator must hold the same processes as the group (COMM_WORLD under
mpirun, or a communicator of the same ranks).
"""
import torch.distributed as dist

from ._mpi import communicator
from .allreduce import allreduce_async


def allreduce_hook(state, bucket):
    """register_comm_hook's hook: state None (MPI.COMM_WORLD) or an mpi4py communicator;
    returns a torch Future of the bucket's buffer, summed over the ranks and divided by their
    number, as DDP's default hook does."""
    comm = communicator(state)
    # A communicator of another size than DDP's group would average the wrong replicas.
    if dist.is_initialized() and dist.get_world_size() != comm.Get_size():
        raise ValueError(f"the communicator has {comm.Get_size()} ranks, DDP's process group "
                         f"{dist.get_world_size()}: they must hold the same processes")
    return allreduce_async(bucket.buffer(), comm, average=True)

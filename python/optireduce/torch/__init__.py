"""PyTorch through the OptiReduce engine: a torch.distributed backend, and for jobs that keep gloo,
a DDP communication hook and gradient fusion over MPI_Allreduce.

    import optireduce.torch
    dist.init_process_group("optireduce")         # the backend (backend.py): DDP unchanged
    optireduce.torch.init_process_group()         # the same, with the rendezvous of any launch
    optireduce.torch.last_call(group)             # what the engine did in the group's last call

    model.register_comm_hook(None, optireduce.torch.allreduce_hook)   # DDP over gloo, under mpirun
    fuser = optireduce.torch.GradientFuser(model.parameters())      # loops without DDP
    fuser.allreduce()                                                # after backward
    optireduce.torch.reduce_scatter_async(flat, counts)              # this rank's block (ZeRO, FSDP)

The hook and the fuser make their MPI calls on one communication thread (see _comm_thread for MPI
thread levels and shutdown); without the preloaded library they work the same through plain MPI.
mpi4py is imported, and MPI initialised, at the first reduction that needs it, not at import.
"""
from ._comm_thread import shutdown
from .allreduce import allreduce_async
from .backend import BACKEND, ProcessGroupOptiReduce, finish, last_call, register
from .fuser import DEFAULT_BUCKET_BYTES, GradientFuser, allreduce_gradients
from .hook import allreduce_hook
from .reduce_scatter import reduce_scatter_async
from .rendezvous import init_process_group

register()

__all__ = ["BACKEND", "DEFAULT_BUCKET_BYTES", "GradientFuser", "ProcessGroupOptiReduce", "allreduce_async",
           "allreduce_gradients", "allreduce_hook", "finish", "init_process_group", "last_call", "reduce_scatter_async",
           "shutdown"]

"""PyTorch over MPI_Allreduce, served by the preloaded OptiReduce engine for float32.

    model.register_comm_hook(None, optireduce.torch.allreduce_hook)   # DDP (process group gloo)
    fuser = optireduce.torch.GradientFuser(model.parameters())      # loops without DDP
    fuser.allreduce()                                                # after backward

All MPI calls are made by one communication thread (see _comm_thread for MPI thread levels and
shutdown). Without the preloaded library everything works the same through plain MPI. mpi4py is
imported, and MPI initialised, at the first reduction, not at import.
"""
from ._comm_thread import shutdown
from .allreduce import allreduce_async
from .fuser import DEFAULT_BUCKET_BYTES, GradientFuser, allreduce_gradients
from .hook import allreduce_hook

__all__ = ["DEFAULT_BUCKET_BYTES", "GradientFuser", "allreduce_async", "allreduce_gradients", "allreduce_hook",
           "shutdown"]

"""init_process_group("optireduce") with what the launch gives: torchrun's environment, or the
ranks of an MPI job (mpirun, srun) and a store on rank 0's host told over MPI.

    import optireduce.torch
    optireduce.torch.init_process_group()          # under torchrun, optireduce.launch, mpirun or srun
"""
import os
import socket

import torch.distributed as dist

from .backend import BACKEND

# Rank and size as MPI launchers export them: Open MPI, MPICH/Hydra and PMI, Slurm.
_MPI_LAUNCHERS = (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE"),
                  ("PMIX_RANK", "PMIX_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS"))


def mpi_launch():
    """(rank, size) of an MPI launch, or None."""
    for rank, size in _MPI_LAUNCHERS:
        if rank in os.environ and size in os.environ:
            return int(os.environ[rank]), int(os.environ[size])
    return None


def init_process_group(**kwargs):
    """torch.distributed.init_process_group("optireduce", **kwargs) with the launch's rendezvous:
    env:// where RANK and WORLD_SIZE are set (torchrun, optireduce.launch); under an MPI launcher,
    its rank and size, and a TCP store at MASTER_ADDR (else rank 0's host name) and MASTER_PORT
    (else a free port rank 0 tells every rank with MPI_Bcast, through mpi4py)."""
    env = os.environ
    if "RANK" in env and "WORLD_SIZE" in env:
        return dist.init_process_group(BACKEND, **kwargs)
    launch = mpi_launch()
    if launch is None:
        raise RuntimeError("optireduce: no launch environment: neither torchrun's (RANK, WORLD_SIZE) nor an MPI "
                           "launcher's (OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK, SLURM_PROCID)")
    rank, size = launch
    host = env.get("MASTER_ADDR") or socket.gethostname()
    port = int(env["MASTER_PORT"]) if env.get("MASTER_PORT") else None
    if port is None:  # rank 0 finds a free one and tells the others
        from ._mpi import mpi
        if rank == 0:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("", 0))
                port = s.getsockname()[1]
        port = mpi().COMM_WORLD.bcast(port, root=0)
    address = (host, port)
    return dist.init_process_group(BACKEND, init_method=f"tcp://{address[0]}:{address[1]}", rank=rank,
                                   world_size=size, **kwargs)

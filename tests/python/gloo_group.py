"""torch.distributed's default group for a test job: launched by mpirun (rank and size from Open
MPI, a file store named after the job) or as torchrun launches (env://)."""
import datetime
import os
import tempfile

import torch.distributed as dist


def init(backend="gloo"):
    """(rank, size) after joining the job's `backend` group ("gloo" or "optireduce")."""
    env = os.environ
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    timeout = datetime.timedelta(seconds=100)
    if backend == "optireduce":
        import optireduce.torch  # noqa: F401 (registers the backend)
    if "RANK" in env and "WORLD_SIZE" in env:  # torchrun's environment (optireduce.launch)
        dist.init_process_group(backend, timeout=timeout)
        return dist.get_rank(), dist.get_world_size()
    rank, size = int(env["OMPI_COMM_WORLD_RANK"]), int(env["OMPI_COMM_WORLD_SIZE"])
    # A file rendezvous named after the mpirun job: no TCP port to collide with a concurrent job.
    # Job ids come back (they derive from mpirun's pid), and a file left by a job that was killed
    # would hold a finished job's keys: the launching process (every rank's parent on one host)
    # is in the name too.
    job = env.get("OMPI_MCA_ess_base_jobid", "job")
    store = os.path.join(tempfile.gettempdir(), f"optireduce-gloo-{job}-{os.getppid()}")
    dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=size, timeout=timeout)
    return rank, size

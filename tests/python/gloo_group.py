"""torch.distributed's gloo group for a job launched by mpirun (rank and size from Open MPI)."""
import datetime
import os
import tempfile

import torch.distributed as dist


def init():
    """(rank, size) after joining the job's gloo group."""
    env = os.environ
    rank, size = int(env["OMPI_COMM_WORLD_RANK"]), int(env["OMPI_COMM_WORLD_SIZE"])
    # A file rendezvous named after the mpirun job: no TCP port to collide with a concurrent job.
    # Job ids come back (they derive from mpirun's pid), and a file left by a job that was killed
    # would hold a finished job's keys: the launching process (every rank's parent on one host)
    # is in the name too.
    job = env.get("OMPI_MCA_ess_base_jobid", "job")
    store = os.path.join(tempfile.gettempdir(), f"optireduce-gloo-{job}-{os.getppid()}")
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=100))
    return rank, size

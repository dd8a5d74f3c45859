"""A process group's engine in a job launched by mpirun or srun with liboptireduce.so preloaded:
MPI_Allreduce and MPI_Reduce_scatter on a communicator of the group's ranks, which the preloaded
library runs through its engine (float32 sums of at least OPTIREDUCE_MIN_BYTES) or passes to the
MPI (everything else, counted by reason). Settings, report, trace and finalize line are the preload library's, at
MPI_Finalize. Every MPI call is made on optireduce.torch's one communication thread.
"""
from .. import _engine
from ..stats import last_call as _last_call_of_comm
from . import _comm_thread
from ._mpi import mpi

_KEY = "optireduce/mpi_rank/{}"


class MpiPath:
    name = "mpi"

    def __init__(self, store, rank, size):
        MPI = mpi()
        self.rank, self.size = rank, size
        # The group's ranks in MPI_COMM_WORLD, in the group's order (a launcher may number the
        # processes of torch.distributed otherwise than MPI does).
        world = MPI.COMM_WORLD
        store.set(_KEY.format(rank), str(world.Get_rank()))
        ranks = [int(store.get(_KEY.format(r))) for r in range(size)]
        if len(set(ranks)) != size:
            raise RuntimeError(f"optireduce: the group's processes are not distinct MPI processes (MPI ranks {ranks}): "
                               "launch every rank with mpirun or srun, or none")

        def make():
            if ranks == list(range(world.Get_size())):
                return world
            return world.Create_group(world.Get_group().Incl(ranks))
        self.comm = self.thread.submit(make).wait()

    @property
    def thread(self):
        """optireduce.torch's MPI thread (shutdown() may have started a new one)."""
        return _comm_thread.instance()

    def sum_(self, t, fmt):
        if fmt != _engine.FORMAT_FLOAT32:
            return False  # MPI has no 16-bit float sum the preloaded library takes (yet)
        MPI = mpi()
        self.comm.Allreduce(MPI.IN_PLACE, [t.numpy(), MPI.FLOAT], op=MPI.SUM)
        return True

    def reduce_scatter_(self, flat, out, counts, fmt):
        if fmt != _engine.FORMAT_FLOAT32:
            return False  # as sum_: no 16-bit float sum the preloaded library takes (yet)
        MPI = mpi()
        self.comm.Reduce_scatter([flat.numpy(), MPI.FLOAT], [out.numpy(), MPI.FLOAT], recvcounts=list(counts), op=MPI.SUM)
        return True

    def exact_(self, t, op):
        MPI = mpi()
        ops = {"SUM": MPI.SUM, "PRODUCT": MPI.PROD, "MIN": MPI.MIN, "MAX": MPI.MAX, "BAND": MPI.BAND, "BOR": MPI.BOR,
               "BXOR": MPI.BXOR}
        array = t.numpy()
        datatype = MPI._typedict.get(array.dtype.char)  # mpi4py's own numpy-typecode table
        if datatype is None:
            raise TypeError(f"no MPI datatype for a {t.dtype} tensor")
        self.comm.Allreduce(MPI.IN_PLACE, [array, datatype], op=ops[op.name])

    def last_call(self):
        return _last_call_of_comm(self.comm)

    def barrier(self):
        self.comm.Barrier()

    def close(self):
        """On the thread: frees the group's communicator (not MPI_COMM_WORLD)."""
        MPI = mpi()
        comm, self.comm = self.comm, None
        if comm is not None and comm != MPI.COMM_WORLD and not MPI.Is_finalized():
            comm.Free()

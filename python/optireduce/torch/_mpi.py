"""mpi4py, imported only when a reduction is first asked for (importing it initialises MPI)."""


def mpi():
    """The mpi4py.MPI module, with MPI initialised and not yet finalised."""
    try:
        from mpi4py import MPI
    except ImportError as error:
        raise RuntimeError(f"optireduce.torch reduces through mpi4py, which cannot be imported: {error}") from error
    if not MPI.Is_initialized():
        raise RuntimeError("MPI is not initialised (mpi4py.rc.initialize is False and MPI.Init was not called)")
    if MPI.Is_finalized():
        raise RuntimeError("MPI is already finalised")
    return MPI


def communicator(state):
    """The communicator a hook state names: None means MPI.COMM_WORLD."""
    MPI = mpi()
    if state is None:
        return MPI.COMM_WORLD
    if not isinstance(state, MPI.Intracomm):
        raise TypeError(f"expected None or an mpi4py intracommunicator, got {type(state).__name__}")
    return state

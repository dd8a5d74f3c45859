"""OptiReduce-MPI from Python: what the preloaded library did, and PyTorch integration.

    import optireduce
    optireduce.loaded()               # is liboptireduce in this process (LD_PRELOAD)?
    optireduce.version()              # the loaded library's version, or None
    optireduce.stats()                # ProcessStats of this process, or None
    optireduce.last_call(comm)        # CallStats of the last engine call on an mpi4py comm
    optireduce.set_mode(comm, "reliable")   # collective: bounded | reliable | off

PyTorch (DDP communication hook, gradient fusion for hand-written loops): optireduce.torch.
Report and trace summaries: python3 -m optireduce.report (installed as optireduce-report).
Importing this package neither imports mpi4py nor initialises MPI.
"""
from ._version import __version__
from .stats import (KINDS, MODES, CallStats, NotLoadedError, ProcessStats, last_call, loaded, set_mode, stats,
                    version)

__all__ = ["__version__", "KINDS", "MODES", "CallStats", "NotLoadedError", "ProcessStats", "last_call", "loaded",
           "set_mode", "stats", "version"]

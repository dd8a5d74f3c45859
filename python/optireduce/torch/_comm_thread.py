"""The one thread that makes every MPI call of optireduce.torch, in the order they were asked for.

Why one thread: the callers (DDP's reducer, a fuser) only enqueue and get a torch Future back, so
backward keeps computing while the bucket before is reduced; and every rank issues its
collectives in one order, the order of submission, which DDP makes the same on every rank.

MPI thread levels (MPI.Query_thread(), what mpi4py's MPI_Init_thread obtained; mpi4py asks for
MULTIPLE unless mpi4py.rc.thread_level says otherwise):
  MULTIPLE    the thread runs; other threads may call MPI at the same time.
  SERIALIZED  the thread runs; the program must not call MPI itself while a reduction is pending
              (between backward and the wait on its futures, or during a fuser's allreduce).
  FUNNELED, SINGLE  no thread: each reduction runs at once on the calling thread, which must be
              the one that initialised MPI; the future comes back completed (no overlap).

Shutdown: at interpreter exit (atexit runs before mpi4py's MPI_Finalize) or shutdown(): work not
started is failed with an error, the running reduction gets `timeout` seconds; if it is still
inside MPI after that (a peer is gone), the job is aborted rather than left hanging in
MPI_Finalize.
"""
import atexit
import sys
import threading

import torch

from ._mpi import mpi
from ._serial import SerialThread, complete

SHUTDOWN_TIMEOUT_S = 10.0


def _failure(error):
    return RuntimeError(f"optireduce.torch: reduction failed: {type(error).__name__}: {error}")


class CommThread:
    def __init__(self):
        MPI = mpi()
        self.level = MPI.Query_thread()
        self.threaded = self.level >= MPI.THREAD_SERIALIZED
        self._closed = False
        self._serial = SerialThread("optireduce-comm", _failure) if self.threaded else None

    def submit(self, work, future=None):
        """A torch Future of work(), which makes MPI calls; its exception goes into the future."""
        future = torch.futures.Future() if future is None else future
        if self._serial is not None:
            return self._serial.submit(work, future)
        if self._closed:
            future.set_exception(RuntimeError("optireduce.torch is shut down"))
            return future
        if not mpi().Is_thread_main():
            future.set_exception(RuntimeError(
                f"MPI thread level {self.level} allows MPI calls only on the thread that initialised MPI"))
            return future
        complete(work, future, _failure)
        return future

    def close(self, timeout=SHUTDOWN_TIMEOUT_S):
        """Stops the thread; True when it ended within `timeout` seconds."""
        self._closed = True
        return self._serial is None or self._serial.close(timeout)


_lock = threading.Lock()
_instance = None
_atexit_registered = False


def instance():
    """The process's communication thread, started on first use."""
    global _instance, _atexit_registered
    with _lock:
        if _instance is None:
            _instance = CommThread()
            if not _atexit_registered:
                atexit.register(_at_exit)
                _atexit_registered = True
        return _instance


def shutdown(timeout=SHUTDOWN_TIMEOUT_S):
    """Stops the communication thread (a later reduction starts a new one). False if a reduction
    was still inside MPI after `timeout` seconds."""
    global _instance
    with _lock:
        thread, _instance = _instance, None
    return thread is None or thread.close(timeout)


def _at_exit():
    if shutdown():
        return
    print(f"optireduce.torch: a reduction was still inside MPI {SHUTDOWN_TIMEOUT_S:g} s after exit began "
          "(a peer stopped?): aborting the job", file=sys.stderr, flush=True)
    try:
        from mpi4py import MPI
        if MPI.Is_initialized() and not MPI.Is_finalized():
            MPI.COMM_WORLD.Abort(1)
    except Exception:  # noqa: BLE001 (nothing more can be done at exit)
        pass

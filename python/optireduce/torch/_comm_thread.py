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
import queue
import sys
import threading

import torch

from ._mpi import mpi

SHUTDOWN_TIMEOUT_S = 10.0


class CommThread:
    def __init__(self):
        MPI = mpi()
        self.level = MPI.Query_thread()
        self.threaded = self.level >= MPI.THREAD_SERIALIZED
        self._queue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self._thread = None
        if self.threaded:
            # Daemon: a non-daemon thread is joined before atexit handlers run, so the
            # interpreter would wait for it forever.
            self._thread = threading.Thread(target=self._serve, name="optireduce-comm", daemon=True)
            self._thread.start()

    def submit(self, work):
        """A torch Future of work(), which makes MPI calls; its exception goes into the future."""
        future = torch.futures.Future()
        with self._lock:
            if self._closed:
                future.set_exception(RuntimeError("optireduce.torch is shut down"))
                return future
            if self.threaded:
                self._queue.put((work, future))
                return future
        if not mpi().Is_thread_main():
            future.set_exception(RuntimeError(
                f"MPI thread level {self.level} allows MPI calls only on the thread that initialised MPI"))
            return future
        _complete(work, future)
        return future

    def _serve(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            _complete(*item)

    def close(self, timeout=SHUTDOWN_TIMEOUT_S):
        """Stops the thread; True when it ended within `timeout` seconds."""
        with self._lock:
            if self._closed:
                return self._thread is None or not self._thread.is_alive()
            self._closed = True
        if self._thread is None:
            return True
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[1].set_exception(RuntimeError("optireduce.torch shut down before this reduction started"))
        self._queue.put(None)
        self._thread.join(timeout)
        return not self._thread.is_alive()


def _complete(work, future):
    try:
        result = work()
    except BaseException as error:  # noqa: B902 (it belongs to the waiter)
        # One error type, named for where it happened: DDP's C++ side shows only the message.
        failure = RuntimeError(f"optireduce.torch: reduction failed: {type(error).__name__}: {error}")
        failure.__cause__ = error
        future.set_exception(failure)
    else:
        future.set_result(result)


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

"""A thread that runs work items one at a time, in submission order, each completing a torch Future.

The callers (DDP's reducer, a fuser, a process group's collectives) only enqueue and get a Future
back, so backward keeps computing while the item before is reduced; and every rank issues its
collectives in one order, the order of submission, which DDP makes the same on every rank.

The thread is a daemon: a non-daemon thread is joined before atexit handlers run, so the
interpreter would wait for it forever. close() fails what has not started and gives the running
item `timeout` seconds.
"""
import queue
import threading

import torch


class SerialThread:
    def __init__(self, name, describe_failure):
        """describe_failure(error) -> the RuntimeError a failed item's future carries."""
        self._describe_failure = describe_failure
        self._queue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def submit(self, work, future=None):
        """`future` (a new torch Future by default) completed with work()'s result or failure."""
        future = torch.futures.Future() if future is None else future
        with self._lock:
            if self._closed:
                future.set_exception(RuntimeError(f"{self._thread.name} is shut down"))
                return future
            self._queue.put((work, future))
        return future

    def run(self, work):
        """work() on the thread, waited for; its exception is raised here."""
        return self.submit(work).wait()

    def on_thread(self):
        return threading.current_thread() is self._thread

    def _serve(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            complete(*item, self._describe_failure)

    def close(self, timeout):
        """Stops the thread; True when it ended within `timeout` seconds."""
        with self._lock:
            if self._closed:
                return not self._thread.is_alive()
            self._closed = True
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[1].set_exception(RuntimeError(f"{self._thread.name} shut down before this work started"))
        self._queue.put(None)
        if not self.on_thread():
            self._thread.join(timeout)
        return not self._thread.is_alive()


def complete(work, future, describe_failure):
    try:
        result = work()
    except BaseException as error:  # noqa: B902 (it belongs to the waiter)
        # One error type, named for where it happened: DDP's C++ side shows only the message.
        failure = describe_failure(error)
        failure.__cause__ = error
        future.set_exception(failure)
    else:
        future.set_result(result)

"""The engine's bootstrap (include/optireduce/engine.h) over a gloo group of its own.

The engine calls these from inside its own calls, on the group's communication thread (ctypes
takes the GIL for each; every wait below is a gloo wait, which releases it). The gloo group is
used by that thread alone, so its collectives run in the same order on every rank; the process
group's delegated collectives use another one. A callback never raises: it returns non-zero and
keeps the error, which the engine turns into a failed call.

It splits (the engine's three-stage call asks for one group per slice): each group is a
GlooBootstrap of its own over a gloo group made on the job's store (_gloo_split), handed to the
engine as a context number, kept here until the engine releases it. Calls on a split group run on
the same thread as the parent's. A split that cannot form fails on every rank within
OPTIREDUCE_WATCHDOG_MS (_gloo_split), and the engine keeps the flat call.
"""
import ctypes
import datetime
import sys

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import AllgatherOptions

from .. import _engine
from . import _gloo_split


def _view(address, dtype, count):
    """A tensor over `count` elements at `address` (memory the engine owns)."""
    itemsize = torch.empty(0, dtype=dtype).element_size()
    if count == 0:
        return torch.empty(0, dtype=dtype)
    raw = (ctypes.c_uint8 * (count * itemsize)).from_address(address)
    return torch.frombuffer(raw, dtype=dtype, count=count)


class GlooBootstrap:
    def __init__(self, gloo, rank, size, store, prefix, group_timeout, own_path="gloo", context=None, release=None):
        """gloo: the group's gloo group, made on `store` (the job's) under `prefix`; group_timeout (a
        timedelta): the groups split from this one are made with it. context and release: what the
        struct carries (a split group's number and its parent's release; none for a group's own)."""
        self.gloo, self.rank, self.size = gloo, rank, size
        self.store, self.prefix, self.group_timeout = store, prefix, group_timeout
        self.timeout = None    # seconds for each collective; None: the gloo group's own
        self.error = None      # the first callback failure, for the message of the call it failed
        self.split_error = None  # why the last split that failed failed, on every rank alike
        self._pending = None   # (work, outputs, destination, bytes) of a started all-gather
        self._splits = 0       # splits so far (collective: the same count on every rank)
        self._children = {}    # context number -> GlooBootstrap of a split group the engine holds
        # The callback objects must outlive every use of the struct.
        self._allgather = _engine.ALLGATHER(self._cb_allgather)
        self._start = _engine.ALLGATHER(self._cb_start)
        self._finish = _engine.FINISH_ALLGATHER(self._cb_finish)
        self._sum = _engine.ALLREDUCE_SUM(self._cb_sum)
        self._split = _engine.SPLIT(self._cb_split)
        self._release = _engine.RELEASE(self._cb_release)
        self.struct = _engine.Bootstrap(rank, size, context, self._allgather, self._start, self._finish, self._sum,
                                        release if release is not None else _engine.RELEASE(), own_path.encode(),
                                        self._split)
        self._own_path = own_path

    # --- collectives the backend also uses itself (on the same thread) ----------------------------
    def _options(self, options):
        if self.timeout is not None:
            options.timeout = datetime.timedelta(seconds=self.timeout)
        return options

    def allreduce_options(self, op=dist.ReduceOp.SUM):
        options = self._options(dist.AllreduceOptions())
        options.reduceOp = op
        return options

    def barrier(self):
        """Every rank of the group is here (an all-gather of one byte)."""
        source = torch.zeros(1, dtype=torch.uint8)
        self.gloo.allgather([[torch.empty_like(source) for _ in range(self.size)]], [source],
                            self._options(AllgatherOptions())).wait()

    # --- the callbacks ---------------------------------------------------------------------------
    def _fail(self, what, error):
        if self.error is None:
            self.error = f"gloo {what} failed: {type(error).__name__}: {error}"
        return 1

    def _start_gather(self, mine, nbytes):
        source = _view(mine, torch.uint8, nbytes).clone() if nbytes else torch.zeros(1, dtype=torch.uint8)
        outputs = [torch.empty_like(source) for _ in range(self.size)]
        return self.gloo.allgather([outputs], [source], self._options(AllgatherOptions())), outputs

    @staticmethod
    def _land(outputs, destination, nbytes):
        if nbytes:
            _view(destination, torch.uint8, nbytes * len(outputs)).copy_(torch.cat(outputs))

    def _cb_allgather(self, _context, mine, nbytes, destination):
        try:
            work, outputs = self._start_gather(mine, nbytes)
            work.wait()
            self._land(outputs, destination, nbytes)
            return 0
        except BaseException as error:  # noqa: B902 (never raise through C)
            return self._fail("all-gather", error)

    def _cb_start(self, _context, mine, nbytes, destination):
        try:
            work, outputs = self._start_gather(mine, nbytes)
            self._pending = (work, outputs, destination, nbytes)
            return 0
        except BaseException as error:  # noqa: B902
            return self._fail("all-gather", error)

    def _cb_finish(self, _context):
        pending, self._pending = self._pending, None
        if pending is None:
            return 0
        try:
            work, outputs, destination, nbytes = pending
            work.wait()
            self._land(outputs, destination, nbytes)
            return 0
        except BaseException as error:  # noqa: B902
            return self._fail("all-gather", error)

    def _cb_sum(self, _context, source, destination, count):
        try:
            out = _view(destination, torch.float32, count)
            if source != destination:
                out.copy_(_view(source, torch.float32, count))
            if count:
                self.gloo.allreduce([out], self.allreduce_options()).wait()
            return 0
        except BaseException as error:  # noqa: B902
            return self._fail("allreduce", error)

    def _cb_split(self, _context, color, key, out):
        """out <- the bootstrap of this rank's group (ranks 0 for color < 0). Fails on every rank
        alike where any rank's part failed (_gloo_split); rank 0 prints the one line saying why."""
        try:
            count, self._splits = self._splits, self._splits + 1
            bound = min(self.group_timeout, datetime.timedelta(seconds=_gloo_split.watchdog_seconds()))
            made, failures = _gloo_split.split(self.gloo, self.rank, self.size, self._options(AllgatherOptions()),
                                               self.store, self.prefix, count, color, key, bound)
            target = ctypes.cast(out, ctypes.POINTER(_engine.Bootstrap))
            target[0] = _engine.Bootstrap()
            if failures:
                self.split_error = "the split for the three-stage call failed on " + ", ".join(
                    f"rank {r} ({why})" for r, why in failures) + "; every rank keeps the flat call"
                if self.rank == 0:
                    print(f"optireduce: {self.split_error}", file=sys.stderr, flush=True)
                return 1
            if made is None:
                return 0
            gloo, rank, size, prefix = made
            number = max(self._children, default=0) + 1
            child = GlooBootstrap(gloo, rank, size, self.store, prefix, self.group_timeout, self._own_path, number,
                                  self._release)
            child.timeout = self.group_timeout.total_seconds()  # its collectives: as the parent's
            self._children[number] = child
            target[0] = child.struct
            return 0
        except BaseException as error:  # noqa: B902 (never raise through C)
            # The parent's own collectives failed: the engine's agreement over it fails as well.
            self._fail(f"split (color {color})", error)
            print(f"optireduce: rank {self.rank}: {self.error} (this group's calls stay flat)", file=sys.stderr, flush=True)
            return 1

    def _cb_release(self, context):
        """The engine is done with the split group numbered `context`."""
        self._children.pop(context, None)

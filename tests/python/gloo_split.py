#!/usr/bin/python3
"""The torch backend's bootstrap splits (python/optireduce/torch/_gloo_split.py), called as the
engine calls it: through the C struct's split callback, the groups it returns used through their
own callbacks, then released. At 4 ranks launched as torchrun launches (optireduce.launch):

  - colors 0, 1, 0, -1 with keys -rank: rank 3 gets no group (ranks 0); color 0 is ranks 2, 0 in
    that order (by key), color 1 rank 1 alone; each group's all-gather (both forms) and exact sum
    give its members' values in its order; a group split again works (keys of its own);
  - releasing a group drops it from its parent;
  - the store keeps nothing of any split: after 12 more splits and releases its key count is
    what it was before the first.

Rank 0 prints one line per check; exit 0, 1 on a failed check, 77 without torch.
"""
import ctypes
import datetime
import sys

try:
    import torch
    import torch.distributed as dist
except ImportError as error:
    print(f"SKIP: torch not importable by {sys.executable}: {error}", file=sys.stderr)
    sys.exit(77)

from checks import Checks
from optireduce import _engine
from optireduce.torch._gloo_bootstrap import GlooBootstrap

TIMEOUT = datetime.timedelta(seconds=60)


def split(parent, color, key):
    """(rc, struct) of the split callback, called as the engine calls it."""
    out = _engine.Bootstrap()
    rc = parent.struct.split(parent.struct.context, color, key, ctypes.addressof(out))
    return rc, out


def gathered(b, value):
    """The all-gather of an int64 through `b`'s callbacks: both the blocking and the split form."""
    mine = ctypes.c_int64(value)
    all_ = (ctypes.c_int64 * b.ranks)()
    assert b.allgather(b.context, ctypes.addressof(mine), 8, ctypes.addressof(all_)) == 0
    started = (ctypes.c_int64 * b.ranks)()
    assert b.start_allgather(b.context, ctypes.addressof(mine), 8, ctypes.addressof(started)) == 0
    assert b.finish_allgather(b.context) == 0
    return list(all_), list(started)


def summed(b, values):
    data = (ctypes.c_float * len(values))(*values)
    assert b.allreduce_sum(b.context, ctypes.addressof(data), ctypes.addressof(data), len(values)) == 0
    return list(data)


def main():
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank, size = dist.get_rank(), dist.get_world_size()
    c = Checks("gloo_split", rank)
    if size != 4:
        c.check(False, f"needs 4 ranks, has {size}")
        return 1
    store = dist.distributed_c10d._get_default_store()
    prefix = "test/bootstrap"
    gloo = dist.ProcessGroupGloo(dist.PrefixStore(prefix, store), rank, size, TIMEOUT)
    parent = GlooBootstrap(gloo, rank, size, store, prefix, TIMEOUT)
    parent.barrier()
    keys_before = store.num_keys()
    parent.barrier()

    color = [0, 1, 0, -1][rank]
    rc, out = split(parent, color, -rank)
    order = {0: [2, 0], 1: [1]}.get(color, [])
    c.check(rc == 0, f"split returned {rc} ({parent.error})")
    c.check(out.ranks == len(order) and (not order or out.rank == order.index(rank)),
            f"colors 0,1,0,-1 by key -rank: color {color} is rank {out.rank} of {out.ranks}, expected position in {order}")
    if order:
        blocking, started = gathered(out, 100 + rank)
        want = [100 + r for r in order]
        c.check(blocking == want and started == want, f"the group's all-gathers give {blocking} and {started}, expected {want}")
        sums = summed(out, [rank + 1.0, 0.5])
        want_sums = [float(sum(r + 1 for r in order)), 0.5 * len(order)]
        c.check(sums == want_sums, f"the group's sum gives {sums}, expected {want_sums}")
        rc2, inner = split(parent._children[out.context], 7, 0)
        c.check(rc2 == 0 and inner.ranks == len(order), f"a split of a split: rc {rc2}, {inner.ranks} ranks")
        if rc2 == 0 and inner.ranks:
            inner_all, _ = gathered(inner, 200 + rank)
            c.check(inner_all == [200 + r for r in order], f"the split of a split gathers {inner_all}")
            inner.release(inner.context)
        out.release(out.context)
    c.check(not parent._children, f"release: {len(parent._children)} groups left")

    codes = []
    for n in range(12):
        color = -1 if n % 4 == 3 and rank == 0 else (rank + n) % 3
        rc, out = split(parent, color, rank)
        codes.append(rc)
        if out.ranks:
            out.release(out.context)
    c.check(codes == [0] * 12, f"12 more splits return {codes}")
    parent.barrier()
    keys_after = store.num_keys()
    c.check(keys_after == keys_before, f"13 splits leave nothing in the store: {keys_before} keys before, "
            f"{keys_after} after")
    parent.barrier()
    dist.destroy_process_group()
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())

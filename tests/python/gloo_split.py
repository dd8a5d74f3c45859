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

With the argument `failure` (OPTIREDUCE_WATCHDOG_MS short, the groups' timeout torch's default of
30 minutes): rank 1's part of a split (colors 0, 1, 0, 1) raises before it joins its group (the
test replaces _gloo_split._connect there). Rank 3, its group's other member, gives up within
OPTIREDUCE_WATCHDOG_MS, not the groups' timeout (before that bound this test ran into its own
timeout); every rank's split fails alike, with no group, and the same reason naming rank 1; the
store keeps nothing of it; the parent's sum and all-gather still give the exact values, and the
next split works.

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
from optireduce.torch import _gloo_split
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


def refused(*_):
    raise RuntimeError("test: rank 1 does not join")


def failure(c, parent, rank, store):
    """A split whose group cannot form on rank 1 fails on every rank, then everything still works."""
    keys_before = store.num_keys()
    if rank == 1:
        _gloo_split._connect = refused
    rc, out = split(parent, rank % 2, rank)
    c.check(rc != 0 and out.ranks == 0 and not parent._children,
            f"the split fails with no group on every rank: rc {rc}, {out.ranks} ranks, {len(parent._children)} kept")
    why = getattr(parent, "split_error", None) or ""
    c.check("rank 1 (RuntimeError: test: rank 1 does not join)" in why and "flat" in why,
            f"the reason names rank 1 and why: {why!r}")
    _gloo_split._connect = dist.ProcessGroupGloo
    parent.barrier()
    c.check(store.num_keys() == keys_before, f"the failed split leaves nothing in the store: {keys_before} keys "
            f"before, {store.num_keys()} after")
    sums = summed(parent.struct, [rank + 1.0, 0.25])
    c.check(sums == [10.0, 1.0], f"the parent's sum after it gives {sums}, expected [10.0, 1.0]")
    all_, _ = gathered(parent.struct, 300 + rank)
    c.check(all_ == [300, 301, 302, 303], f"the parent's all-gather after it gives {all_}")
    rc, out = split(parent, rank % 2, rank)
    c.check(rc == 0 and out.ranks == 2 and out.rank == rank // 2,
            f"the next split: rc {rc}, rank {out.rank} of {out.ranks}")
    if out.ranks:
        pair, _ = gathered(out, 400 + rank)
        c.check(pair == [400 + rank % 2, 402 + rank % 2], f"its group gathers {pair}")
        out.release(out.context)


def main():
    global TIMEOUT
    if sys.argv[1:] == ["failure"]:
        TIMEOUT = datetime.timedelta(minutes=30)  # torch's default: the bound must come from elsewhere
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
    if sys.argv[1:] == ["failure"]:
        failure(c, parent, rank, store)
        parent.barrier()
        dist.destroy_process_group()
        return 1 if c.failures else 0

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

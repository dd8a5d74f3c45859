"""The gloo group of one split of a GlooBootstrap (the engine's optional `split` callback,
include/optireduce/engine.h): the ranks that pass the same color >= 0 get a gloo group of their
own over the job's store, ordered by key and then by rank, as MPI_Comm_split orders them. The
engine splits a group's bootstrap once per slice when it makes a three-stage call
(OPTIREDUCE_HIERARCHY; src/hierarchy/host_tiers.hpp).

Keys: a split is collective over the parent group, so every rank counts it alike; the new group
meets under `<parent prefix>/split/<count>/<color>`, so no two groups' keys meet, however many
splits the job makes. Once every member is connected (a barrier over the new group), each member
deletes the keys it wrote there: the store keeps nothing of a split.

A split that cannot form holds no one for long: the new group's connection and first barrier are
bounded by OPTIREDUCE_WATCHDOG_MS (what bounds the engine's own connecting; the parent group's
timeout where that is shorter), and the outcome is agreed over the parent group: each rank then
tells the others whether its part worked and why not (an all-gather), and where any rank's failed
every rank drops its new group (and deletes its keys) and fails the split, so the engine keeps the
flat call on every rank.
"""
import os
import time

import torch
import torch.distributed as dist

# What the agreement carries of a rank's failure (bytes of its text).
_REASON_BYTES = 240
# defaults::kWatchdogMs (src/config/defaults.hpp): OPTIREDUCE_WATCHDOG_MS where it is unset.
_WATCHDOG_MS_DEFAULT = 600000


class _RecordingStore(dist.Store):
    """A store that passes everything on and remembers the keys this rank set or added. Its waits
    (a get waits for its key) are bounded by `bound` (a timedelta), not by the job's store's own
    timeout, which the group's connection would otherwise wait out."""

    def __init__(self, inner, bound):
        super().__init__()
        self.inner, self.keys, self.bound = inner, [], bound

    def _wrote(self, key):
        if key not in self.keys:
            self.keys.append(key)

    def set(self, key, value):
        self._wrote(key)
        return self.inner.set(key, value)

    def add(self, key, value):
        self._wrote(key)
        return self.inner.add(key, value)

    def compare_set(self, key, expected, desired):
        self._wrote(key)
        return self.inner.compare_set(key, expected, desired)

    def get(self, key):
        self.inner.wait([key], self.bound)
        return self.inner.get(key)

    def wait(self, keys, timeout=None):
        return self.inner.wait(keys, self.bound if timeout is None else min(timeout, self.bound))

    def check(self, keys):
        return self.inner.check(keys)

    def delete_key(self, key):
        return self.inner.delete_key(key)

    def num_keys(self):
        return self.inner.num_keys()

    def set_timeout(self, timeout):
        return self.inner.set_timeout(timeout)

    def forget(self):
        """Deletes every key recorded; False where the store cannot delete keys (they stay)."""
        done = True
        for key in self.keys:
            try:
                self.inner.delete_key(key)
            except RuntimeError:  # a store without deleteKey
                done = False
        self.keys = []
        return done


def members(colors_keys, color):
    """The parent ranks of `color`'s group in its order (by key, then by parent rank)."""
    return [r for _, r in sorted((k, r) for r, (c, k) in enumerate(colors_keys) if c == color)]


def watchdog_seconds():
    """OPTIREDUCE_WATCHDOG_MS in seconds (optireduce_init has checked it on every rank)."""
    value = os.environ.get("OPTIREDUCE_WATCHDOG_MS", "")
    return (int(value) if value.isdigit() and int(value) > 0 else _WATCHDOG_MS_DEFAULT) / 1000.0


def _connect(store, rank, size, timeout):
    """The new group's gloo group (a test replaces it to make one rank's split fail)."""
    return dist.ProcessGroupGloo(store, rank, size, timeout)


def _join(store, group_prefix, ranks, rank, bound):
    """This rank's gloo group among `ranks`, every member connected within `bound` (a timedelta)."""
    recording = _RecordingStore(dist.PrefixStore(group_prefix, store), bound)
    start = time.monotonic()
    try:
        gloo = _connect(recording, ranks.index(rank), len(ranks), bound)
        barrier = dist.BarrierOptions()
        barrier.timeout = bound
        gloo.barrier(barrier).wait()
        return gloo
    except Exception as failure:  # noqa: B902
        if time.monotonic() - start < bound.total_seconds():
            raise
        raise TimeoutError(f"its group did not form within {bound.total_seconds():g} s (OPTIREDUCE_WATCHDOG_MS): "
                           f"{failure}") from failure
    finally:
        # After the barrier every member has read every key; after a failure the group is dropped.
        recording.forget()


def _agree(parent_gloo, size, options, error):
    """Collective over the parent: [(rank, why)] of every rank whose part failed (`error`: this
    rank's text, "" where it worked), the same list on every rank."""
    text = error.encode(errors="replace")[:_REASON_BYTES - 1]
    mine = torch.zeros(_REASON_BYTES, dtype=torch.uint8)
    mine[0] = 1 if error else 0
    if text:
        mine[1:1 + len(text)] = torch.tensor(list(text), dtype=torch.uint8)
    gathered = [torch.empty_like(mine) for _ in range(size)]
    parent_gloo.allgather([gathered], [mine], options).wait()
    return [(r, bytes(t[1:].tolist()).rstrip(b"\0").decode(errors="replace"))
            for r, t in enumerate(gathered) if int(t[0])]


def split(parent_gloo, rank, size, options, store, prefix, count, color, key, bound):
    """Collective over the parent group (`parent_gloo`, this rank `rank` of `size`; `options` for
    its all-gathers): (made, failures). made: (gloo group, rank in it, its size, its prefix), or
    None for color < 0 and wherever the split failed. failures: [(parent rank, why)] of the ranks
    whose part failed, the same on every rank (empty: it worked everywhere). `store` is the job's
    store, `prefix` the parent's prefix in it, `count` the parent's splits so far; `bound` (a
    timedelta) bounds the new group's connection and first barrier."""
    mine = torch.tensor([color, key], dtype=torch.int64)
    gathered = [torch.empty_like(mine) for _ in range(size)]
    parent_gloo.allgather([gathered], [mine], options).wait()
    made, error = None, ""
    if color >= 0:
        ranks = members([tuple(int(v) for v in t.tolist()) for t in gathered], color)
        group_prefix = f"{prefix}/split/{count}/{color}"
        try:
            made = (_join(store, group_prefix, ranks, rank, bound), ranks.index(rank), len(ranks), group_prefix)
        except Exception as failure:  # noqa: B902 (agreed below, whatever it was)
            error = f"{type(failure).__name__}: {failure}".replace("\n", " ")
    failures = _agree(parent_gloo, size, options, error)
    return (None if failures else made), failures

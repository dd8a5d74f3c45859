"""The gloo group of one split of a GlooBootstrap (the engine's optional `split` callback,
include/optireduce/engine.h): the ranks that pass the same color >= 0 get a gloo group of their
own over the job's store, ordered by key and then by rank, as MPI_Comm_split orders them. The
engine splits a group's bootstrap once per slice when it makes a three-stage call
(OPTIREDUCE_HIERARCHY; src/hierarchy/host_tiers.hpp).

Keys: a split is collective over the parent group, so every rank counts it alike; the new group
meets under `<parent prefix>/split/<count>/<color>`, so no two groups' keys meet, however many
splits the job makes. Once every member is connected (a barrier over the new group), each member
deletes the keys it wrote there: the store keeps nothing of a split. Every wait is bounded by the
parent group's timeout.
"""
import torch
import torch.distributed as dist


class _RecordingStore(dist.Store):
    """A store that passes everything on and remembers the keys this rank set or added."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.keys = inner, []

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
        return self.inner.get(key)

    def wait(self, keys, *timeout):
        return self.inner.wait(keys, *timeout)

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


def split(parent_gloo, rank, size, options, store, prefix, count, color, key, timeout):
    """Collective over the parent group (`parent_gloo`, this rank `rank` of `size`; `options` for
    its all-gather): (gloo group, rank in it, its size, its prefix), or None for color < 0.
    `store` is the job's store, `prefix` the parent's prefix in it, `count` the parent's splits
    so far; `timeout` (a timedelta) bounds the new group's connection and barrier."""
    mine = torch.tensor([color, key], dtype=torch.int64)
    gathered = [torch.empty_like(mine) for _ in range(size)]
    parent_gloo.allgather([gathered], [mine], options).wait()
    if color < 0:
        return None
    ranks = members([tuple(int(v) for v in t.tolist()) for t in gathered], color)
    group_prefix = f"{prefix}/split/{count}/{color}"
    recording = _RecordingStore(dist.PrefixStore(group_prefix, store))
    gloo = dist.ProcessGroupGloo(recording, ranks.index(rank), len(ranks), timeout)
    # Every member connected, so every key was read: each deletes its own.
    barrier = dist.BarrierOptions()
    barrier.timeout = timeout
    gloo.barrier(barrier).wait()
    recording.forget()
    return gloo, ranks.index(rank), len(ranks), group_prefix

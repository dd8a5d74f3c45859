"""Gradient fusion for training loops without DDP: few large reductions instead of one per tensor.

    fuser = optireduce.torch.GradientFuser(model.parameters())    # buffers allocated once
    for x, y in batches:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        fuser.allreduce()            # every gradient averaged over MPI.COMM_WORLD
        optimizer.step()

Gradients are copied into flat buckets of one dtype each, in parameter order, up to
`bucket_bytes` (a tensor larger than that gets a bucket of its own). Each bucket is handed to the
communication thread as soon as it is packed, so packing the next overlaps reducing this one.
float32 buckets are the MPI_FLOAT/MPI_SUM calls the preloaded engine serves; the engine takes
only calls of at least OPTIREDUCE_MIN_BYTES (1 MiB by default), so keep bucket_bytes above that.
`pack()`, `buckets` and `unpack()` are there for reducing the buckets some other way.
"""
import torch

from ._mpi import communicator
from .allreduce import allreduce_async

DEFAULT_BUCKET_BYTES = 25 << 20  # DDP's default bucket cap


class _Bucket:
    def __init__(self, params):
        self.params = params
        self.sizes = [p.numel() for p in params]
        self.flat = torch.zeros(sum(self.sizes), dtype=params[0].dtype)

    def pack(self):
        offset = 0
        for p, n in zip(self.params, self.sizes):
            if p.grad is None:  # still contributes, as zeros, so every rank reduces the same buffer
                self.flat[offset:offset + n].zero_()
            else:
                self.flat[offset:offset + n].copy_(p.grad.reshape(-1))
            offset += n

    def unpack(self, scale):
        offset = 0
        for p, n in zip(self.params, self.sizes):
            view = self.flat[offset:offset + n].view_as(p)
            if p.grad is None:
                p.grad = view.clone()
            else:
                p.grad.copy_(view)
            if scale is not None:
                p.grad.mul_(scale)
            offset += n


class GradientFuser:
    """Averages (or sums) the gradients of `params` over an mpi4py communicator."""

    def __init__(self, params, comm=None, bucket_bytes=DEFAULT_BUCKET_BYTES, average=True):
        self.params = [p for p in params if p.requires_grad]
        if not self.params:
            raise ValueError("no parameter requires a gradient")
        if bucket_bytes < 1:
            raise ValueError(f"bucket_bytes must be positive, got {bucket_bytes}")
        for p in self.params:
            if p.device.type != "cpu":
                raise TypeError(f"optireduce.torch reduces CPU tensors only, got one on {p.device}")
        self._comm = comm
        self.average = average
        self._buckets = self._assign(bucket_bytes)

    def _assign(self, bucket_bytes):
        # One open bucket per dtype, so parameter order is kept within each dtype.
        closed, open_, used = [], {}, {}
        for p in self.params:
            nbytes = p.numel() * p.element_size()
            members = open_.setdefault(p.dtype, [])
            if members and used[p.dtype] + nbytes > bucket_bytes:
                closed.append(_Bucket(members))
                members = open_[p.dtype] = []
                used[p.dtype] = 0
            members.append(p)
            used[p.dtype] = used.get(p.dtype, 0) + nbytes
        return closed + [_Bucket(members) for members in open_.values()]

    @property
    def buckets(self):
        """The flat bucket tensors, in reduction order."""
        return [b.flat for b in self._buckets]

    def pack(self):
        """Copies the gradients into the buckets."""
        for b in self._buckets:
            b.pack()

    def unpack(self, scale=None):
        """Copies the buckets back into the gradients, times `scale` when given."""
        for b in self._buckets:
            b.unpack(scale)

    def allreduce(self):
        """Packs, reduces every bucket over the communicator (the mean when averaging), waits,
        unpacks."""
        comm = communicator(self._comm)
        futures = []
        for b in self._buckets:
            b.pack()
            futures.append(allreduce_async(b.flat, comm, average=self.average))
        for f in futures:
            f.wait()
        self.unpack()


def allreduce_gradients(params, comm=None, bucket_bytes=DEFAULT_BUCKET_BYTES, average=True):
    """One-off GradientFuser(params, ...).allreduce(); a module's parameters are taken from it.
    A loop should keep a GradientFuser instead, which allocates its buckets once."""
    if isinstance(params, torch.nn.Module):
        params = params.parameters()
    GradientFuser(params, comm, bucket_bytes, average).allreduce()

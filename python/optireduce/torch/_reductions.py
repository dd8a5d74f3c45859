"""The process group's reductions, whichever way its engine is reached (_engine_path: the engine's
C entry point over a gloo bootstrap; _mpi_path: MPI_Allreduce, which the preloaded library serves).

A path offers:
  sum_(t, format)      t (contiguous CPU, of `format`) <- its sum over the group, in place, through
                       the engine (or, where the engine declines the call, the path's own exact sum);
                       False, with nothing done on any rank, where the engine does not take that format
  reduce_scatter_(flat, out, counts, format)   the same for a reduce-scatter; False where not taken
  exact_(t, op)        t <- its reduction by `op` (a RedOpType), exactly, outside the engine
  size                 ranks of the group

Float sums (SUM, AVG) of float32, float16 and bfloat16 go to the engine; a 16-bit sum the engine
does not take in its own format runs in float32 and is rounded back once. Everything else is
reduced exactly. Every function runs on the path's communication thread.
"""
import torch
import torch.distributed as dist

from .. import _engine

RedOp = dist.ReduceOp.RedOpType
FORMATS = {torch.float32: _engine.FORMAT_FLOAT32, torch.float16: _engine.FORMAT_FLOAT16,
           torch.bfloat16: _engine.FORMAT_BFLOAT16}
SUMS = (RedOp.SUM, RedOp.AVG)


def _through_float32(path, t):
    """The float32 copy of a 16-bit tensor, summed (the engine or the path's exact sum)."""
    work = t.float()
    path.sum_(work, _engine.FORMAT_FLOAT32)
    return work


def allreduce_(path, t, op):
    """t <- its reduction over the group by `op`."""
    if t.dtype in FORMATS and op in SUMS:
        work = t if path.sum_(t, FORMATS[t.dtype]) else _through_float32(path, t)
        if op == RedOp.AVG:
            work.div_(path.size)
        if work is not t:
            t.copy_(work)
        return t
    if op == RedOp.AVG:
        if not (t.is_floating_point() or t.is_complex()):
            raise TypeError(f"cannot average a {t.dtype} tensor (AVG needs floating point)")
        path.exact_(t, RedOp.SUM)
        return t.div_(path.size)
    if t.dtype in (torch.float16, torch.bfloat16):
        # 16-bit types beside the engine (MPI has none): in float32, rounded once (MIN and MAX exact).
        work = t.float()
        path.exact_(work, op)
        return t.copy_(work)
    path.exact_(t, op)
    return t


def reduce_scatter_(path, out, flat, counts, rank, op):
    """out <- block `rank` (counts[rank] elements) of the reduction of `flat` over the group."""
    if flat.dtype in FORMATS and op in SUMS and path.reduce_scatter_(flat, out, counts, FORMATS[flat.dtype]):
        if op == RedOp.AVG:
            out.div_(path.size)
        return out
    # Where the path has no reduce-scatter of this format (the preloaded library's MPI path and
    # 16-bit elements): an allreduce of which this rank keeps its block.
    allreduce_(path, flat, op)
    start = sum(counts[:rank])
    return out.copy_(flat[start:start + counts[rank]].view_as(out))

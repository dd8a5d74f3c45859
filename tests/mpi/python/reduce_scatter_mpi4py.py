#!/usr/bin/python3
"""mpi4py + numpy under the preloaded library: comm.Reduce_scatter_block and comm.Reduce_scatter
of float32 arrays (in place is not offered by mpi4py's buffer forms with counts, so not in place),
and, where torch is importable, optireduce.torch.reduce_scatter_async (float32, and bfloat16
through the 2-byte datatype and summing op the library recognises).

Every block is checked against a float64 numpy reference, and the library's counters
(intercepted_by_operation) and last call (its collective and format) prove the engine served each
float32 call. Exits 77 (ctest SKIP) when mpi4py or numpy is missing.
"""
import sys

try:
    import numpy as np
    from mpi4py import MPI
except ImportError as error:
    print(f"SKIP: mpi4py/numpy not importable by {sys.executable}: {error}", file=sys.stderr)
    sys.exit(77)

import optireduce  # noqa: E402

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()


def fail(message):
    print(f"reduce_scatter_mpi4py [rank {rank}] FAIL: {message}", file=sys.stderr, flush=True)
    comm.Abort(1)


def pattern(count, r):
    """Integer-valued, so the float32 sum is exact and must equal the float64 reference."""
    return ((np.arange(count, dtype=np.int64) * 7 + r * 13) % 1000 - 500).astype(np.float32)


def scatters():
    return optireduce.stats().intercepted_by_operation["reduce_scatter"]["float32"]


def check(what, counts, run):
    """run(send) returns this rank's block; it must be the reference and one engine reduce-scatter."""
    total = sum(counts)
    start = sum(counts[:rank])
    want = sum(pattern(total, r).astype(np.float64) for r in range(size))[start:start + counts[rank]]
    before = scatters()
    got = run(pattern(total, rank))
    if scatters() != before + 1:
        fail(f"{what}: {scatters() - before} float32 reduce-scatters through the engine, expected 1")
    last = optireduce.last_call(comm)
    if last is None or (last.collective, last.format, last.entries) != ("reduce_scatter", "float32", counts[rank]):
        fail(f"{what}: the last call is {last}, expected a float32 reduce-scatter of {counts[rank]} entries")
    if not np.array_equal(got.astype(np.float64), want):
        fail(f"{what}: {np.count_nonzero(got != want)} of {got.size} elements differ from the float64 reference")


def block_form(n):
    def run(send):
        out = np.full(n, np.nan, dtype=np.float32)
        comm.Reduce_scatter_block([send, MPI.FLOAT], [out, MPI.FLOAT], op=MPI.SUM)
        return out
    return run


def counts_form(counts):
    def run(send):
        out = np.full(counts[rank], np.nan, dtype=np.float32)
        comm.Reduce_scatter([send, MPI.FLOAT], [out, MPI.FLOAT], recvcounts=counts, op=MPI.SUM)
        return out
    return run


def check_torch():
    try:
        import torch
        import optireduce.torch as ot
    except ImportError:
        return 0
    counts = [5000 + 11 * r for r in range(size)]
    flat = torch.from_numpy(pattern(sum(counts), rank))
    start = sum(counts[:rank])
    want = sum(pattern(sum(counts), r).astype(np.float64) for r in range(size))[start:start + counts[rank]]
    before = scatters()
    got = ot.reduce_scatter_async(flat, counts).wait()
    if scatters() != before + 1 or not np.array_equal(got.double().numpy(), want):
        fail(f"optireduce.torch.reduce_scatter_async of float32: served {scatters() - before}, right "
             f"{np.array_equal(got.double().numpy(), want)}")
    # bfloat16 holds the inputs rounded (integers past 256 lose bits): the reference sums those
    # (exactly: small integers), rounds the sum once to bfloat16 as the engine does, then the mean
    # once more (divided in float32).
    rounded = [torch.from_numpy(pattern(sum(counts), r)).to(torch.bfloat16).double() for r in range(size)]
    block16 = sum(rounded)[start:start + counts[rank]].to(torch.bfloat16)
    want16 = block16.float().div_(size).to(torch.bfloat16)
    before16 = optireduce.stats().intercepted_by_operation["reduce_scatter"]["bfloat16"]
    got = ot.reduce_scatter_async(flat.to(torch.bfloat16), counts, average=True).wait()
    served16 = optireduce.stats().intercepted_by_operation["reduce_scatter"]["bfloat16"] - before16
    if got.dtype != torch.bfloat16 or not torch.equal(got, want16) or served16 != 1:
        fail(f"optireduce.torch.reduce_scatter_async of bfloat16 with average: right {torch.equal(got, want16)}, "
             f"{served16} bfloat16 reduce-scatters through the engine (expected 1)")
    ot.shutdown()
    return 2


def main():
    if not optireduce.loaded():
        fail("liboptireduce.so was not preloaded")
    calls = 0
    for n in (1, 1009, 65537):
        check(f"Reduce_scatter_block of {n} per rank", [n] * size, block_form(n))
        calls += 1
    for counts in ([3000 + 1001 * r for r in range(size)], [0 if r == 1 else 70001 for r in range(size)]):
        check(f"Reduce_scatter of {counts}", counts, counts_form(counts))
        calls += 1
    calls += check_torch()
    comm.Barrier()
    if rank == 0:
        print(f"reduce_scatter_mpi4py: PASS, {calls} calls on {size} ranks")


main()

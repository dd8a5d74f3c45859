#!/usr/bin/python3
"""mpi4py + numpy under the preloaded library: comm.Allreduce on float32 arrays, in place and not.

mpi4py loads libmpi at import time and initialises MPI through MPI_Init_thread, which the
preloaded library wraps. Checks every float32 result against a float64 numpy reference and reads
the library's counters through the optireduce package (PYTHONPATH=<build>/python) to prove the
engine ran. Exits 77 (ctest SKIP) when mpi4py or numpy is missing.
"""
import sys

try:
    import numpy as np
    from mpi4py import MPI
except ImportError as error:
    print(f"SKIP: mpi4py/numpy not importable by {sys.executable}: {error} "
          "(install python3-mpi4py and python3-numpy)", file=sys.stderr)
    sys.exit(77)

import optireduce  # noqa: E402

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()


def fail(message):
    print(f"allreduce_mpi4py [rank {rank}] FAIL: {message}", file=sys.stderr, flush=True)
    comm.Abort(1)


if not optireduce.loaded():
    fail("liboptireduce.so was not preloaded")


def stats():
    return optireduce.stats()


def pattern(count, r):
    """Integer-valued, so the float32 sum is exact and must equal the float64 reference."""
    return ((np.arange(count, dtype=np.int64) * 7 + r * 13) % 1000 - 500).astype(np.float32)


def check_call(what, count, run):
    before = stats()
    run()
    after = stats()
    if after.intercepted_calls - before.intercepted_calls != 1:
        fail(f"{what}: intercepted_calls grew by {after.intercepted_calls - before.intercepted_calls}, expected 1 "
             "(engine bypassed)")
    if after.bytes_reduced - before.bytes_reduced != 4 * count:
        fail(f"{what}: bytes_reduced grew by {after.bytes_reduced - before.bytes_reduced}, expected {4 * count}")


def main():
    calls = 0
    for count in (1, 1009, 65537, 262147):
        reference = sum(pattern(count, r).astype(np.float64) for r in range(size))
        mine = pattern(count, rank)

        result = np.full(count, np.nan, dtype=np.float32)
        check_call(f"Allreduce count {count}", count, lambda: comm.Allreduce(mine, result, op=MPI.SUM))
        if not np.array_equal(result.astype(np.float64), reference):
            fail(f"Allreduce count {count}: wrong result at {np.flatnonzero(result != reference)[:5]}")
        if not np.array_equal(mine, pattern(count, rank)):
            fail(f"Allreduce count {count}: the send buffer changed")

        inplace = pattern(count, rank)
        check_call(f"Allreduce IN_PLACE count {count}", count, lambda: comm.Allreduce(MPI.IN_PLACE, inplace, op=MPI.SUM))
        if not np.array_equal(inplace.astype(np.float64), reference):
            fail(f"Allreduce IN_PLACE count {count}: wrong result at {np.flatnonzero(inplace != reference)[:5]}")
        calls += 2

    # Non-integer data: close to a float64 sum of the same float32 inputs, identical on all ranks.
    rng = np.random.default_rng(1234 + rank)
    mine = rng.standard_normal(100003).astype(np.float32)
    result = np.empty_like(mine)
    check_call("Allreduce random data", mine.size, lambda: comm.Allreduce(mine, result, op=MPI.SUM))
    reference = np.empty(mine.size, dtype=np.float64)
    magnitude = np.empty(mine.size, dtype=np.float64)
    comm.Allreduce(mine.astype(np.float64), reference, op=MPI.SUM)  # MPI_DOUBLE: passes through
    comm.Allreduce(np.abs(mine).astype(np.float64), magnitude, op=MPI.SUM)
    error = np.abs(result.astype(np.float64) - reference)
    if not np.all(error <= 1e-5 * magnitude):
        worst = int(np.argmax(error / np.maximum(magnitude, 1e-30)))
        fail(f"Allreduce random data: element {worst} is {result[worst]}, float64 reference {reference[worst]}")
    everyone = comm.allgather(result.tobytes())
    if any(other != everyone[0] for other in everyone):
        fail("Allreduce random data: results differ between ranks")
    calls += 1

    comm.Barrier()
    if rank == 0:
        print(f"allreduce_mpi4py: PASS, {calls} calls checked on {size} ranks", flush=True)


main()

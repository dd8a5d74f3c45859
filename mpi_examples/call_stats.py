#!/usr/bin/python3
"""What happened to each reduction: OptiReduce's C API from Python, through the optireduce package.

The preloaded library exports a small C API (include/optireduce/optireduce.h); the optireduce
package (python/, docs/python.md) reads it with ctypes. After every MPI_Allreduce a job can ask
what the engine did with the call (exact while calibrating, or bounded by deadlines; how many
entries of the result were estimated rather than received; the deadlines; the latency), and at
any time the counters of the whole process.

Run (4 ranks, bounded mode, small calls routed through the engine, 1 % of chunks dropped on
purpose so that something happens):

    mpirun -np 4 -x PYTHONPATH=$PWD/build/python -x LD_PRELOAD=$PWD/build/lib/liboptireduce.so \
        -x OPTIREDUCE_MIN_BYTES=0 -x OPTIREDUCE_FAULT_DROP=0.01 \
        /usr/bin/python3 mpi_examples/call_stats.py --calls 30

Rank 0 prints one line per call, then the process totals:

    call  kind         entries  dropped  filled  scatter/gather deadline ms  latency ms
       1  calibration    32768        0       0        -       -                 0.41
     ...
      21  bounded        32768      512       0     0.93    0.61                 0.57
    process: 30 intercepted, 10 bounded, 0 fallback, 1536 of 983040 entries dropped (fraction 0.0016)

Options: --calls N (default 30), --count N floats per call (default 32768).
Exits 77 when mpi4py or numpy cannot be imported, 1 when the library is not preloaded, 2 when the
optireduce package is not importable.
"""
import argparse
import sys

try:
    import numpy as np
    from mpi4py import MPI
except ImportError as error:
    print(f"SKIP: mpi4py/numpy not importable by {sys.executable}: {error} "
          "(install python3-mpi4py and python3-numpy)", file=sys.stderr)
    sys.exit(77)

try:
    import optireduce
except ImportError as error:
    print(f"call_stats: the optireduce package is not importable ({error}): run with PYTHONPATH=<build>/python "
          "or install it (docs/python.md)", file=sys.stderr)
    sys.exit(2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--count", type=int, default=32768)
    args = parser.parse_args()

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if not optireduce.loaded():
        if rank == 0:
            print("liboptireduce.so is not preloaded: run under mpirun -x LD_PRELOAD=.../liboptireduce.so",
                  file=sys.stderr)
        sys.exit(1)

    if rank == 0:
        print("call  kind         entries  dropped  filled  scatter/gather deadline ms  latency ms")
    rng = np.random.default_rng(rank)
    gradient = np.empty(args.count, dtype=np.float32)
    for _ in range(args.calls):
        local = rng.standard_normal(args.count).astype(np.float32)
        comm.Allreduce(local, gradient, op=MPI.SUM)
        call = optireduce.last_call(comm)
        if call is None:
            # The call was not eligible (below OPTIREDUCE_MIN_BYTES, or mode off): plain MPI ran it.
            if rank == 0:
                print("   -  (not through the engine: raise the count or lower OPTIREDUCE_MIN_BYTES)")
            continue
        if not call.ok:
            sys.exit(f"rank {rank}: engine call {call.sequence} failed")
        if rank == 0:
            deadlines = ("       -       -" if call.kind != "bounded" else
                         f"{call.deadline_us[0] / 1000:8.2f}{call.deadline_us[1] / 1000:8.2f}")
            print(f"{call.sequence:4d}  {call.kind:<11s}{call.entries:8d}{call.dropped_entries:9d}"
                  f"{call.filled_entries:8d}  {deadlines}{'':17s}{call.latency_us / 1000:6.2f}")

    stats = optireduce.stats()
    comm.Barrier()
    if rank == 0:
        print(f"process: {stats.intercepted_calls} intercepted, {stats.bounded_calls} bounded, "
              f"{stats.fallback_calls} fallback, {stats.entries_dropped} of {stats.entries_reduced} entries dropped "
              f"(fraction {stats.dropped_fraction:.4f})")
        print(f"call_stats: done, {size} ranks")


main()

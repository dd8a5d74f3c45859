#!/usr/bin/python3
"""Per-communicator mode with mpi4py: bounded gradients, exact metrics, untouched logging.

Not every float sum of a training job is a gradient. Gradients tolerate a few entries estimated
instead of received (that is what bounded mode trades for time), but metrics (loss sums,
accuracy counts), batch-norm statistics or gradient norms want exact sums. OptiReduce lets each
communicator choose, collectively, like any MPI_Comm_set_info:

    info = MPI.Info.Create()
    info.Set("optireduce_mode", "reliable")     # or "bounded", "off"
    metrics_comm.Set_info(info)

or through the optireduce package (python/, docs/python.md): optireduce.set_mode(comm, "off").

This job reduces three things every step on three communicators:
  - gradients on MPI.COMM_WORLD, in the job's mode (OPTIREDUCE_MODE, bounded by default);
  - metrics on a dup set to "reliable" with MPI_Comm_set_info: always exact;
  - logging counters on a dup set to "off" with optireduce.set_mode: plain MPI_Allreduce, never
    the engine.
and, on rank 0, reports what the library did on each (optireduce.last_call).

Run:

    mpirun -np 3 -x PYTHONPATH=$PWD/build/python -x LD_PRELOAD=$PWD/build/lib/liboptireduce.so \
        -x OPTIREDUCE_MIN_BYTES=0 /usr/bin/python3 mpi_examples/comm_mode_mpi4py.py

(OPTIREDUCE_MIN_BYTES=0 routes the small metric sums through the engine too; by default only
calls of 1 MiB and more are.) Add -x OPTIREDUCE_FAULT_DROP=0.05 to watch bounded gradients lose
and compensate chunks while the metrics stay exact. Rank 0 prints, for example:

    gradients (bounded): 30 calls: 20 calibration, 10 bounded, dropped fraction 0.0000, worst relative error 1.1e-07
    metrics (reliable): 30 calls, all exact, identical on every rank (30 through the engine)
    logging (off): 30 calls passed through to MPI
    comm_mode_mpi4py: done, 3 ranks

Exits 77 when mpi4py or numpy cannot be imported, 1 when the library is not preloaded or a check
fails, 2 when the optireduce package is not importable.
"""
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
    print(f"comm_mode_mpi4py: the optireduce package is not importable ({error}): run with "
          "PYTHONPATH=<build>/python or install it (docs/python.md)", file=sys.stderr)
    sys.exit(2)

KINDS = optireduce.KINDS
STEPS = 30
GRADIENT = 300_000   # floats: 1.2 MB, above the default OPTIREDUCE_MIN_BYTES
METRICS = 1_000
LOGGING = 16

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()


def fail(message):
    print(f"comm_mode_mpi4py [rank {rank}] FAIL: {message}", file=sys.stderr, flush=True)
    comm.Abort(1)


if not optireduce.loaded():
    if rank == 0:
        print("liboptireduce.so is not preloaded: run under mpirun -x LD_PRELOAD=.../liboptireduce.so",
              file=sys.stderr)
    sys.exit(1)


def sequence(c):
    """Number of the last engine call on c (0: none yet)."""
    call = optireduce.last_call(c)
    return call.sequence if call else 0


def passthrough_calls():
    return optireduce.stats().passthrough_calls


def main():
    # Metrics: exact, chosen with the standard MPI mechanism (collective over the communicator).
    metrics_comm = comm.Dup()
    info = MPI.Info.Create()
    info.Set("optireduce_mode", "reliable")
    metrics_comm.Set_info(info)
    info.Free()
    # Logging: never through the engine, chosen with the C API (also collective).
    logging_comm = comm.Dup()
    optireduce.set_mode(logging_comm, "off")

    rng = np.random.default_rng(1234 + rank)
    kinds = {k: 0 for k in KINDS}
    dropped = entries = 0
    worst_error = 0.0
    metrics_in_engine = 0
    for step in range(STEPS):
        # Gradients: bounded (in the job's mode); compare with an exact float64 reference.
        grad = rng.standard_normal(GRADIENT).astype(np.float32)
        summed = np.empty_like(grad)
        comm.Allreduce(grad, summed, op=MPI.SUM)
        call = optireduce.last_call(comm)
        if call:
            if not call.ok:
                fail(f"gradient step {step}: the engine reports failure")
            kinds[call.kind] += 1
            dropped += call.dropped_entries
            entries += call.entries
        exact = np.empty(GRADIENT, dtype=np.float64)
        comm.Allreduce(grad.astype(np.float64), exact, op=MPI.SUM)  # MPI_DOUBLE: never the engine
        error = float(np.sqrt(np.mean((summed - exact) ** 2) / np.mean(exact ** 2)))
        worst_error = max(worst_error, error)
        # What bounded mode promises: the error is explained by the entries it reports dropped
        # (each one estimated by scaling or filled in). For independent zero-mean data the
        # relative RMS error stays below about sqrt(N - 1) * sqrt(dropped fraction); 3 leaves room.
        # 1e-5 covers float32 rounding against the float64 reference.
        if call and error > 3 * np.sqrt(call.dropped_fraction) + 1e-5:
            fail(f"gradient step {step}: relative error {error:.4g} with only {call.dropped_fraction:.4f} dropped")

        # Metrics: integer-valued counts, so an exact float32 sum equals the float64 one.
        metrics = rng.integers(0, 100, METRICS).astype(np.float32)
        total = np.empty_like(metrics)
        before = sequence(metrics_comm)
        metrics_comm.Allreduce(metrics, total, op=MPI.SUM)
        call = optireduce.last_call(metrics_comm)
        if call and call.sequence != before:
            metrics_in_engine += 1
            if call.kind != "exact" or call.dropped_entries:
                fail(f"metrics step {step}: a reliable communicator ran a {call.kind} call "
                     f"with {call.dropped_entries} entries dropped")
        reference = np.empty(METRICS, dtype=np.float64)
        metrics_comm.Allreduce(metrics.astype(np.float64), reference, op=MPI.SUM)
        if not np.array_equal(total.astype(np.float64), reference):
            fail(f"metrics step {step}: the sum is not exact")
        if any(other != total.tobytes() for other in metrics_comm.allgather(total.tobytes())):
            fail(f"metrics step {step}: ranks hold different sums")

        # Logging: passes through to MPI, the engine never sees it.
        counters = np.ones(LOGGING, dtype=np.float32)
        before_pass = passthrough_calls()
        logging_comm.Allreduce(MPI.IN_PLACE, counters, op=MPI.SUM)
        if passthrough_calls() != before_pass + 1 or sequence(logging_comm) != 0:
            fail(f"logging step {step}: the call did not pass through")
        if not np.all(counters == size):
            fail(f"logging step {step}: wrong sum")

    comm.Barrier()
    if rank == 0:
        mode = "bounded" if kinds["calibration"] + kinds["bounded"] + kinds["fallback"] else "exact"
        ran = sum(kinds.values())
        fallback = f", {kinds['fallback']} fallback" if kinds["fallback"] else ""
        print(f"gradients ({mode}): {ran} calls: {kinds['calibration']} calibration, {kinds['bounded']} bounded"
              f"{fallback}, dropped fraction {dropped / entries if entries else 0:.4f}, "
              f"worst relative error {worst_error:.3g}")
        print(f"metrics (reliable): {STEPS} calls, all exact, identical on every rank "
              f"({metrics_in_engine} through the engine)")
        print(f"logging (off): {STEPS} calls passed through to MPI")
        print(f"comm_mode_mpi4py: done, {size} ranks", flush=True)
    metrics_comm.Free()
    logging_comm.Free()


main()

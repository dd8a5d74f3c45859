#!/usr/bin/python3
"""The "optireduce" process group at 3 ranks, launched by mpirun with the library preloaded or as
torchrun launches (python3 -m optireduce.launch): where each collective goes, its value, its Work
and future, its errors, subgroups.

    backend_group.py routing     every dtype x op of allreduce, reduce_scatter, _reduce_scatter_base,
                                 allreduce_coalesced: values against a float64 reference, and whether
                                 the engine served it (the process counters, call for call); the
                                 collectives gloo serves; futures and Works; errors raised in the
                                 caller; a subgroup with an engine of its own
    backend_group.py failure     an engine call a late rank makes fail (OPTIREDUCE_WATCHDOG_MS): it
                                 raises on every rank, naming what failed, and the group's later
                                 calls are still right (declined, summed by gloo); it ends without
                                 destroy_process_group (report_at_exit.py checks the report)

Run routing with OPTIREDUCE_MODE=reliable OPTIREDUCE_MIN_BYTES=4096 (calls of 1024 floats and more
go through the engine, smaller ones pass). Rank 0 prints one line per check; exit 0, 1 on a failed
check, 77 without torch.
"""
import os
import sys
import time
import warnings

try:
    import torch
    import torch.distributed as dist
except ImportError as error:
    print(f"SKIP: torch not importable by {sys.executable}: {error}", file=sys.stderr)
    sys.exit(77)

import gloo_group
from checks import Checks
import optireduce
import optireduce.torch

BIG, SMALL = 4096, 16  # elements: above and below OPTIREDUCE_MIN_BYTES=4096 bytes for every format
RedOp = dist.ReduceOp


class Counters:
    """(intercepted, passed through) since the last look."""

    def __init__(self):
        self.last = optireduce.stats()

    def delta(self):
        now = optireduce.stats()
        d = (now.intercepted_calls - self.last.intercepted_calls, now.passthrough_calls - self.last.passthrough_calls)
        self.last = now
        return d


def data(rank, n, dtype):
    """Small integers (exact in every dtype and any summation order), different per rank."""
    values = (torch.arange(n, dtype=torch.float64) * (rank + 1) + 3 * rank) % 17 - 8
    return values.to(dtype)


def reference(size, n, op, dtype=torch.float32):
    """The exact result; AVG as the backend defines it: the exact sum divided in float32 (in the
    tensor's own type for types the engine does not sum)."""
    stack = torch.stack([data(r, n, torch.float64) for r in range(size)])
    divided = torch.float32 if dtype in (torch.float32, torch.float16, torch.bfloat16) else dtype
    return {"SUM": stack.sum(0), "AVG": (stack.sum(0).to(divided) / size).double(), "MAX": stack.max(0).values,
            "MIN": stack.min(0).values, "PRODUCT": stack.prod(0)}[op]


def check_allreduce(c, counters, rank, size):
    engine_types = (torch.float32, torch.float16, torch.bfloat16)
    for dtype in engine_types + (torch.float64, torch.int32):
        for op in ("SUM", "AVG", "MAX", "MIN", "PRODUCT"):
            for n in (BIG, SMALL):
                t = data(rank, n, dtype)
                if op == "AVG" and not t.is_floating_point():
                    continue
                dist.all_reduce(t, op=getattr(RedOp, op))
                ok = torch.equal(t.double(), reference(size, n, op, dtype).to(dtype).double())
                served = dtype in engine_types and op in ("SUM", "AVG") and n == BIG
                delta = counters.delta()
                # The engine serves float sums of at least OPTIREDUCE_MIN_BYTES; everything else
                # passes, counted as passed through.
                c.check(ok and delta == ((1, 0) if served else (0, 1)),
                        f"allreduce {op} of {n} {dtype}: value {'right' if ok else 'WRONG'}, "
                        f"{'engine' if served else 'passed through'} (counters {delta})")
    # 16-bit sums are rounded once from float32, the engine's call and a declined one alike: rank
    # 0's 2048 plus one from every other rank is exact in float16 (2050 for 3 ranks), where adding
    # in 16 bits would round each 2049 back to 2048. Launched as torchrun launches, the engine
    # takes float16 in its own 16 bits; under mpirun the library's MPI_Allreduce takes float32.
    wide = 4 if "OMPI_COMM_WORLD_RANK" in os.environ and "RANK" not in os.environ else 2
    for n in (BIG, SMALL):
        t = torch.full((n,), 2048.0 if rank == 0 else 1.0, dtype=torch.float16)
        before = optireduce.stats().bytes_reduced
        dist.all_reduce(t)
        reduced = optireduce.stats().bytes_reduced - before
        want_bytes = n * wide if n == BIG else 0
        counters.delta()
        c.check(torch.equal(t, torch.full((n,), 2048.0 + size - 1, dtype=torch.float16)) and reduced == want_bytes,
                f"float16 sum of {n}: rounded once ({t[0].item()}), {reduced} bytes through the engine (want {want_bytes})")
    # A non-contiguous tensor, and a tensor summed in place by a subgroup of the engine's calls.
    t = torch.stack([data(rank, BIG, torch.float32)] * 2, 1)[:, 0]
    dist.all_reduce(t)
    c.check(torch.equal(t.double(), reference(size, BIG, "SUM")) and counters.delta() == (1, 0),
            "allreduce of a non-contiguous float32 tensor: right, through the engine")
    ints = data(rank, BIG, torch.int64)
    work = dist.all_reduce(ints, op=RedOp.AVG, async_op=True)
    raised = ""
    try:
        work.wait()
    except RuntimeError as error:
        raised = str(error)
    c.check("cannot average a torch.int64 tensor" in raised, f"AVG of integers raises from wait() ({raised[:90]!r})")
    tensors = [data(rank, BIG, torch.float32), data(rank, 100, torch.float32)]
    dist.all_reduce_coalesced(tensors)
    c.check(torch.equal(tensors[0].double(), reference(size, BIG, "SUM")) and
            torch.equal(tensors[1].double(), reference(size, 100, "SUM")) and counters.delta() == (1, 0),
            "allreduce_coalesced: both tensors right, one engine call")


def check_reduce_scatter(c, counters, rank, size):
    for dtype in (torch.float32, torch.bfloat16, torch.float64):
        for op in ("SUM", "AVG", "MAX"):
            if op == "MAX" and dtype != torch.float32:
                continue
            full = data(rank, BIG * size, dtype)
            out = torch.empty(BIG, dtype=dtype)
            dist.reduce_scatter(out, list(full.chunk(size)), op=getattr(RedOp, op))
            want = reference(size, BIG * size, op, dtype).chunk(size)[rank].to(dtype).double()
            served = dtype != torch.float64 and op != "MAX"
            delta = counters.delta()
            c.check(torch.equal(out.double(), want) and delta == ((1, 0) if served else (0, 1)),
                    f"reduce_scatter {op} of {size} x {BIG} {dtype}: this rank's block right, "
                    f"{'engine' if served else 'passed through'} (counters {delta})")
    full = data(rank, BIG * size, torch.float32)
    out = torch.empty(BIG)
    dist._reduce_scatter_base(out, full)
    c.check(torch.equal(out.double(), reference(size, BIG * size, "SUM").chunk(size)[rank]) and
            counters.delta() == (1, 0), "_reduce_scatter_base: this rank's block right, through the engine")
    last = optireduce.torch.last_call()
    c.check((last.collective, last.format, last.entries) == ("reduce_scatter", "float32", BIG),
            f"the engine ran it as a reduce-scatter (last call: {last.collective} of {last.entries} {last.format})")
    # Blocks of different sizes (one of them this rank's, empty on rank 1).
    counts = [BIG + 8 * r if r != 1 else 0 for r in range(size)]
    blocks = [data(rank, n, torch.float32) + r for r, n in enumerate(counts)]
    out = torch.empty(counts[rank])
    dist.reduce_scatter(out, blocks)
    want = sum(data(r, counts[rank], torch.float64) for r in range(size)) + size * rank
    c.check(torch.equal(out.double(), want) and counters.delta() == (1, 0),
            f"reduce_scatter of uneven blocks {counts}: right, through the engine")
    try:
        dist.reduce_scatter(torch.empty(3), [torch.empty(4)] * size)
        raised = ""
    except ValueError as error:
        raised = str(error)
    c.check("reduce_scatter needs" in raised, f"a reduce_scatter whose output does not fit raises at once ({raised[:60]!r})")


def check_gloo_collectives(c, counters, rank, size):
    t = data(rank, 10, torch.float32)
    dist.broadcast(t, src=1)
    c.check(torch.equal(t, data(1, 10, torch.float32)), "broadcast (gloo)")
    gathered = [torch.empty(10) for _ in range(size)]
    dist.all_gather(gathered, data(rank, 10, torch.float32))
    c.check(all(torch.equal(g, data(r, 10, torch.float32)) for r, g in enumerate(gathered)), "all_gather (gloo)")
    objects = [None] * size
    dist.all_gather_object(objects, {"rank": rank})
    c.check(objects == [{"rank": r} for r in range(size)], "all_gather_object (gloo)")
    t = data(rank, 10, torch.float64)
    dist.reduce(t, dst=0)
    c.check(rank != 0 or torch.equal(t, reference(size, 10, "SUM")), "reduce (gloo)")
    out = torch.empty(10)
    dist.scatter(out, [data(r, 10, torch.float32) for r in range(size)] if rank == 2 else None, src=2)
    c.check(torch.equal(out, data(rank, 10, torch.float32)), "scatter (gloo)")
    if rank == 0:
        dist.send(data(7, 10, torch.float32), dst=1)
    elif rank == 1:
        got = torch.empty(10)
        dist.recv(got, src=0)
        c.check(torch.equal(got, data(7, 10, torch.float32)), "send and recv (gloo)")
    dist.barrier()
    c.check(counters.delta() == (0, 0), "gloo's collectives go neither through the engine nor pass it")


def check_futures(c, counters, rank, size):
    # A call returns at once, before the late rank has joined it, and completes after.
    if rank == 2:
        time.sleep(1.0)
    t = data(rank, BIG, torch.float32)
    started = time.perf_counter()
    work = dist.all_reduce(t, async_op=True)
    returned = time.perf_counter() - started
    pending = not work.is_completed()
    future = work.get_future()
    value = future.wait()
    c.check(rank == 2 or (returned < 0.5 and pending),
            f"all_reduce(async_op=True) returns before the late rank joins ({1000 * returned:.0f} ms, pending {pending})")
    c.check(work.is_completed() and torch.equal(value[0].double(), reference(size, BIG, "SUM")) and value[0] is t,
            "its future completes with the reduced tensor, in place")
    # Several in flight, waited in reverse order: each right.
    tensors = [data(rank, BIG, torch.float32) * k for k in range(1, 5)]
    works = [dist.all_reduce(x, async_op=True) for x in tensors]
    for w in reversed(works):
        w.wait()
    c.check(all(torch.equal(x.double(), reference(size, BIG, "SUM") * k) for k, x in enumerate(tensors, 1)),
            "four calls in flight at once, waited in reverse: all right")
    counters.delta()
    last = optireduce.torch.last_call()
    c.check(last is not None and last.ok and last.entries == BIG and last.kind == "exact",
            f"last_call() tells the last engine call ({last})")


def check_subgroup(c, counters, rank, size):
    members = [0, 2]
    group = dist.new_group(members)
    engines_before = optireduce.stats().engines_created
    if rank in members:
        t = data(rank, BIG, torch.float32)
        everyone = data(rank, BIG, torch.float32)
        # The subgroup's call and the world's in flight together: each group has its own engine.
        works = [dist.all_reduce(t, group=group, async_op=True), dist.all_reduce(everyone, async_op=True)]
        for w in works:
            w.wait()
        want = data(0, BIG, torch.float64) + data(2, BIG, torch.float64)
        c.check(torch.equal(t.double(), want), f"new_group({members}): its allreduce sums its ranks only")
        c.check(optireduce.stats().engines_created == engines_before + 1 and
                optireduce.torch.last_call(group).entries == BIG, "new_group has an engine of its own")
    else:
        everyone = data(rank, BIG, torch.float32)
        dist.all_reduce(everyone)
    c.check(torch.equal(everyone.double(), reference(size, BIG, "SUM")), "the world's call beside it: right")
    dist.destroy_process_group(group)
    raised = ""
    if rank in members:
        try:
            dist.all_reduce(torch.ones(BIG), group=group)
        except RuntimeError as error:
            raised = str(error)
        c.check("destroyed" in raised or "Invalid process group" in raised, f"a destroyed subgroup refuses calls ({raised[:60]!r})")
    counters.delta()


def check_failure(c, rank, size):
    t = data(rank, BIG, torch.float32)
    dist.all_reduce(t)  # the engine is made and warm
    if rank == 2:
        time.sleep(4.0)  # past OPTIREDUCE_WATCHDOG_MS on the others
    raised = ""
    try:
        dist.all_reduce(data(rank, BIG, torch.float32))
    except RuntimeError as error:
        raised = str(error)
    c.check("allreduce of 4096 torch.float32 elements failed" in raised and "did not answer" in raised,
            f"a failed engine call raises on every rank, naming what failed: {raised.splitlines()[0] if raised else raised!r}")
    before = optireduce.stats()
    t = data(rank, BIG, torch.float32)
    dist.all_reduce(t)
    after = optireduce.stats()
    c.check(torch.equal(t.double(), reference(size, BIG, "SUM")) and
            after.passthrough_calls == before.passthrough_calls + 1 and after.intercepted_calls == before.intercepted_calls,
            "the group's next call is right, declined by the failed engine and summed by gloo")


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "routing"
    # torch 1.13 warns that all_reduce_coalesced and _reduce_scatter_base will go: tested all the same.
    warnings.filterwarnings("ignore", message=".*(all_reduce_coalesced|_reduce_scatter_base).*")
    torch.set_num_threads(1)
    rank, size = gloo_group.init("optireduce")
    c = Checks("backend_group", rank)
    counters = Counters()
    if what == "failure":
        check_failure(c, rank, size)
    else:
        check_allreduce(c, counters, rank, size)
        check_reduce_scatter(c, counters, rank, size)
        check_gloo_collectives(c, counters, rank, size)
        check_futures(c, counters, rank, size)
        check_subgroup(c, counters, rank, size)
    failures = torch.tensor([c.failures])
    dist.all_reduce(failures)
    if what != "failure":  # the failure run ends at exit: the report is written then
        dist.destroy_process_group()
    if rank == 0:
        print("backend_group: " + ("PASS" if failures.item() == 0 else f"FAIL ({failures.item()} failed checks)"))
    return 0 if failures.item() == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

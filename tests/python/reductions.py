#!/usr/bin/python3
"""optireduce.torch under mpirun: every dtype reduced to the right value, the DDP hook on a
float64 model and on a communicator of its own, GradientFuser and allreduce_gradients, set_mode,
an error in the communication thread, shutdown and restart.

    reductions.py --library present|absent [--thread-level multiple|serialized|funneled]

With the library (run it with OPTIREDUCE_MODE=reliable OPTIREDUCE_MIN_BYTES=0) the process
counters must show float32, float16 and bfloat16 calls intercepted and every other dtype passed
through, call for call.
Rank 0 prints one line per check; exit 0, 1 on a failed check, 77 without torch or mpi4py.
"""
import argparse
import sys

try:
    import mpi4py
    import torch
    import torch.distributed as dist
except ImportError as error:
    print(f"SKIP: torch/mpi4py not importable by {sys.executable}: {error}", file=sys.stderr)
    sys.exit(77)

import gloo_group
from checks import Checks
import optireduce
import optireduce.torch
from optireduce.torch import GradientFuser, allreduce_async, allreduce_gradients, allreduce_hook

ARGS = None


class Counters:
    """Deltas of the library's process counters (None without the library)."""

    def __init__(self):
        self.start = optireduce.stats()

    def delta(self):
        now = optireduce.stats()
        if now is None:
            return None
        return (now.intercepted_calls - self.start.intercepted_calls, now.passthrough_calls - self.start.passthrough_calls)


def rank_data(rank, n, dtype, seed=0):
    """Per-rank data every rank can recompute for every other rank."""
    g = torch.Generator().manual_seed(1000 * seed + rank)
    return (torch.randn(n, generator=g, dtype=torch.float64) * 3).to(dtype)


def expected_sum(size, n, dtype, seed=0):
    """The sum in float64 of every rank's data, as that dtype holds it."""
    return sum(rank_data(r, n, dtype, seed).to(torch.float64) for r in range(size))


def check_dtypes(c, comm, rank, size):
    present = ARGS.library == "present"
    # Integer-valued float32: any summation order gives the exact sum.
    counters = Counters()
    t = (torch.arange(5000, dtype=torch.float32) % 97) * (rank + 1)
    allreduce_async(t, comm).wait()
    want = (torch.arange(5000, dtype=torch.float32) % 97) * (size * (size + 1) // 2)
    c.check(torch.equal(t, want), "float32 sum exact")
    if present:
        last = optireduce.last_call(comm)
        c.check(counters.delta() == (1, 0) and last.entries == 5000 and last.kind == "exact",
                f"float32 went through the engine (counters {counters.delta()}, last call {last.kind}, "
                f"{last.entries} entries)")

    for dtype, name in ((torch.float64, "float64"), (torch.int64, "int64"), (torch.int32, "int32"),
                        (torch.complex64, "complex64")):
        counters = Counters()
        if dtype.is_complex:
            t = torch.complex(rank_data(rank, 3000, torch.float32, 1), rank_data(rank, 3000, torch.float32, 2))
            want = torch.complex(expected_sum(size, 3000, torch.float32, 1), expected_sum(size, 3000, torch.float32, 2))
        else:
            t = rank_data(rank, 3000, dtype, 3)
            want = expected_sum(size, 3000, dtype, 3)
        allreduce_async(t, comm).wait()
        error = (t.to(want.dtype) - want).abs().max().item()
        c.check(error <= (0 if not dtype.is_floating_point and not dtype.is_complex else 1e-5 * size),
                f"{name} sum (max error {error:.3g})")
        if present:
            c.check(counters.delta() == (0, 1), f"{name} passed through to MPI (counters {counters.delta()})")

    # float16/bfloat16. With the library: in 16 bits through the engine, which sums in float32 in rank
    # order and rounds once (a mean: that sum divided in float32, rounded once more), the same bits on
    # every rank. Without it: summed in float64, rounded once: the correctly rounded exact value.
    for dtype, name in ((torch.float16, "float16"), (torch.bfloat16, "bfloat16")):
        for average in (False, True):
            counters = Counters()
            t = rank_data(rank, 4000, dtype, 4)
            if present:
                running = rank_data(0, 4000, dtype, 4).float()
                for r in range(1, size):
                    running = running + rank_data(r, 4000, dtype, 4).float()
                want = running.to(dtype)
                exact = expected_sum(size, 4000, dtype, 4)
                if average:
                    want = (want.float() / size).to(dtype)
            else:
                want = expected_sum(size, 4000, dtype, 4)
                want = (want / size if average else want).to(dtype)
            allreduce_async(t, comm, average=average).wait()
            how = "float32 sum in rank order rounded once" if present else "correctly rounded exact value"
            c.check(t.dtype == dtype and torch.equal(t, want), f"{name} {'mean' if average else 'sum'} is the {how}")
            if present:
                if not average:
                    error = (t.double() - exact).abs()
                    c.check(bool((error <= (running.to(dtype).double() - exact).abs()).all()),
                            f"{name} sum no further from float64 than a float32 sum rounded once")
                hashes = comm.allgather(t.view(torch.int16).numpy().tobytes())
                c.check(len(set(hashes)) == 1, f"{name} {'mean' if average else 'sum'} bitwise the same on every rank")
                c.check(counters.delta() == (1, 0), f"{name} went through the engine in 16 bits (counters {counters.delta()})")
                last = optireduce.last_call(comm)
                c.check(last.entries == 4000, f"{name}: the engine's last call had {last.entries} entries, not 4000")


def check_error_and_restart(c, comm, rank, size):
    future = allreduce_async(torch.ones(10, dtype=torch.bool), comm)
    try:
        future.wait()
        raised = ""
    except RuntimeError as error:
        raised = str(error)
    c.check("optireduce.torch: reduction failed" in raised, f"a bad reduction fails its future ({raised!r})")
    t = torch.ones(100)
    allreduce_async(t, comm).wait()
    c.check(torch.equal(t, torch.full((100,), float(size))), "the next reduction still works")
    c.check(optireduce.torch.shutdown() is True, "shutdown stops the communication thread")
    t = torch.ones(100)
    allreduce_async(t, comm).wait()
    c.check(torch.equal(t, torch.full((100,), float(size))), "a reduction after shutdown starts a new thread")


def local_gradients(model, x, y):
    model.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    return [p.grad.detach().clone() for p in model.parameters()]


def check_ddp_float64(c, comm, rank, size):
    torch.manual_seed(7)
    def make():
        return torch.nn.Sequential(torch.nn.Linear(64, 400), torch.nn.Tanh(), torch.nn.Linear(400, 400), torch.nn.Tanh(),
                                   torch.nn.Linear(400, 400), torch.nn.Tanh(), torch.nn.Linear(400, 5)).double()
    model, reference = make(), make()
    reference.load_state_dict(model.state_dict())
    # DDP's first bucket takes 1 MiB, the later ones bucket_cap_mb: several buckets a step.
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.05)
    seen = []

    def counting_hook(state, bucket):
        seen.append(bucket.buffer().dtype)
        return allreduce_hook(state, bucket)

    ddp.register_comm_hook(None, counting_hook)
    worst = 0.0
    counters = Counters()
    for step in range(3):
        g = torch.Generator().manual_seed(100 * step + rank)
        x, y = torch.randn(16, 64, generator=g, dtype=torch.float64), torch.randn(16, 5, generator=g, dtype=torch.float64)
        ddp.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        # The exact mean: every rank's own gradients, gathered over gloo, averaged in float64.
        mine = local_gradients(reference, x, y)
        for p, local in zip(model.parameters(), mine):
            everyone = [torch.empty_like(local) for _ in range(size)]
            dist.all_gather(everyone, local)
            want = sum(everyone) / size
            worst = max(worst, ((p.grad - want).abs().max() / want.abs().max()).item())
        with torch.no_grad():  # both models take the same step
            for p, q in zip(model.parameters(), reference.parameters()):
                p -= 0.1 * p.grad
                q.copy_(p)
    c.check(len(seen) > 3 and all(d == torch.float64 for d in seen), f"DDP handed {len(seen)} float64 buckets to the hook")
    c.check(worst < 1e-12, f"DDP float64 gradients are the mean of the ranks' (worst relative error {worst:.3g})")
    if ARGS.library == "present":
        c.check(counters.delta() == (0, len(seen)), f"every float64 bucket passed through (counters {counters.delta()})")


def check_ddp_own_communicator(c, comm, rank, size):
    own = comm.Dup()
    torch.manual_seed(8)
    model = torch.nn.Linear(200, 100)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    ddp.register_comm_hook(own, allreduce_hook)
    before = optireduce.last_call(comm)
    x = torch.full((4, 200), float(rank + 1))
    ddp.zero_grad()
    ddp(x).sum().backward()
    # d(sum of outputs)/d(bias) = batch size on every rank; the weight's gradient row is the
    # column sum of x: 4 (rank + 1), averaged over the ranks: 2 (size + 1).
    c.check(torch.equal(model.bias.grad, torch.full((100,), 4.0)) and
            torch.equal(model.weight.grad, torch.full((100, 200), 2.0 * (size + 1))),
            "DDP float32 gradients through a communicator of their own are the exact mean")
    if ARGS.library == "present":
        after, world_after = optireduce.last_call(own), optireduce.last_call(comm)
        c.check(after is not None and after.entries == 20100 and world_after == before,
                "the calls ran on that communicator, not on COMM_WORLD")
    own.Free()


def check_fuser(c, comm, rank, size):
    torch.manual_seed(9)
    model = torch.nn.Sequential(torch.nn.Linear(100, 50), torch.nn.Linear(50, 10))
    extra = torch.nn.Parameter(torch.zeros(30, dtype=torch.float64))
    params = list(model.parameters()) + [extra]
    for i, p in enumerate(params):
        p.grad = (torch.arange(p.numel(), dtype=p.dtype).reshape(p.shape) % 13) * (rank + 1) + i
    fuser = GradientFuser(params, comm, bucket_bytes=16 << 10)
    float32_buckets = sum(b.dtype == torch.float32 for b in fuser.buckets)
    counters = Counters()
    fuser.allreduce()
    ok = True
    for i, p in enumerate(params):
        want = (torch.arange(p.numel(), dtype=p.dtype).reshape(p.shape) % 13) * ((size + 1) / 2) + i
        ok = ok and torch.allclose(p.grad, want, rtol=0, atol=1e-5)
    c.check(ok, f"GradientFuser: {len(fuser.buckets)} buckets ({float32_buckets} float32), every gradient the mean")
    if ARGS.library == "present":
        c.check(counters.delta() == (float32_buckets, len(fuser.buckets) - float32_buckets),
                f"float32 buckets through the engine, the float64 one passed through (counters {counters.delta()})")
    for p in model.parameters():
        p.grad = torch.full_like(p, float(rank))
    allreduce_gradients(model, comm, average=False)
    c.check(all(torch.equal(p.grad, torch.full_like(p, float(size * (size - 1) // 2))) for p in model.parameters()),
            "allreduce_gradients(module, average=False) sums")


def check_set_mode(c, comm, rank, size):
    if ARGS.library != "present":
        try:
            optireduce.set_mode(comm, "off")
            c.check(False, "set_mode without the library raises NotLoadedError")
        except optireduce.NotLoadedError:
            c.check(True, "set_mode without the library raises NotLoadedError")
        return
    off = comm.Dup()
    optireduce.set_mode(off, "off")
    counters = Counters()
    t = torch.ones(4096)
    allreduce_async(t, off).wait()
    c.check(torch.equal(t, torch.full((4096,), float(size))) and counters.delta() == (0, 1)
            and optireduce.last_call(off) is None, f"set_mode(off): plain MPI (counters {counters.delta()})")
    off.Free()


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--library", choices=["present", "absent"], required=True)
    parser.add_argument("--thread-level", choices=["multiple", "serialized", "funneled"], default="multiple")
    ARGS = parser.parse_args()
    mpi4py.rc.thread_level = ARGS.thread_level
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    rank, size = gloo_group.init()
    c = Checks("reductions", rank)
    c.check(optireduce.loaded() == (ARGS.library == "present"),
            f"optireduce.loaded() is {optireduce.loaded()}, version {optireduce.version()}")
    t = torch.ones(10)
    future = allreduce_async(t, comm)
    inline = ARGS.thread_level == "funneled"
    c.check(not inline or future.done(), f"thread level {ARGS.thread_level} (MPI gave {MPI.Query_thread()}): "
            f"{'completed on the calling thread' if inline else 'completed by the communication thread'}")
    future.wait()
    for check in (check_dtypes, check_ddp_float64, check_ddp_own_communicator, check_fuser, check_set_mode,
                  check_error_and_restart):
        check(c, comm, rank, size)
    failures = torch.tensor([c.failures])
    dist.all_reduce(failures)
    dist.destroy_process_group()
    if rank == 0:
        print(f"reductions: {'FAIL' if failures.item() else 'PASS'} ({failures.item()} failed checks over {size} ranks)")
    return 1 if failures.item() else 0


if __name__ == "__main__":
    sys.exit(main())

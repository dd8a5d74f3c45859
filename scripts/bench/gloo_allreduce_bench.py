#!/usr/bin/python3
"""Gloo twin of tools/optireduce_allreduce_bench.cpp for scripts/bench.sh: the same command line,
the same inputs (tools/allreduce_bench_inputs.hpp: keep the formula in step), the same checks and
the same JSON, with torch.distributed (backend gloo, CPU float32 tensors, TCP on 127.0.0.1).

    /usr/bin/python3 gloo_allreduce_bench.py --ranks 4 --warmup 30 --iters 50 --json out.json latency --sizes 16M
    /usr/bin/python3 gloo_allreduce_bench.py --ranks 4 --json out.json step --buckets 0.25M,6.25M,6.25M,6.25M,5.5M

It starts the ranks itself (scripts/compare/gloo_bench.py's launcher, one process per rank,
torch.set_num_threads(1)). Gloo's all_reduce works in place only, so every call is in place: in
latency mode the input is written into the result buffer before the barrier. Every call's kind is
"none" (not OptiReduce). Exit code 3 when a result is wrong, as the MPI program. --barrier host starts
each iteration with a barrier over a Unix socket instead of Gloo's over TCP (the C++ program's shared
memory barrier): it sends nothing over the network being measured.
"""
import argparse
import math
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compare"))
from gloo_bench import launch_ranks, parse_size, percentile  # noqa: E402

PERIOD = 33
KINDS = ("none", "exact", "calibration", "bounded", "fallback")
NOT_EXACT, BEYOND_TOLERANCE, WRONG = 1, 2, 4


def size_name(n):
    if n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n % (1 << 10) == 0:
        return f"{n >> 10}K"
    return f"{n}B"


class Inputs:
    """key(i, c) = (7 i + 13 floor(i / 4096) + 5 c) mod 33; input(r, i, c) = ((key + 3 r) mod 33) - 16;
    the exact sum over ranks is a table of the key."""

    def __init__(self, torch, n, rank, nranks):
        self.torch = torch
        i = torch.arange(n, dtype=torch.int64)
        self.base = ((7 * i + 13 * (i // 4096)) % PERIOD).to(torch.uint8)
        self.value = torch.tensor([((k + 3 * rank) % PERIOD) - 16 for k in range(PERIOD)], dtype=torch.float32)
        self.exact = torch.tensor([sum(((k + 3 * r) % PERIOD) - 16 for r in range(nranks)) for k in range(PERIOD)],
                                  dtype=torch.float32)

    def key(self, call):
        return ((self.base + (5 * call) % PERIOD) % PERIOD).long()

    def fill(self, out, call):
        out.copy_(self.value[self.key(call)])

    def deviation(self, result, call):
        """(exact, relative RMS error): values compared, so -0 equals +0."""
        e = self.exact[self.key(call)]
        if bool((result == e).all()):
            return True, 0.0
        d = (result.double() - e.double())
        err = math.sqrt(float((d * d).mean())) if bool(result.isfinite().all()) else 1e300
        ref = math.sqrt(float((e.double() ** 2).mean()))
        return False, (err / ref if ref > 0 else err)


class HostBarrier:
    """A barrier over Unix sockets (abstract names: one network namespace's ranks): rank 0 collects
    a byte from every other rank, then answers each; every wait gives up after `timeout`."""

    def __init__(self, rank, n, key, timeout):
        name = f"\0optireduce-gloo-bench-{key}"
        self.rank, self.peers = rank, []
        if rank == 0:
            srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            srv.bind(name)
            srv.listen(n)
            srv.settimeout(timeout)
            self._ready = srv
            self._n = n
        else:
            self._ready = None
            self._name, self._timeout = name, timeout

    def connect(self):
        # After the process group exists: rank 0 is listening by then.
        if self.rank == 0:
            for _ in range(self._n - 1):
                c, _ = self._ready.accept()
                c.settimeout(self._ready.gettimeout())
                self.peers.append(c)
            self._ready.close()
        else:
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.settimeout(self._timeout)
            c.connect(self._name)
            self.peers.append(c)

    def wait(self):
        if self.rank == 0:
            for c in self.peers:
                if c.recv(1) != b"a":
                    raise RuntimeError("--barrier host: a rank went away")
            for c in self.peers:
                c.sendall(b"g")
        else:
            self.peers[0].sendall(b"a")
            if self.peers[0].recv(1) != b"g":
                raise RuntimeError("--barrier host: rank 0 went away")


def worker(args):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    rank, n = args.rank, args.ranks
    host = HostBarrier(rank, n, args.port, args.timeout) if args.barrier == "host" else None
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=n)
    if host:
        host.connect()
    barrier = host.wait if host else dist.barrier
    step = args.mode == "step"
    sizes = [parse_size(s) for s in (args.buckets if step else args.sizes).split(",")]
    entries = [("step", sizes)] if step else [(size_name(b), [b]) for b in sizes]
    next_input, calls, wrong_any = 0, 0, False
    out_entries = []
    for name, buckets in entries:
        bufs = [torch.zeros(b // 4, dtype=torch.float32) for b in buckets]
        inputs = [Inputs(torch, b // 4, rank, n) for b in buckets]
        it_ms, call_ms, flags, rel = [], [], [], []
        for _ in range(args.warmup + args.iters):
            ids = []
            for b, buf in enumerate(bufs):
                inputs[b].fill(buf, next_input)
                ids.append(next_input)
                next_input += 1
            barrier()
            t0 = prev = time.perf_counter()
            for b in reversed(range(len(bufs))):
                dist.all_reduce(bufs[b])
                t = time.perf_counter()
                call_ms.append((t - prev) * 1e3)
                prev = t
                calls += 1
                if calls == args.corrupt_result and rank == 0:
                    bufs[b][0] += 1.0
            it_ms.append((prev - t0) * 1e3)
            for b in reversed(range(len(bufs))):
                exact, r = inputs[b].deviation(bufs[b], ids[b])
                f = (0 if exact else NOT_EXACT | WRONG) | (BEYOND_TOLERANCE if r > args.tolerance else 0)
                if f & WRONG and rank == 0:
                    print(f"gloo_allreduce_bench: error: rank {rank}, {name}: wrong result, relative RMS error {r:.3g}",
                          file=sys.stderr)
                flags.append(f)
                rel.append(r)

        def over_ranks(values, op, dtype):
            t = torch.tensor(values, dtype=dtype)
            dist.all_reduce(t, op=op)
            return t.tolist()

        it_ms = over_ranks(it_ms, dist.ReduceOp.MAX, torch.float64)
        call_ms = over_ranks(call_ms, dist.ReduceOp.MAX, torch.float64)
        rel = over_ranks(rel, dist.ReduceOp.MAX, torch.float64)
        flags_or = [0] * len(flags)
        for bit in (NOT_EXACT, BEYOND_TOLERANCE, WRONG):  # OR over ranks: the MAX of each bit
            got = over_ranks([f & bit for f in flags], dist.ReduceOp.MAX, torch.int64)
            flags_or = [a | int(b) for a, b in zip(flags_or, got)]
        flags = flags_or
        timed = it_ms[args.warmup:]
        ncalls = len(call_ms)
        kinds_all = {k: (ncalls if k == "none" else 0) for k in KINDS}
        kinds_timed = {k: (args.iters * len(buckets) if k == "none" else 0) for k in KINDS}
        wrong = sum(1 for f in flags if f & WRONG)
        wrong_any = wrong_any or wrong > 0
        warm_calls = args.warmup * len(buckets)
        out_entries.append({
            "name": name, "buckets_bytes": buckets, "calls_per_iteration": len(buckets), "warmup": args.warmup,
            "iters": args.iters, "p50_ms": percentile(timed, 50), "p99_ms": percentile(timed, 99),
            "max_ms": max(timed),
            "check": {"calls": ncalls, "not_exact": sum(1 for f in flags if f & NOT_EXACT),
                      "beyond_tolerance": sum(1 for f in flags if f & BEYOND_TOLERANCE), "wrong": wrong, "failed": 0,
                      "tolerance": args.tolerance, "max_rel_rms_error": max(rel),
                      "timed_max_rel_rms_error": max(rel[warm_calls:])},
            "kinds_all": kinds_all, "kinds_timed": kinds_timed, "timed_entries": 0, "timed_dropped_entries": 0,
            "timed_dropped_fraction": 0, "timed_worst_call_dropped_fraction": 0, "iteration_ms": it_ms,
            "calls": {"ms": call_ms, "bytes": [buckets[b] for _ in range(args.warmup + args.iters)
                                               for b in reversed(range(len(buckets)))],
                      "kind": ["none"] * ncalls, "entries": [0] * ncalls, "dropped": [0] * ncalls,
                      "rel_rms_error": rel, "flags": flags}})
        if rank == 0:
            print(f"gloo_allreduce_bench: {args.label} {name}: p50 {percentile(timed, 50):.3f} ms, "
                  f"p99 {percentile(timed, 99):.3f} ms{' (WRONG RESULTS)' if wrong else ''}", file=sys.stderr)
    dist.barrier()
    if rank == 0 and args.json:
        import json
        with open(args.json, "w") as f:
            json.dump({"tool": "gloo_allreduce_bench.py", "mode": args.mode, "label": args.label, "ranks": n,
                       "in_place": True, "barrier": args.barrier, "optireduce_loaded": False, "library_version": "",
                       "torch": torch.__version__, "entries": out_entries, "wrong_results": wrong_any}, f)
    dist.destroy_process_group()
    return 3 if wrong_any else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=600, help="kill the ranks after this many seconds")
    ap.add_argument("--json")
    ap.add_argument("--label", default="gloo")
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--tolerance", type=float, default=1e-3)
    ap.add_argument("--barrier", choices=("mpi", "host"), default="mpi",
                    help="what starts each iteration: mpi (Gloo's barrier) or host (Unix sockets: nothing over the network)")
    ap.add_argument("--corrupt-result", type=int, default=0, help="testing: add 1 to one entry of this call's result")
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    sub = ap.add_subparsers(dest="mode", required=True)
    lat = sub.add_parser("latency")
    lat.add_argument("--sizes", required=True)
    lat.add_argument("--in-place", action="store_true", help="accepted for symmetry: Gloo is always in place")
    st = sub.add_parser("step")
    st.add_argument("--buckets", required=True)
    args = ap.parse_args()
    if args.rank is not None:
        return worker(args)
    return launch_ranks(os.path.abspath(__file__), args.ranks, args.timeout, sys.argv[1:], "gloo_allreduce_bench")


if __name__ == "__main__":
    sys.exit(main())

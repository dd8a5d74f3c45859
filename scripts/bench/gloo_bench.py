#!/usr/bin/python3
"""Gloo twin of optireduce-bench (tools/bench/) for scripts/bench.sh: the same subcommands and
flags, the same inputs (tools/bench/inputs.hpp: keep the formula in step), the same checks and
the same JSON, with torch.distributed (backend gloo, CPU float32 tensors, TCP on 127.0.0.1).

    /usr/bin/python3 gloo_bench.py --ranks 4 --warmup 30 --iters 50 --json out.json latency --sizes 16M
    /usr/bin/python3 gloo_bench.py --ranks 4 --json out.json step --buckets 0.25M,6.25M,6.25M,6.25M,5.5M
    /usr/bin/python3 gloo_bench.py --ranks 4 --json out.json model --model resnet50 --scale 0.5

It starts the ranks itself (one process per rank, torch.set_num_threads(1)); use Debian's
interpreter (/usr/bin/python3, python3-torch). Gloo's all_reduce works in place only, so every call
is in place: in latency mode the input is written into the result buffer before the barrier. Every
call's kind is "none" (not OptiReduce). Exit code 3 when a result is wrong, as the MPI program.
--barrier host starts each iteration with a barrier over a Unix socket instead of Gloo's over TCP
(the C++ program's shared-memory barrier): it sends nothing over the network being measured.
"""
import argparse
import json
import math
import os
import socket
import subprocess
import sys
import time

PERIOD = 33
KINDS = ("none", "exact", "calibration", "bounded", "fallback", "mpi")
NOT_EXACT, BEYOND_TOLERANCE, WRONG, FAILED, UNCHECKED = 1, 2, 4, 8, 16
MIB = 1 << 20
# tools/bench/models.hpp gives the sources of these figures: keep them in step.
MODELS = {"resnet50": (25_557_032, 0.213), "bert-large": (340_000_000, 0.42), "gpt2": (124_439_808, 0.15)}


def parse_size(s):
    mul = {"K": 1024, "M": MIB, "G": 1 << 30}.get(s[-1:].upper(), 1)
    v = float(s[:-1] if mul != 1 else s) * mul
    if v < 4 or v != int(v) or int(v) % 4:
        raise ValueError(f"size {s!r} is not a positive multiple of 4 bytes")
    return int(v)


def size_name(n):
    if n % MIB == 0:
        return f"{n >> 20}M"
    if n % 1024 == 0:
        return f"{n >> 10}K"
    return f"{n}B"


def percentile(v, p):  # nearest rank, as the MPI tool
    v = sorted(v)
    k = max(1, min(len(v), -(-len(v) * p // 100)))
    return v[int(k) - 1]


def ddp_buckets(params, bucket_bytes, first_bytes):
    left, out = params * 4, []
    first = min(left, first_bytes)
    if first:
        out.append(first)
        left -= first
    while left:
        b = min(left, bucket_bytes)
        out.append(b)
        left -= b
    return out


def entries_of(args):
    """[(name, buckets, compute_s, model dict or None)], as tools/bench/main.cpp builds them."""
    if args.mode == "step":
        return [("step", [parse_size(s) for s in args.buckets.split(",")], 0.0, None)]
    if args.mode == "latency":
        sizes = [parse_size(s) for s in args.sizes.split(",")]
    elif args.mode == "sweep":
        sizes, b, to = [], float(parse_size(args.min)), parse_size(args.max)
        while b <= to * (1 + 1e-9):
            x = int(round(b)) // 4 * 4
            if not sizes or x > sizes[-1]:
                sizes.append(x)
            b *= args.factor
    if args.mode != "model":
        return [(size_name(b), [b], 0.0, None) for b in sizes]
    models, scales = args.model.split(","), [float(x) for x in args.scale.split(",")]
    if len(scales) not in (1, len(models)) or any(m not in MODELS for m in models):
        raise SystemExit("gloo_bench: --model takes resnet50, bert-large, gpt2; --scale one value or one per model")
    out = []
    for i, name in enumerate(models):
        scale = scales[0] if len(scales) == 1 else scales[i]
        params, compute = MODELS[name]
        full = ddp_buckets(params, int(args.bucket_mb * MIB), int(args.first_bucket_mb * MIB))
        buckets = list(full)
        if scale < 1.0:
            first_n = 1 if args.first_bucket_mb > 0 else 0
            rest = len(full) - first_n
            buckets = full[: first_n + min(max(1, round(scale * rest)), rest)]
        compute_s = (args.compute_ms / 1e3 if args.compute_ms is not None else compute) * scale
        out.append((name, buckets, compute_s, {"name": name, "params": params, "scale": scale,
                                               "full_bucket_count": len(full)}))
    return out

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
    next_input, calls, wrong_any = 0, 0, False
    out_entries = []

    def over_ranks(values, op, dtype):
        t = torch.tensor(values, dtype=dtype)
        dist.all_reduce(t, op=op)
        return t.tolist()

    for name, buckets, compute_s, model in entries_of(args):
        bufs = [torch.zeros(b // 4, dtype=torch.float32) for b in buckets]
        inputs = [Inputs(torch, b // 4, rank, n) for b in buckets]
        # --warmup-calls per power-of-two size class, each result checked.
        classes, prep_wrong, prep = {}, 0, 0
        for b, size in enumerate(buckets):
            classes.setdefault(size.bit_length(), []).append(b)
        for members in classes.values():
            for i in range(args.warmup_calls):
                b = members[i % len(members)]
                inputs[b].fill(bufs[b], next_input)
                dist.all_reduce(bufs[b])
                calls, prep = calls + 1, prep + 1
                if args.check and not inputs[b].deviation(bufs[b], next_input)[0]:
                    prep_wrong += 1
                next_input += 1
        it_ms, comm_ms, call_ms, flags, rel = [], [], [], [], []
        for _ in range(args.warmup + args.iters):
            ids = []
            for b, buf in enumerate(bufs):
                inputs[b].fill(buf, next_input)
                ids.append(next_input)
                next_input += 1
            barrier()
            t0 = time.perf_counter()
            if compute_s > 0:
                time.sleep(compute_s)
            c0 = prev = time.perf_counter()
            for b in reversed(range(len(bufs))):
                dist.all_reduce(bufs[b])
                t = time.perf_counter()
                call_ms.append((t - prev) * 1e3)
                prev = t
                calls += 1
                if calls == args.corrupt_result and rank == 0:
                    bufs[b][0] += 1.0
            it_ms.append((prev - t0) * 1e3)
            comm_ms.append((prev - c0) * 1e3)
            for b in reversed(range(len(bufs))):
                if not args.check:
                    flags.append(UNCHECKED)
                    rel.append(0.0)
                    continue
                exact, r = inputs[b].deviation(bufs[b], ids[b])
                f = (0 if exact else NOT_EXACT | WRONG) | (BEYOND_TOLERANCE if r > args.tolerance else 0)
                if f & WRONG and rank == 0:
                    print(f"gloo_bench: error: rank {rank}, {name}: wrong result, relative RMS error {r:.3g}",
                          file=sys.stderr)
                flags.append(f)
                rel.append(r)

        it_ms = over_ranks(it_ms, dist.ReduceOp.MAX, torch.float64)
        comm_ms = over_ranks(comm_ms, dist.ReduceOp.MAX, torch.float64)
        call_ms = over_ranks(call_ms, dist.ReduceOp.MAX, torch.float64)
        rel = over_ranks(rel, dist.ReduceOp.MAX, torch.float64)
        prep_wrong = int(over_ranks([prep_wrong], dist.ReduceOp.MAX, torch.int64)[0])
        flags_or = [0] * len(flags)
        for bit in (NOT_EXACT, BEYOND_TOLERANCE, WRONG, UNCHECKED):  # OR over ranks: the MAX of each bit
            got = over_ranks([f & bit for f in flags], dist.ReduceOp.MAX, torch.int64)
            flags_or = [a | int(b) for a, b in zip(flags_or, got)]
        flags = flags_or
        timed, timed_comm = it_ms[args.warmup:], comm_ms[args.warmup:]
        ncalls = len(call_ms)
        kinds_all = {k: (ncalls if k == "none" else 0) for k in KINDS}
        kinds_timed = {k: (args.iters * len(buckets) if k == "none" else 0) for k in KINDS}
        wrong = sum(1 for f in flags if f & WRONG)
        wrong_any = wrong_any or wrong > 0 or prep_wrong > 0
        warm_calls = args.warmup * len(buckets)
        entry = {
            "name": name, "buckets_bytes": buckets, "calls_per_iteration": len(buckets), "warmup": args.warmup,
            "iters": args.iters, "warmup_calls_per_size_class": args.warmup_calls, "preparatory_calls": prep,
            "compute_ms": compute_s * 1e3, "p50_ms": percentile(timed, 50), "p99_ms": percentile(timed, 99),
            "max_ms": max(timed), "p50_comm_ms": percentile(timed_comm, 50),
            "check": {"checked": args.check, "calls": ncalls, "not_exact": sum(1 for f in flags if f & NOT_EXACT),
                      "beyond_tolerance": sum(1 for f in flags if f & BEYOND_TOLERANCE), "wrong": wrong, "failed": 0,
                      "tolerance": args.tolerance, "max_rel_rms_error": max(rel),
                      "timed_max_rel_rms_error": max(rel[warm_calls:])},
            "kinds_all": kinds_all, "kinds_timed": kinds_timed, "timed_entries": 0, "timed_dropped_entries": 0,
            "timed_dropped_fraction": 0, "timed_worst_call_dropped_fraction": 0, "iteration_ms": it_ms,
            "comm_ms": comm_ms,
            "calls": {"ms": call_ms, "bytes": [buckets[b] for _ in range(args.warmup + args.iters)
                                               for b in reversed(range(len(buckets)))],
                      "kind": ["none"] * ncalls, "entries": [0] * ncalls, "dropped": [0] * ncalls,
                      "rel_rms_error": rel, "flags": flags}}
        if model:
            entry["model"] = model
        out_entries.append(entry)
        if rank == 0:
            print(f"gloo_bench: {args.label} {name}: p50 {percentile(timed, 50):.3f} ms, "
                  f"p99 {percentile(timed, 99):.3f} ms over {args.iters} timed "
                  f"{'steps' if len(buckets) > 1 else 'calls'}{' (WRONG RESULTS)' if wrong or prep_wrong else ''}")
    dist.barrier()
    if rank == 0 and args.json:
        import resource
        with open(args.json, "w") as f:
            json.dump({"tool": "gloo_bench.py", "mode": args.mode, "label": args.label, "ranks": n,
                       "in_place": True, "barrier": args.barrier, "optireduce_loaded": False, "library_version": "",
                       "torch": torch.__version__, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                       "entries": out_entries, "wrong_results": wrong_any}, f)
    dist.destroy_process_group()
    return 3 if wrong_any else 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_ranks(argv, ranks, timeout):
    """Runs this script with `--rank r --port P argv...` once per rank (the ranks meet on
    127.0.0.1:P) and waits at most `timeout` seconds for all of them. Returns the first non-zero
    exit code, 124 on timeout."""
    port = free_port()
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank", str(r), "--port", str(port)]
                              + list(argv), env=env) for r in range(ranks)]
    deadline = time.monotonic() + timeout
    rc = 0
    try:
        for p in procs:
            rc = rc or p.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        print(f"gloo_bench: timed out after {timeout:g} s", file=sys.stderr)
        rc = 124
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return rc


def main():
    # One set of flags, before or after the subcommand (as optireduce-bench).
    flags = argparse.ArgumentParser(add_help=False)
    defaults = {"ranks": 4, "timeout": 600.0, "json": None, "label": "gloo", "warmup": None, "iters": None,
                "warmup_calls": None, "tolerance": 1e-3, "barrier": "mpi", "corrupt_result": 0, "no_check": False,
                "in_place": False, "rank": None, "port": None}
    S = argparse.SUPPRESS
    flags.add_argument("--ranks", type=int, default=S)
    flags.add_argument("--timeout", type=float, default=S, help="kill the ranks after this many seconds")
    flags.add_argument("--json", default=S)
    flags.add_argument("--label", default=S)
    flags.add_argument("--warmup", type=int, default=S, help="default 30 calls, 10 steps, 1 model step")
    flags.add_argument("--iters", type=int, default=S, help="default 50 calls, 30 steps, 5 model steps")
    flags.add_argument("--warmup-calls", type=int, default=S, help="per size class first (default 22 for model, else 0)")
    flags.add_argument("--no-check", action="store_true", default=S)
    flags.add_argument("--tolerance", type=float, default=S)
    flags.add_argument("--in-place", action="store_true", default=S, help="accepted for symmetry: Gloo is always in place")
    flags.add_argument("--barrier", choices=("mpi", "host"), default=S,
                       help="what starts each iteration: mpi (Gloo's barrier) or host (Unix sockets: nothing over the network)")
    flags.add_argument("--corrupt-result", type=int, default=S, help="testing: add 1 to one entry of this call's result")
    flags.add_argument("--rank", type=int, default=S, help=S)
    flags.add_argument("--port", type=int, default=S, help=S)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, parents=[flags])
    sub = ap.add_subparsers(dest="mode")
    lat = sub.add_parser("latency", parents=[flags])
    lat.add_argument("--sizes", default="1M,4M,16M")
    sw = sub.add_parser("sweep", parents=[flags])
    sw.add_argument("--min", default="4K")
    sw.add_argument("--max", default="64M")
    sw.add_argument("--factor", type=float, default=2.0)
    st = sub.add_parser("step", parents=[flags])
    st.add_argument("--buckets", required=True)
    mod = sub.add_parser("model", parents=[flags])
    mod.add_argument("--model", default="resnet50", help="comma list of resnet50, bert-large, gpt2")
    mod.add_argument("--scale", default="1.0", help="one value, or one per model")
    mod.add_argument("--bucket-mb", type=float, default=25)
    mod.add_argument("--first-bucket-mb", type=float, default=1)
    mod.add_argument("--compute-ms", type=float)
    args = ap.parse_args()
    for k, v in defaults.items():
        if not hasattr(args, k):
            setattr(args, k, v)
    args.mode = args.mode or "latency"
    if args.mode == "latency" and not hasattr(args, "sizes"):
        args.sizes = "1M,4M,16M"
    steps = args.mode in ("step", "model")
    args.warmup = args.warmup if args.warmup is not None else (1 if args.mode == "model" else 10 if steps else 30)
    args.iters = args.iters if args.iters is not None else (5 if args.mode == "model" else 30 if steps else 50)
    if args.warmup_calls is None:
        args.warmup_calls = 22 if args.mode == "model" else 0
    args.check = not args.no_check
    if args.rank is not None:
        return worker(args)
    return launch_ranks(sys.argv[1:], args.ranks, args.timeout)


if __name__ == "__main__":
    sys.exit(main())

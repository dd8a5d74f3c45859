#!/usr/bin/python3
"""Gloo twin of tools/optireduce_itertime.cpp for scripts/compare.sh: the same two modes and the
same JSON, with torch.distributed (backend gloo, CPU float32 tensors, init over TCP on 127.0.0.1).

    /usr/bin/python3 gloo_bench.py --ranks 4 latency --sizes 1M,4M --iters 30 --warmup 25 --json out.json
    /usr/bin/python3 gloo_bench.py --ranks 4 model --model resnet50 --iters 5 --json out.json

It starts the ranks itself (one process each, torch.set_num_threads(1)). Use Debian's interpreter
(/usr/bin/python3, python3-torch). Each call is timed after a barrier and recorded as the max over
ranks, as in the MPI tool. The model table (parameter counts, compute times and their sources,
DDP buckets) mirrors tools/optireduce_itertime.cpp: keep them in step.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

# See tools/optireduce_itertime.cpp for the sources of these figures (ResNet-50's compute time is a
# published measurement; BERT-large's and GPT-2's are 6*N*tokens estimates at 40 TFLOP/s).
MODELS = {"resnet50": (25_557_032, 0.213), "bert-large": (340_000_000, 0.42), "gpt2": (124_439_808, 0.15)}
MIB = 1 << 20


def parse_size(s):
    mul = {"K": 1024, "M": MIB, "G": 1 << 30}.get(s[-1:].upper(), 1)
    v = int(float(s[:-1] if mul != 1 else s) * mul)
    if v < 4 or v % 4:
        raise ValueError(f"size {s!r} is not a positive multiple of 4 bytes")
    return v


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


def percentile(v, p):  # nearest rank, as the MPI tool
    v = sorted(v)
    k = max(1, min(len(v), -(-len(v) * p // 100)))
    return v[int(k) - 1]


def worker(args):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    rank, n = args.rank, args.ranks
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=n)

    def max_over_ranks(values):
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.tolist()

    doc = {"tool": "gloo_bench.py", "label": args.label, "ranks": n, "optireduce_loaded": False,
           "torch": torch.__version__}
    if args.mode == "latency":
        sizes = [parse_size(s) for s in args.sizes.split(",")]
        buf = torch.ones(max(sizes) // 4, dtype=torch.float32)
        doc.update(mode="latency", iters=args.iters, warmup=args.warmup, sizes=[])
        for b in sizes:
            x = buf[: b // 4]
            for _ in range(args.warmup):
                dist.all_reduce(x)
            t = []
            for _ in range(args.iters):
                x.fill_(1.0)
                dist.barrier()
                t0 = time.perf_counter()
                dist.all_reduce(x)
                t.append(time.perf_counter() - t0)
            t = max_over_ranks(t)
            doc["sizes"].append({"bytes": b, "p50_ms": percentile(t, 50) * 1e3, "p99_ms": percentile(t, 99) * 1e3,
                                 "engine": None, "samples_ms": [x * 1e3 for x in t]})
            if rank == 0:
                print(f"gloo_bench: {b} bytes: p50 {percentile(t, 50) * 1e3:.2f} ms, p99 {percentile(t, 99) * 1e3:.2f} ms",
                      file=sys.stderr)
    else:
        models = args.model.split(",")
        scales = [float(x) for x in args.scale.split(",")]
        if len(scales) not in (1, len(models)) or any(m not in MODELS for m in models):
            raise SystemExit("gloo_bench: --model takes resnet50, bert-large, gpt2; --scale one value or one per model")
        doc.update(mode="model", runs=[])
        for mi, name in enumerate(models):
            scale = scales[0] if len(scales) == 1 else scales[mi]
            params, compute = MODELS[name]
            full = ddp_buckets(params, int(args.bucket_mb * MIB), int(args.first_bucket_mb * MIB))
            buckets = list(full)
            if scale < 1.0:
                first_n = 1 if args.first_bucket_mb > 0 else 0
                rest = len(full) - first_n
                keep = max(1, round(scale * rest))
                buckets = full[: first_n + min(keep, rest)]
            compute_s = (args.compute_ms / 1e3 if args.compute_ms is not None else compute) * scale
            buf = torch.ones(max(buckets) // 4, dtype=torch.float32)
            classes = {}
            for b in buckets:  # per power-of-two size class, as the MPI tool
                classes.setdefault(b.bit_length(), []).append(b)
            for members in classes.values():
                for i in range(args.warmup_calls):
                    dist.all_reduce(buf[: members[i % len(members)] // 4])

            def step():
                time.sleep(compute_s)
                c0 = time.perf_counter()
                for b in buckets:
                    dist.all_reduce(buf[: b // 4])
                return time.perf_counter() - c0

            for _ in range(args.warmup_iters):
                step()
            it, comm = [], []
            for _ in range(args.iters):
                dist.barrier()
                t0 = time.perf_counter()
                comm.append(step())
                it.append(time.perf_counter() - t0)
            it, comm = max_over_ranks(it), max_over_ranks(comm)
            doc["runs"].append(dict(model=name, params=params, scale=scale, full_bucket_count=len(full),
                                    buckets_bytes=buckets, replayed_bytes=sum(buckets), compute_s=compute_s,
                                    iters=args.iters, optireduce_loaded=False,
                                    s_per_iter_median=statistics.median(it), s_per_iter_p99=percentile(it, 99),
                                    comm_s_median=statistics.median(comm), engine=None, s_per_iter=it, comm_s=comm))
            if rank == 0:
                print(f"gloo_bench: {name} (scale {scale:g}, {len(buckets)} buckets, compute {compute_s:.3f} s): "
                      f"{statistics.median(it):.3f} s/iteration (median of {args.iters})", file=sys.stderr)
    dist.barrier()
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--json")
    ap.add_argument("--label", default="gloo")
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=float, default=600, help="kill the ranks after this many seconds")
    sub = ap.add_subparsers(dest="mode", required=True)
    lat = sub.add_parser("latency")
    lat.add_argument("--sizes", default="1M,4M")
    lat.add_argument("--iters", type=int, default=30)
    lat.add_argument("--warmup", type=int, default=25)
    mod = sub.add_parser("model")
    mod.add_argument("--model", default="resnet50", help="comma list of resnet50, bert-large, gpt2")
    mod.add_argument("--iters", type=int, default=5)
    mod.add_argument("--warmup-calls", type=int, default=22)
    mod.add_argument("--warmup-iters", type=int, default=1)
    mod.add_argument("--bucket-mb", type=float, default=25)
    mod.add_argument("--first-bucket-mb", type=float, default=1)
    mod.add_argument("--compute-ms", type=float)
    mod.add_argument("--scale", default="1.0", help="one value, or one per model")
    args = ap.parse_args()
    if args.rank is not None:
        worker(args)
        return 0
    return launch_ranks(os.path.abspath(__file__), args.ranks, args.timeout, sys.argv[1:], "gloo_bench")


def launch_ranks(script, ranks, timeout, argv, name):
    """Runs `script --rank r --port P argv...` once per rank (the ranks meet on 127.0.0.1:P) and
    waits at most `timeout` seconds for all of them. Returns the first non-zero exit code, 124 on
    timeout. scripts/bench/gloo_allreduce_bench.py starts its ranks with it too."""
    port = free_port()
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, script, "--rank", str(r), "--port", str(port)] + list(argv), env=env)
             for r in range(ranks)]
    deadline = time.monotonic() + timeout
    rc = 0
    try:
        for p in procs:
            left = max(1.0, deadline - time.monotonic())
            rc = rc or p.wait(timeout=left)
    except subprocess.TimeoutExpired:
        print(f"{name}: timed out after {timeout:g} s", file=sys.stderr)
        rc = 124
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return rc


if __name__ == "__main__":
    sys.exit(main())

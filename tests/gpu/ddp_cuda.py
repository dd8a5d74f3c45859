#!/usr/bin/python3
"""A 2-rank DDP step on CUDA tensors over the "optireduce" backend, against the same step over
gloo, where torch.cuda.is_available(); SKIPPED (exit 77) everywhere else.

    ddp_cuda.py          checks for a device, then starts 2 ranks (python3 -m optireduce.launch)
    ddp_cuda.py --rank   one rank (what the launcher starts)

Each rank uses cuda:LOCAL_RANK (cuda:0 when there is one device). Checks: an async all_reduce of a
CUDA float32 and a bfloat16 tensor (staged through pinned host memory) sums right and its Work's
future carries the device; DDP over the backend and DDP over a gloo group make the same gradients
and, after one SGD step, the same parameters (within float32 rounding of the two summation
orders). Exit 0, 1 on a failed check, 77 without CUDA, torch or the package.
"""
import os
import subprocess
import sys

try:
    import torch
    import torch.distributed as dist
except ImportError as error:
    print(f"SKIP: torch not importable by {sys.executable}: {error}", file=sys.stderr)
    sys.exit(77)


def launch():
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device here (torch.cuda.is_available() is False): the backend's GPU path is untested",
              flush=True)
        return 77
    return subprocess.call([sys.executable, "-m", "optireduce.launch", "--nproc-per-node", "2", __file__, "--rank"])


def rank_main():
    import optireduce.torch  # noqa: F401 (registers the backend)
    dist.init_process_group("optireduce")
    rank = dist.get_rank()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
    torch.cuda.set_device(device)
    failures = []

    for dtype in (torch.float32, torch.bfloat16):
        t = torch.full((1 << 18,), float(rank + 1), device=device, dtype=dtype)
        work = dist.all_reduce(t, async_op=True)
        work.get_future().wait()
        torch.cuda.current_stream(device).synchronize()
        if not torch.equal(t, torch.full_like(t, 3.0)):
            failures.append(f"all_reduce of a CUDA {dtype} tensor: {t[:4].tolist()}")

    gloo = dist.new_group(backend="gloo")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(device)
    twin = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(device)
    twin.load_state_dict(model.state_dict())
    ours = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device])
    theirs = torch.nn.parallel.DistributedDataParallel(twin, device_ids=[device], process_group=gloo)
    torch.manual_seed(1 + rank)
    x, y = torch.randn(64, 256, device=device), torch.randint(0, 10, (64,), device=device)
    for ddp in (ours, theirs):
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        optimizer.step()
    for (name, a), b in zip(model.named_parameters(), twin.parameters()):
        if not torch.allclose(a.grad, b.grad, rtol=1e-5, atol=1e-6) or not torch.allclose(a, b, rtol=1e-5, atol=1e-6):
            failures.append(f"DDP over optireduce and over gloo differ at {name}")
    for f in failures:
        print(f"ddp_cuda [rank {rank}] FAIL: {f}", file=sys.stderr, flush=True)
    if rank == 0 and not failures:
        print("ddp_cuda: PASS: CUDA all_reduce (float32, bfloat16) and a DDP step match gloo", flush=True)
    dist.destroy_process_group()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(rank_main() if "--rank" in sys.argv else launch())

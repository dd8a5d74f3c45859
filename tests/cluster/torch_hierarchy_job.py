#!/usr/bin/python3
"""One rank of cluster.torch_hierarchy_* (torch_hierarchy.sh): a torch job over the "optireduce"
process group launched as torchrun launches (no MPI: the engine library over a gloo bootstrap,
whose split gives the three-stage call), ranks spread over scripts/cluster.sh's hosts.

TEST_CALLS allreduces of TEST_FLOATS float32 elements (small integers: the exact sum is the same
in any order), then the same count of TEST_HALF_CALLS for each of float16 and bfloat16. Each call:
went through the engine (its sequence advanced, ok); its result bitwise identical on every rank
(digests gathered); where no rank's call was bounded, bitwise the exact sum computed here, else
within a relative RMS error of 0.3, or twice the square root of the share of entries the call says
it dropped. At least one float32 call was bounded somewhere (past calibration). The script checks
the report (the three stages) and the links' bytes. Exit 0, 1 on a failed check, 77 without torch.
"""
import datetime
import hashlib
import math
import os
import sys

try:
    import torch
    import torch.distributed as dist
except ImportError as error:
    print(f"SKIP: torch not importable by {sys.executable}: {error}", file=sys.stderr)
    sys.exit(77)

import optireduce.torch


def pattern(n, rank, call, dtype):
    """Integers in [-16, 16]: exact in every format, and so is their sum over a few ranks."""
    i = torch.arange(n, dtype=torch.int64)
    return ((i * (rank + 1) + 7 * call + 3 * rank) % 33 - 16).to(dtype)


def check_calls(rank, size, floats, calls, dtype, first_call, bad):
    """Runs `calls` allreduces of `dtype`; returns how many were bounded on some rank."""
    bounded = 0
    worst = 0.0
    for c in range(first_call, first_call + calls):
        before = optireduce.torch.last_call()
        t = pattern(floats, rank, c, dtype)
        dist.all_reduce(t)
        call = optireduce.torch.last_call()
        sequence = (before.sequence if before else 0) + 1
        if call is None or call.sequence != sequence or not call.ok:
            bad.append(f"{dtype} call {c}: not run by the engine ({call})")
            continue
        digest = hashlib.sha256(t.view(torch.uint8).numpy().tobytes()).hexdigest()
        seen = [None] * size
        dist.all_gather_object(seen, (digest, call.kind))
        if len({d for d, _ in seen}) != 1:
            bad.append(f"{dtype} call {c}: replicas differ")
        want = sum(pattern(floats, r, c, torch.float64) for r in range(size))
        if not any(kind == "bounded" for _, kind in seen):
            if not torch.equal(t.double(), want):
                bad.append(f"{dtype} call {c}: exact call, result is not the exact sum")
            continue
        bounded += 1
        rel = math.sqrt(((t.double() - want) ** 2).sum().item() / max((want ** 2).sum().item(), 1e-30))
        worst = max(worst, rel)
        allowed = max(0.3, 2 * math.sqrt(call.dropped_fraction))
        if rel > allowed:
            bad.append(f"{dtype} call {c}: relative RMS error {rel:.4f} beyond {allowed:.4f}")
    if rank == 0:
        print(f"{dtype}: {calls} calls of {floats} elements on {size} ranks, {bounded} bounded somewhere, "
              f"worst relative RMS error {worst:.2e}", flush=True)
    return bounded


def main():
    floats = int(os.environ.get("TEST_FLOATS", 1 << 19))
    calls = int(os.environ.get("TEST_CALLS", 16))
    half_calls = int(os.environ.get("TEST_HALF_CALLS", 0))
    dist.init_process_group("optireduce", timeout=datetime.timedelta(seconds=60))
    rank, size = dist.get_rank(), dist.get_world_size()
    bad = []
    if check_calls(rank, size, floats, calls, torch.float32, 0, bad) == 0:
        bad.append(f"none of {calls} float32 calls was bounded (calibration never ended?)")
    for dtype in (torch.float16, torch.bfloat16) if half_calls else ():
        check_calls(rank, size, floats, half_calls, dtype, calls, bad)
    dist.destroy_process_group()  # writes the report
    for line in bad:
        print(f"FAIL: rank {rank}: {line}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

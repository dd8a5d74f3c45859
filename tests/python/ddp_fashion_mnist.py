#!/usr/bin/python3
"""A DDP job on Fashion-MNIST: torch DistributedDataParallel over gloo, gradients through
optireduce.torch.allreduce_hook (or DDP's own gloo allreduce: the plain baseline), or DDP over the
"optireduce" backend (--reduce backend); launched by mpirun or as torchrun launches
(python3 -m optireduce.launch), each rank on one CPU thread.

Rank 0 writes OUT.json (per-step loss averaged over the ranks, held-out accuracy on the whole
test set at the end and on a subset every --eval-every steps, steps to the target accuracy on
that subset, replica and library figures) and OUT.params.npy (final parameters), prints one
line per figure and checks what it is asked to:
  --expect-library absent|exact|bounded  what optireduce.stats()/last_call() must report
                                         (bounded: --min-bounded-share of the calls)
  --expect-identical                     replicas bitwise identical at the end
  --compare-loss B.json                  windowed loss curve within --loss-tolerance of B's
  --compare-accuracy B.json              final accuracy within --accuracy-tolerance of B's
Exit 0, 1 on a failed check, 77 when torch, mpi4py or the data set is missing.
"""
import argparse
import hashlib
import json
import os
import sys
import time

try:
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
except ImportError as error:
    print(f"SKIP: torch/numpy not importable by {sys.executable}: {error}", file=sys.stderr)
    sys.exit(77)

import fashion_mnist
import gloo_group
import optireduce
import optireduce.torch


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reduce", choices=["hook", "gloo", "backend"], default="hook",
                   help="hook: gloo with optireduce.torch.allreduce_hook; gloo: plain; backend: the optireduce backend")
    p.add_argument("--grad-dtype", choices=["float32", "bfloat16"], default="float32",
                   help="--reduce hook: bfloat16 hands the hook a bf16 copy of each bucket (bf16_buckets), so the "
                        "buckets cross as bf16 (the engine's 16-bit sums)")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    p.add_argument("--hidden", type=int, default=512, help="784-H-H-10: two gradient buckets above 1 MiB")
    p.add_argument("--lr", type=float, default=0.05, help="decayed linearly to 0 over the run (a stable end point)")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--eval-subset", type=int, default=2000,
                   help="test samples of the evaluations before the last (the last one takes all 10000)")
    p.add_argument("--target", type=float, default=0.80, help="held-out accuracy (fraction) for steps-to-target")
    p.add_argument("--data", default=fashion_mnist.DEFAULT_DIR)
    p.add_argument("--out", required=True, help="rank 0 writes OUT.json and OUT.params.npy")
    p.add_argument("--expect-library", choices=["absent", "exact", "bounded"])
    p.add_argument("--min-bounded-share", type=float, default=0.5,
                   help="--expect-library bounded: at least this share of the engine's calls bounded")
    p.add_argument("--expect-identical", action="store_true")
    p.add_argument("--compare-loss")
    p.add_argument("--loss-tolerance", type=float, default=0.02)
    p.add_argument("--loss-window", type=int, default=10, help="steps averaged per point of the loss curve")
    p.add_argument("--compare-accuracy")
    p.add_argument("--accuracy-tolerance", type=float, default=0.02)
    return p.parse_args()


def make_model(hidden):
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 10))


def bf16_buckets(hook):
    """The hook on a bf16 copy of each bucket, its result copied back into the float32 bucket (what
    torch's bf16_compress_wrapper does; DDP refuses that one without CUDA and NCCL)."""
    def on_bf16(state, bucket):
        buffer = bucket.buffer()
        bucket.set_buffer(buffer.to(torch.bfloat16))
        future = hook(state, bucket)

        def widen(done):
            buffer.copy_(done.value())
            return buffer
        return future.then(widen)
    return on_bf16


def evaluate(model, rank, size, test_x, test_y):
    """Held-out accuracy (fraction) over the whole test set, each rank a strided slice."""
    model.eval()
    correct = torch.zeros(2, dtype=torch.float64)
    with torch.no_grad():
        x = torch.from_numpy(fashion_mnist.normalize(test_x[rank::size]))
        correct[0] = (model(x).argmax(1) == torch.from_numpy(test_y[rank::size])).sum()
        correct[1] = len(x)
    dist.all_reduce(correct)
    model.train()
    return float(correct[0] / correct[1])


def library_figures(reduce):
    """This rank's optireduce figures, summed over the ranks, or None without the library."""
    s = optireduce.stats()
    local = torch.tensor([-1.0] * 6 if s is None else
                         [s.intercepted_calls, s.bounded_calls, s.fallback_calls, s.passthrough_calls,
                          s.entries_reduced, s.entries_dropped], dtype=torch.float64)
    dist.all_reduce(local)
    if s is None:
        return None
    if reduce == "backend":
        last = optireduce.torch.last_call()
    else:
        from mpi4py import MPI
        last = optireduce.last_call(MPI.COMM_WORLD)
    names = ["intercepted_calls", "bounded_calls", "fallback_calls", "passthrough_calls", "entries_reduced",
             "entries_dropped"]
    figures = {n: int(v) for n, v in zip(names, local.tolist())}
    figures["dropped_fraction"] = figures["entries_dropped"] / max(1, figures["entries_reduced"])
    figures["version"] = optireduce.version()
    figures["last_call_kind"] = None if last is None else last.kind
    figures["last_call_format"] = None if last is None else getattr(last, "format", None)
    return figures


def replica_figures(model, rank):
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    digests = [None] * dist.get_world_size()
    dist.all_gather_object(digests, hashlib.sha256(flat.numpy().tobytes()).hexdigest())
    reference = flat.clone()
    dist.broadcast(reference, 0)
    diff = torch.tensor([(flat - reference).abs().max().item()], dtype=torch.float64)
    dist.all_reduce(diff, op=dist.ReduceOp.MAX)
    return len(set(digests)) == 1, diff.item(), flat.numpy()


def windowed(curve, window):
    return [float(np.mean(curve[i:i + window])) for i in range(0, len(curve) - window + 1, window)]


def main():
    started = time.perf_counter()
    args = parse_args()
    torch.set_num_threads(1)
    if not fashion_mnist.available(args.data):
        print(f"SKIP: Fashion-MNIST not found in {args.data}", file=sys.stderr)
        return 77
    if args.reduce == "hook":
        try:
            import mpi4py  # noqa: F401 (the hook needs it; say so before starting)
        except ImportError as error:
            print(f"SKIP: mpi4py not importable: {error}", file=sys.stderr)
            return 77
    rank, size = gloo_group.init("optireduce" if args.reduce == "backend" else "gloo")
    train_x, train_y, test_x, test_y = fashion_mnist.load(args.data)

    torch.manual_seed(args.seed)
    model = make_model(args.hidden)
    ddp = torch.nn.parallel.DistributedDataParallel(model)  # broadcasts rank 0's weights over gloo
    if args.reduce == "hook":
        hook = optireduce.torch.allreduce_hook
        if args.grad_dtype == "bfloat16":
            hook = bf16_buckets(hook)
        ddp.register_comm_hook(None, hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum)
    # Without decay the final accuracy swings by a few points from one evaluation to the next,
    # more than the differences the comparisons look for.
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / args.steps)

    global_batch = args.batch * size
    per_epoch = len(train_y) // global_batch
    losses = torch.zeros(args.steps, dtype=torch.float64)
    evals, steps_to_target = [], None
    times = {"startup": time.perf_counter() - started, "evaluation": 0.0}
    loop_start = time.perf_counter()
    for step in range(args.steps):
        epoch, index = divmod(step, per_epoch)
        if index == 0:  # one shared permutation per epoch; each rank takes its own slice
            permutation = np.random.default_rng(args.seed * 1000003 + epoch).permutation(len(train_y))
        batch = permutation[index * global_batch + rank * args.batch:][:args.batch]
        x = torch.from_numpy(fashion_mnist.normalize(train_x[batch]))
        loss = F.cross_entropy(ddp(x), torch.from_numpy(train_y[batch]))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses[step] = loss.item()
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            eval_start = time.perf_counter()
            last = step + 1 == args.steps
            n = len(test_y) if last else args.eval_subset
            accuracy = evaluate(model, rank, size, test_x[:n], test_y[:n])
            times["evaluation"] += time.perf_counter() - eval_start
            evals.append({"step": step + 1, "accuracy": accuracy, "test_samples": n})
            if steps_to_target is None and accuracy >= args.target:
                steps_to_target = step + 1
            if rank == 0:
                print(f"step {step + 1:4d}  held-out accuracy {accuracy:.4f} ({n} test samples)", flush=True)

    times["training"] = time.perf_counter() - loop_start - times["evaluation"]
    dist.all_reduce(losses)
    curve = (losses / size).tolist()
    identical, max_diff, flat = replica_figures(model, rank)
    library = library_figures(args.reduce) if args.reduce != "gloo" else None
    status = 0
    if rank == 0:
        status = report_and_check(args, curve, evals, steps_to_target, identical, max_diff, flat, library, size,
                                  times)
    verdict = torch.tensor([status], dtype=torch.int32)
    dist.broadcast(verdict, 0)
    dist.destroy_process_group()
    optireduce.torch.shutdown()
    return int(verdict.item())


def report_and_check(args, curve, evals, steps_to_target, identical, max_diff, flat, library, size, times):
    failures = []
    result = {"reduce": args.reduce, "grad_dtype": args.grad_dtype, "ranks": size, "steps": args.steps, "batch_per_rank": args.batch,
              "hidden": args.hidden, "loss_curve": curve, "evals": evals, "final_accuracy": evals[-1]["accuracy"],
              "target": args.target, "steps_to_target": steps_to_target, "replicas_identical": identical,
              "replica_max_abs_diff": max_diff, "library": library, "seconds": times,
              "launch": "torchrun" if "RANK" in os.environ else "mpirun",
              "optireduce_env": {k: v for k, v in os.environ.items() if k.startswith("OPTIREDUCE_")}}
    print(f"final: {args.steps} steps, held-out accuracy {result['final_accuracy']:.4f}, steps to "
          f"{args.target:g}: {steps_to_target}, replicas {'bitwise identical' if identical else 'differ'} "
          f"(max |difference| {max_diff:.3g})")
    print("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in times.items()))
    if library is not None:
        print("library: " + ", ".join(f"{k} {v}" for k, v in library.items()))

    if args.expect_library == "absent" and library is not None:
        failures.append(f"the library is loaded (version {library['version']}), expected it absent")
    if args.expect_library in ("exact", "bounded"):
        if library is None:
            failures.append("the library is not loaded")
        elif library["intercepted_calls"] <= 0:
            failures.append("no call went through the engine")
    if args.expect_library == "exact" and library:
        if library["bounded_calls"] or library["entries_dropped"] or library["last_call_kind"] != "exact":
            failures.append(f"reliable mode ran {library['bounded_calls']} bounded calls, dropped "
                            f"{library['entries_dropped']} entries, last call {library['last_call_kind']}")
    if args.expect_library == "bounded" and library:
        # Past calibration: calls must have run under deadlines (the rest exact: calibration and
        # the loss budget's fallbacks).
        if library["bounded_calls"] < args.min_bounded_share * library["intercepted_calls"]:
            failures.append(f"only {library['bounded_calls']} of {library['intercepted_calls']} calls were bounded "
                            f"(expected a share of at least {args.min_bounded_share})")
        if library["last_call_kind"] not in ("bounded", "fallback"):
            failures.append(f"the last call was {library['last_call_kind']}, not bounded")
    if args.expect_library in ("exact", "bounded") and library and args.reduce == "hook" and \
            library["last_call_format"] != args.grad_dtype:
        failures.append(f"the last call's elements were {library['last_call_format']}, not {args.grad_dtype}")
    if args.expect_identical and not identical:
        failures.append(f"replicas differ (max |difference| {max_diff:.3g})")

    if args.compare_loss:
        base = load(args.compare_loss)
        ours, theirs = windowed(curve, args.loss_window), windowed(base["loss_curve"], args.loss_window)
        worst = max(abs(a - b) / b for a, b in zip(ours, theirs))
        result["loss_curve_worst_relative_diff"] = worst
        print(f"loss curve vs {os.path.basename(args.compare_loss)}: worst relative difference {worst:.4%} over "
              f"{len(ours)} windows of {args.loss_window} steps (first {ours[0]:.4f} vs {theirs[0]:.4f}, "
              f"last {ours[-1]:.4f} vs {theirs[-1]:.4f})")
        if len(ours) != len(theirs) or worst > args.loss_tolerance:
            failures.append(f"loss curve differs by {worst:.4%} (> {args.loss_tolerance:.0%})")
        base_params = np.load(os.path.splitext(args.compare_loss)[0] + ".params.npy")
        diff = float(np.max(np.abs(flat - base_params)))
        rel = float(np.linalg.norm(flat - base_params) / np.linalg.norm(base_params))
        result["params_vs_baseline"] = {"max_abs_diff": diff, "relative_l2": rel}
        print(f"parameters vs {os.path.basename(args.compare_loss)}: max |difference| {diff:.3g}, relative L2 {rel:.3g}")
    if args.compare_accuracy:
        base = load(args.compare_accuracy)
        gap = result["final_accuracy"] - base["final_accuracy"]
        result["accuracy_vs_baseline"] = gap
        print(f"accuracy vs {os.path.basename(args.compare_accuracy)}: {result['final_accuracy']:.4f} vs "
              f"{base['final_accuracy']:.4f} (difference {gap:+.4f}); steps to {args.target:g}: "
              f"{steps_to_target} vs {base['steps_to_target']}")
        if abs(gap) > args.accuracy_tolerance:
            failures.append(f"accuracy {result['final_accuracy']:.4f} is more than {args.accuracy_tolerance} away "
                            f"from {base['final_accuracy']:.4f}")

    result["failures"] = failures
    with open(args.out + ".json", "w") as f:
        json.dump(result, f, indent=1)
    np.save(args.out + ".params.npy", flat)
    for failure in failures:
        print(f"ddp_fashion_mnist: FAIL: {failure}", file=sys.stderr)
    if not failures:
        print("ddp_fashion_mnist: PASS")
    return 1 if failures else 0


def load(path):
    with open(path) as f:
        return json.load(f)


if __name__ == "__main__":
    sys.exit(main())

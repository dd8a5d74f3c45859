#!/usr/bin/python3
"""A ZeRO-style loop on Fashion-MNIST over the "optireduce" backend, against the same loop with an
allreduce, in one job (each rank on one CPU thread):

  zero       each step the flat gradient is reduce-scattered (_reduce_scatter_base, AVG): every
             rank gets the averaged gradient of its own shard of the parameters, updates that shard
             (SGD with momentum; the momentum of its shard only), and the parameters are
             all-gathered (all_gather) for the next step
  allreduce  the same, with the whole gradient averaged by all_reduce and each rank updating its
             shard from it

Both start from the same weights and see the same batches. Rank 0 prints each run's held-out
accuracy (10 000 test samples) and checks that the reduce-scatter run reaches the allreduce run's
within --tolerance, that the engine served the reduce-scatters (the process counters), and that
the replicas are bitwise identical after the last all-gather. Exit 0, 1 on a failed check, 77
without torch or the data set.
"""
import argparse
import hashlib
import sys

import warnings

# Its imports skip (77) without torch or numpy; its model is this test's.
from ddp_fashion_mnist import F, dist, fashion_mnist, gloo_group, make_model, np, optireduce, torch


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--lr", type=float, default=0.05, help="decayed linearly to 0")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tolerance", type=float, default=0.02, help="held-out accuracy: zero within this of allreduce")
    p.add_argument("--data", default=fashion_mnist.DEFAULT_DIR)
    return p.parse_args()


def flat_of(tensors):
    return torch.cat([t.reshape(-1) for t in tensors])


def train(args, variant, rank, size, train_x, train_y):
    torch.manual_seed(args.seed)
    model = make_model(args.hidden)
    params = list(model.parameters())
    total = sum(p.numel() for p in params)
    shard = -(-total // size)  # padded so every rank's shard has the same size
    flat = torch.zeros(shard * size)
    flat[:total] = flat_of([p.detach() for p in params])
    dist.broadcast(flat, 0)
    mine = slice(rank * shard, (rank + 1) * shard)
    velocity = torch.zeros(shard)
    grads = torch.zeros(shard * size)
    global_batch = args.batch * size
    per_epoch = len(train_y) // global_batch
    for step in range(args.steps):
        # Parameters from the flat (all-gathered) copy.
        offset = 0
        with torch.no_grad():
            for p in params:
                p.copy_(flat[offset:offset + p.numel()].view_as(p))
                offset += p.numel()
        epoch, index = divmod(step, per_epoch)
        if index == 0:
            permutation = np.random.default_rng(args.seed * 1000003 + epoch).permutation(len(train_y))
        batch = permutation[index * global_batch + rank * args.batch:][:args.batch]
        x = torch.from_numpy(fashion_mnist.normalize(train_x[batch]))
        model.zero_grad()
        F.cross_entropy(model(x), torch.from_numpy(train_y[batch])).backward()
        grads[:total] = flat_of([p.grad for p in params])
        if variant == "zero":
            shard_grad = torch.empty(shard)
            dist._reduce_scatter_base(shard_grad, grads, op=dist.ReduceOp.AVG)
        else:
            dist.all_reduce(grads, op=dist.ReduceOp.AVG)
            shard_grad = grads[mine].clone()
        lr = args.lr * (1 - step / args.steps)
        velocity.mul_(args.momentum).add_(shard_grad)
        updated = flat[mine] - lr * velocity
        pieces = [torch.empty(shard) for _ in range(size)]
        dist.all_gather(pieces, updated)
        flat = torch.cat(pieces)
    offset = 0
    with torch.no_grad():
        for p in params:
            p.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
    return model, flat[:total]


def accuracy(model, rank, size, test_x, test_y):
    with torch.no_grad():
        x = torch.from_numpy(fashion_mnist.normalize(test_x[rank::size]))
        figures = torch.tensor([(model(x).argmax(1) == torch.from_numpy(test_y[rank::size])).sum().item(), len(x)],
                               dtype=torch.float64)
    dist.all_reduce(figures)
    return float(figures[0] / figures[1])


def identical(flat, size):
    digests = [None] * size
    dist.all_gather_object(digests, hashlib.sha256(flat.numpy().tobytes()).hexdigest())
    return len(set(digests)) == 1


def main():
    args = parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message=".*_reduce_scatter_base.*")
    if not fashion_mnist.available(args.data):
        print(f"SKIP: Fashion-MNIST not found in {args.data}", file=sys.stderr)
        return 77
    rank, size = gloo_group.init("optireduce")
    train_x, train_y, test_x, test_y = fashion_mnist.load(args.data)
    results = {}
    for variant in ("zero", "allreduce"):
        before = optireduce.stats()
        model, flat = train(args, variant, rank, size, train_x, train_y)
        after = optireduce.stats()
        served = torch.tensor([after.intercepted_calls - before.intercepted_calls,
                               after.bounded_calls - before.bounded_calls], dtype=torch.float64)
        dist.all_reduce(served, op=dist.ReduceOp.MIN)
        results[variant] = (accuracy(model, rank, size, test_x, test_y), identical(flat, size), served.tolist())
    failures = []
    if rank == 0:
        for variant, (acc, same, (engine, bounded)) in results.items():
            print(f"{variant}: held-out accuracy {acc:.4f}, replicas {'identical' if same else 'differ'}, "
                  f"engine calls {engine:.0f} ({bounded:.0f} bounded) on the rank with fewest")
            if not same:
                failures.append(f"{variant}: replicas differ after the last all-gather")
            if engine < args.steps:
                failures.append(f"{variant}: the engine served {engine:.0f} of {args.steps} gradient reductions")
        gap = results["zero"][0] - results["allreduce"][0]
        print(f"reduce-scatter vs allreduce: {gap:+.4f} (tolerance {args.tolerance})")
        if abs(gap) > args.tolerance:
            failures.append(f"accuracy {results['zero'][0]:.4f} is more than {args.tolerance} from the allreduce "
                            f"loop's {results['allreduce'][0]:.4f}")
        for f in failures:
            print(f"zero_fashion_mnist: FAIL: {f}", file=sys.stderr)
        if not failures:
            print("zero_fashion_mnist: PASS")
    verdict = torch.tensor([len(failures)])
    dist.broadcast(verdict, 0)
    dist.destroy_process_group()
    return 1 if verdict.item() else 0


if __name__ == "__main__":
    sys.exit(main())

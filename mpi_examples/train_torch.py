#!/usr/bin/python3
"""Data-parallel PyTorch training on Fashion-MNIST, gradients averaged over MPI (or Gloo).

The Horovod / PyTorch-over-MPI pattern: after each backward pass the gradients are fused into
float32 buckets and each bucket is averaged with one in-place MPI_Allreduce(MPI_FLOAT, MPI_SUM)
(optireduce.torch.GradientFuser, over mpi4py), so a preloaded liboptireduce.so runs it through its
engine; without the library it is plain MPI. optireduce.stats() tells the share of gradient
entries the library had to estimate. `--backend gloo` reduces the same buckets with
torch.distributed (Gloo over TCP) instead: the baseline; `--backend optireduce` with the
torch.distributed backend "optireduce" (each bucket's all_reduce through the engine). Launch them
with mpirun (Gloo takes the rank and size from Open MPI's environment and never initialises MPI),
or gloo and optireduce as torchrun launches (python3 -m optireduce.launch); the optireduce package
comes from the build tree (or the install, see docs/python.md):

    mpirun -np 4 --oversubscribe -x PYTHONPATH=$PWD/build/python -x LD_PRELOAD=$PWD/build/lib/liboptireduce.so \
        /usr/bin/python3 mpi_examples/train_torch.py --model mlp --steps 300
    mpirun -np 4 --oversubscribe -x PYTHONPATH=$PWD/build/python /usr/bin/python3 mpi_examples/train_torch.py --backend gloo
    PYTHONPATH=$PWD/build/python /usr/bin/python3 -m optireduce.launch --nproc-per-node 4 \
        mpi_examples/train_torch.py --backend optireduce

Every rank builds the model from the same seed and then takes rank 0's weights (broadcast); each
step every rank draws its own `--batch` samples from one shared permutation of the training set
(so a step sees batch x ranks samples). Every `--eval-every` steps the ranks evaluate the whole
test set together (each a strided slice); evaluation is not counted in the training time. Rank 0
prints progress and, with `--json FILE`, writes one JSON object per line: a "start" record, one
"eval" record per evaluation (step, training time, communication time, test accuracy, train loss,
dropped fraction of the interval) and an "end" record (time and steps to `--target`, final
accuracy, per-step time percentiles, replica spread). scripts/tta/ reads these files.

Exit codes: 0; 1 when `--check` finds no learning (accuracy at or below --min-accuracy, loss not
decreasing), replicas that differ under `--expect-identical`, or no engine under `--expect-engine`; 2 on bad arguments or
when the optireduce package is not importable; 77 when torch, numpy or mpi4py (MPI backend) is missing or the data set is
not installed.
"""
import argparse
import json
import math
import os
import sys
import time
import zlib

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as error:
    print(f"SKIP: torch/numpy not importable by {sys.executable}: {error} "
          "(apt-get install python3-torch python3-numpy)", file=sys.stderr)
    sys.exit(77)

try:
    import optireduce
    from optireduce.torch import GradientFuser
except ImportError as error:
    print(f"train_torch: the optireduce package is not importable ({error}): run with PYTHONPATH=<build>/python "
          "or install it (docs/python.md)", file=sys.stderr)
    sys.exit(2)

import fashion_mnist


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--backend", choices=["mpi", "gloo", "optireduce"], default="mpi",
                   help="mpi: one in-place MPI_Allreduce per bucket (mpi4py); gloo, optireduce: torch.distributed "
                        "with that backend")
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--hidden", type=int, default=1024, help="hidden units of the MLP (784-H-10)")
    p.add_argument("--steps", type=int, default=300, help="training steps (the fixed budget)")
    p.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--eval-every", type=int, default=25, help="steps between evaluations")
    p.add_argument("--target", type=float, default=80.0, help="target test accuracy, percent")
    p.add_argument("--stop-at-target", action="store_true", help="end at the first evaluation at or above --target")
    p.add_argument("--data", default=fashion_mnist.DEFAULT_DIR, help="directory of the Fashion-MNIST IDX files")
    p.add_argument("--train-limit", type=int, default=0, help="use only the first N training samples (0: all)")
    p.add_argument("--test-limit", type=int, default=0, help="evaluate on the first N test samples (0: all 10000)")
    p.add_argument("--json", help="rank 0 writes JSON lines here")
    p.add_argument("--label", default="", help="copied into the JSON records")
    p.add_argument("--master-port", type=int, default=0,
                   help="gloo: TCP port of the rendezvous on 127.0.0.1 (0: derived from the mpirun job id)")
    p.add_argument("--check", action="store_true", help="exit 1 unless the model learned (see --min-accuracy)")
    p.add_argument("--min-accuracy", type=float, default=30.0, help="--check: final accuracy must exceed this")
    p.add_argument("--expect-engine", action="store_true",
                   help="exit 1 unless a preloaded liboptireduce.so intercepted reductions on every rank")
    p.add_argument("--expect-identical", action="store_true",
                   help="exit 1 if the replicas' parameters differ at the end (exact reductions)")
    a = p.parse_args(argv)
    for name in ("hidden", "steps", "batch", "eval_every"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    return a


# --- models ---------------------------------------------------------------------------------------
def make_model(kind, hidden):
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, 10))
    # A small CNN whose gradient (317,066 floats, 1.27 MB) is above the library's default 1 MiB.
    return nn.Sequential(nn.Conv2d(1, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(64 * 4 * 4, 256), nn.ReLU(), nn.Linear(256, 10))


# --- communication: the two backends behind one small interface -----------------------------------
class MpiComm:
    """mpi4py: each fused bucket goes through one in-place MPI_Allreduce (what the library sees)."""
    name = "mpi"

    def __init__(self):
        try:
            from mpi4py import MPI
        except ImportError as error:
            print(f"SKIP: mpi4py not importable by {sys.executable}: {error} (apt-get install python3-mpi4py)",
                  file=sys.stderr)
            sys.exit(77)
        self.MPI = MPI
        self.comm = MPI.COMM_WORLD
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()

    def reduce_gradients(self, fuser):  # each float32 bucket: MPI_FLOAT, MPI_SUM, MPI_IN_PLACE
        fuser.allreduce()

    def sum_doubles(self, array):  # small float64 figures: never eligible for the engine
        self.comm.Allreduce(self.MPI.IN_PLACE, array, op=self.MPI.SUM)

    def minmax(self, value):
        return (self.comm.allreduce(value, op=self.MPI.MIN), self.comm.allreduce(value, op=self.MPI.MAX))

    def broadcast(self, array):
        self.comm.Bcast(array, root=0)

    def fortran_handle(self):
        return self.comm.py2f()

    def finish(self):
        pass


class GlooComm:
    """torch.distributed (Gloo, or the "optireduce" backend) over TCP on 127.0.0.1; rank and size
    from the launcher: mpirun's, or torchrun's environment."""

    def __init__(self, port, backend="gloo"):
        import datetime
        import torch.distributed as dist
        self.dist, self.name = dist, backend
        env = os.environ
        self.rank = int(env.get("OMPI_COMM_WORLD_RANK", env.get("PMI_RANK", env.get("RANK", "0"))))
        self.size = int(env.get("OMPI_COMM_WORLD_SIZE", env.get("PMI_SIZE", env.get("WORLD_SIZE", "1"))))
        if port == 0 and "MASTER_PORT" in env and "OMPI_MCA_ess_base_jobid" not in env:
            port = int(env["MASTER_PORT"])  # torchrun's rendezvous
        elif port == 0:  # every rank of one mpirun job has the same job id
            job = env.get("OMPI_MCA_ess_base_jobid", "0")
            port = 20000 + zlib.crc32(job.encode()) % 20000
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
        if backend == "optireduce":
            import optireduce.torch  # noqa: F401 (registers the backend)
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=self.rank,
                                world_size=self.size, timeout=datetime.timedelta(seconds=300))

    def reduce_gradients(self, fuser):
        fuser.pack()
        for bucket in fuser.buckets:
            self.dist.all_reduce(bucket)
        fuser.unpack(1.0 / self.size)

    def sum_doubles(self, array):
        self.dist.all_reduce(torch.from_numpy(array))

    def minmax(self, value):
        t = torch.tensor([value, -value], dtype=torch.float64)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return -t[1].item(), t[0].item()

    def broadcast(self, array):
        self.dist.broadcast(torch.from_numpy(array), src=0)

    def fortran_handle(self):
        return None

    def finish(self):
        self.dist.destroy_process_group()


# --- OptiReduce's counters, when the library is preloaded -------------------------------------------
def library_counters():
    """[entries_reduced, entries_dropped, intercepted, bounded, fallback], or None without the library."""
    s = optireduce.stats()
    if s is None:
        return None
    return [s.entries_reduced, s.entries_dropped, s.intercepted_calls, s.bounded_calls, s.fallback_calls]


# --- training ---------------------------------------------------------------------------------------
def flat_parameters(model):
    return np.concatenate([p.detach().reshape(-1).numpy() for p in model.parameters()]).astype(np.float32)


def load_parameters(model, flat):
    offset = 0
    with torch.no_grad():
        for p in model.parameters():
            n = p.numel()
            p.copy_(torch.from_numpy(flat[offset:offset + n]).view_as(p))
            offset += n


def evaluate(model, comm, test_x, test_y):
    """Test accuracy (percent) and mean loss over the whole test set, each rank a strided slice."""
    model.eval()
    figures = np.zeros(3, dtype=np.float64)  # correct, seen, loss sum
    with torch.no_grad():
        xs, ys = test_x[comm.rank::comm.size], test_y[comm.rank::comm.size]
        for i in range(0, len(xs), 1000):
            x = torch.from_numpy(xs[i:i + 1000]).unsqueeze(1)
            y = torch.from_numpy(ys[i:i + 1000])
            out = model(x)
            figures[0] += (out.argmax(1) == y).sum().item()
            figures[1] += len(y)
            figures[2] += F.cross_entropy(out, y, reduction="sum").item()
    comm.sum_doubles(figures)
    model.train()
    return 100.0 * figures[0] / figures[1], figures[2] / figures[1]


def percentile(values, q):
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(1)  # 4 ranks share 2 cores
    torch.manual_seed(args.seed)
    if not fashion_mnist.available(args.data):
        print(f"SKIP: Fashion-MNIST not found in {args.data} (apt-get install dataset-fashion-mnist)",
              file=sys.stderr)
        return 77
    comm = MpiComm() if args.backend == "mpi" else GlooComm(args.master_port, args.backend)
    rank, size = comm.rank, comm.size
    train_x, train_y, test_x, test_y = fashion_mnist.load(args.data, args.train_limit, args.test_limit)
    test_x = fashion_mnist.normalize(test_x)  # 31 MB; the training images stay uint8 until batched

    model = make_model(args.model, args.hidden)
    start_params = flat_parameters(model)
    comm.broadcast(start_params)  # a real job starts every replica from rank 0's weights
    load_parameters(model, start_params)
    fuser = GradientFuser(model.parameters())
    gradient_size = sum(b.numel() for b in fuser.buckets)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    library_loaded = optireduce.loaded()

    out = open(args.json, "w") if (args.json and rank == 0) else None

    def record(obj):
        if out:
            out.write(json.dumps(obj) + "\n")
            out.flush()

    header = {"event": "start", "trainer": "torch", "backend": comm.name, "model": args.model,
              "hidden": args.hidden if args.model == "mlp" else None, "ranks": size,
              "parameters": gradient_size, "gradient_bytes": 4 * gradient_size,
              "batch_per_rank": args.batch, "steps": args.steps, "lr": args.lr, "momentum": args.momentum,
              "seed": args.seed, "eval_every": args.eval_every, "target": args.target, "label": args.label,
              "train_samples": int(len(train_y)), "test_samples": int(len(test_y)),
              "library": library_loaded,
              "optireduce_env": {k: v for k, v in os.environ.items() if k.startswith("OPTIREDUCE_")}}
    record(header)
    if rank == 0:
        print(f"train_torch: {args.model} ({gradient_size} parameters, {4 * gradient_size / 1e6:.2f} MB "
              f"gradient in {len(fuser.buckets)} bucket(s)), backend {comm.name}, {size} ranks x batch {args.batch}, "
              f"{args.steps} steps, OptiReduce {'preloaded' if library_loaded else 'absent'}", flush=True)

    global_batch = args.batch * size
    per_epoch = len(train_y) // global_batch
    if per_epoch < 1:
        print("train_torch: the training set is smaller than one global batch", file=sys.stderr)
        return 2
    permutation = None
    train_time = comm_time = 0.0
    step_times, comm_times = [], []
    loss_sum, loss_count, first_loss, last_loss = 0.0, 0, None, None
    last_lib = library_counters()
    time_to_target = steps_to_target = None
    accuracy = None
    wall_start = time.perf_counter()
    step = 0
    for step in range(1, args.steps + 1):
        epoch, index = divmod(step - 1, per_epoch)
        if index == 0:  # one shared permutation per epoch, the same on every rank
            permutation = np.random.default_rng(args.seed * 1000003 + epoch).permutation(len(train_y))
        first = index * global_batch + rank * args.batch
        batch = permutation[first:first + args.batch]

        t0 = time.perf_counter()
        x = torch.from_numpy(fashion_mnist.normalize(train_x[batch])).unsqueeze(1)
        y = torch.from_numpy(train_y[batch])
        optimizer.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        t1 = time.perf_counter()
        comm.reduce_gradients(fuser)  # the step's reductions: pack, one allreduce per bucket, unpack
        t2 = time.perf_counter()
        optimizer.step()
        t3 = time.perf_counter()

        train_time += t3 - t0
        comm_time += t2 - t1
        step_times.append(t3 - t0)
        comm_times.append(t2 - t1)
        loss_sum += loss.item()
        loss_count += 1

        if step % args.eval_every == 0 or step == args.steps:
            accuracy, test_loss = evaluate(model, comm, test_x, test_y)
            figures = np.array([loss_sum, loss_count] + (library_counters() or [0, 0, 0, 0, 0]), dtype=np.float64)
            comm.sum_doubles(figures)  # every rank's figures (losses, library counters), summed
            train_loss = figures[0] / figures[1]
            now_lib = figures[2:]
            dropped = None
            if library_loaded:
                prev = last_lib if last_lib is not None else np.zeros(5)
                d_reduced, d_dropped = now_lib[0] - prev[0], now_lib[1] - prev[1]
                dropped = float(d_dropped / d_reduced) if d_reduced > 0 else 0.0
                last_lib = now_lib
            first_loss = train_loss if first_loss is None else first_loss
            last_loss = train_loss
            loss_sum, loss_count = 0.0, 0
            if time_to_target is None and accuracy >= args.target:
                time_to_target, steps_to_target = train_time, step
            record({"event": "eval", "step": step, "train_time": train_time, "comm_time": comm_time,
                    "wall": time.perf_counter() - wall_start, "accuracy": accuracy, "test_loss": test_loss,
                    "train_loss": train_loss, "dropped_fraction": dropped,
                    "library_calls": None if not library_loaded else
                    {"intercepted": int(now_lib[2]), "bounded": int(now_lib[3]), "fallback": int(now_lib[4])}})
            if rank == 0:
                extra = "" if dropped is None else f"  dropped {100 * dropped:.3f}%"
                print(f"step {step:5d}  train {train_time:7.1f} s  comm {100 * comm_time / train_time:4.0f}%  "
                      f"loss {train_loss:.4f}  test accuracy {accuracy:5.2f}%{extra}", flush=True)
            if args.stop_at_target and time_to_target is not None:
                break

    checksum = float(np.sum(flat_parameters(model), dtype=np.float64))
    low, high = comm.minmax(checksum)
    spread = high - low
    counters = library_counters()
    least_intercepted, _ = comm.minmax(float(counters[2]) if counters else -1.0)
    end = {"event": "end", "steps": step, "train_time": train_time, "comm_time": comm_time,
           "comm_share": comm_time / train_time if train_time > 0 else None,
           "wall": time.perf_counter() - wall_start, "final_accuracy": accuracy, "target": args.target,
           "time_to_target": time_to_target, "steps_to_target": steps_to_target,
           "step_time_p50": percentile(step_times, 50), "step_time_p99": percentile(step_times, 99),
           "comm_time_p50": percentile(comm_times, 50), "comm_time_p99": percentile(comm_times, 99),
           "replica_spread": spread, "first_loss": first_loss, "last_loss": last_loss,
           "dropped_fraction": None if not library_loaded or last_lib is None else
           float(last_lib[1] / last_lib[0]) if last_lib[0] > 0 else 0.0}
    record(end)
    status = 0
    if rank == 0:
        tt = "not reached" if time_to_target is None else f"{time_to_target:.1f} s ({steps_to_target} steps)"
        print(f"final: {step} steps, training {train_time:.1f} s (communication {100 * end['comm_share']:.0f}%), "
              f"test accuracy {accuracy:.2f}%, time to {args.target:g}%: {tt}, "
              f"replicas {'identical' if spread == 0 else f'differ (spread {spread:.3g})'}", flush=True)
        if args.check:
            if not accuracy > args.min_accuracy:
                print(f"train_torch: CHECK FAILED: accuracy {accuracy:.2f}% <= {args.min_accuracy}%", file=sys.stderr)
                status = 1
            if not (last_loss is not None and first_loss is not None and last_loss < first_loss):
                print(f"train_torch: CHECK FAILED: loss did not decrease ({first_loss} -> {last_loss})",
                      file=sys.stderr)
                status = 1
        if args.expect_engine and least_intercepted <= 0:
            print("train_torch: CHECK FAILED: --expect-engine, but OptiReduce "
                  f"{'is not preloaded' if least_intercepted < 0 else 'intercepted no call on some rank'}",
                  file=sys.stderr)
            status = 1
        if args.expect_identical and spread != 0:
            print(f"train_torch: CHECK FAILED: replicas differ (parameter sums spread {spread:.3g})", file=sys.stderr)
            status = 1
    if out:
        out.close()
    comm.finish()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

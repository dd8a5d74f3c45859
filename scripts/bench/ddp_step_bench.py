#!/usr/bin/python3
"""DDP step time of the torch backend "optireduce" against gloo and the DDP hook, each contender in
its own processes, in a scripts/netem.sh loopback namespace, rounds alternating, medians over rounds.

    sudo /usr/bin/python3 scripts/bench/ddp_step_bench.py --profiles clean,loss-1 --rounds 3
    sudo /usr/bin/python3 scripts/bench/ddp_step_bench.py --mode calls --profiles clean

Contenders (4 ranks, one CPU thread each; the library's over udp: OPTIREDUCE_TRANSPORT=udp,
bounded mode, UCX held to TCP on lo):
  gloo         DDP over gloo, launched as torchrun launches (python3 -m optireduce.launch)
  backend      DDP over "optireduce", launched the same way (liboptireduce-engine.so, no MPI)
  backend-mpi  DDP over "optireduce" under mpirun with liboptireduce.so preloaded
  hook         DDP over gloo with optireduce.torch.allreduce_hook under mpirun, library preloaded

--mode step: a DDP step (forward, backward, optimizer) of an MLP of 5 gradient buckets
(784-1280-1280-1280-1280-256-10 with bucket_cap_mb 6.25: about 1.3, 6.3, 6.3, 6.3 and 3.8 MiB),
--warmup steps (past calibration) then --steps timed; a step's time is the slowest rank's.
--mode calls: --steps back-to-back reductions of one --call-mib MiB float32 tensor, each waited for
(dist.all_reduce; the hook's allreduce_async(...).wait()): the cost of each Python path per call.
Prints p50 and p99 per contender (medians over rounds) and their ratios to gloo (and backend to
hook), with the machine's load; writes results.json under --out. This is a stand-in until the
project's one benchmark tool (issue 33) can drive the backend: it holds /tmp/optireduce-bench.lock
for each round.
"""
import argparse
import fcntl
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYTHON = "/usr/bin/python3"
CONTENDERS = ("gloo", "backend", "backend-mpi", "hook")
LOCK = "/tmp/optireduce-bench.lock"
MPI_TCP = ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo",
           "--mca", "oob_tcp_if_include", "lo"]


def percentile(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, -(-len(s) * q // 100) - 1))]


# --- one rank ----------------------------------------------------------------------------------------
def worker(a):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import optireduce.torch
    if a.contender in ("gloo", "backend"):
        dist.init_process_group("gloo" if a.contender == "gloo" else "optireduce")
    elif a.contender == "backend-mpi":
        optireduce.torch.init_process_group()
    else:  # hook: gloo under mpirun, its store told over MPI as the backend's would be
        from mpi4py import MPI
        import socket
        comm = MPI.COMM_WORLD
        address = None
        if comm.rank == 0:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                address = s.getsockname()[1]
        port = comm.bcast(address, root=0)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=comm.rank, world_size=comm.size)
    rank, size = dist.get_rank(), dist.get_world_size()
    times = []
    if a.mode == "step":
        torch.manual_seed(0)
        layers = [784, 1280, 1280, 1280, 1280, 256, 10]
        modules = []
        for i in range(len(layers) - 1):
            modules += [torch.nn.Linear(layers[i], layers[i + 1]), torch.nn.ReLU()]
        model = torch.nn.Sequential(*modules[:-1])
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=6.25)
        if a.contender == "hook":
            ddp.register_comm_hook(None, optireduce.torch.allreduce_hook)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.001)
        x, y = torch.randn(32, 784), torch.randint(0, 10, (32,))
        for step in range(a.warmup + a.steps):
            t0 = time.perf_counter()
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(ddp(x), y).backward()
            optimizer.step()
            if step >= a.warmup:
                times.append(time.perf_counter() - t0)
        buckets = ddp._get_ddp_logging_data().get("bucket_sizes", "")
    else:
        t = torch.ones(a.call_mib << 18)
        for i in range(a.warmup + a.steps):
            t.fill_(1.0)  # sums stay finite
            t0 = time.perf_counter()
            if a.contender == "hook":
                optireduce.torch.allreduce_async(t).wait()
            else:
                dist.all_reduce(t)
            if i >= a.warmup:
                times.append(time.perf_counter() - t0)
        buckets = ""
    everyone = [None] * size
    dist.all_gather_object(everyone, times)
    stats = optireduce.stats()
    if rank == 0:
        slowest = [max(per_rank[i] for per_rank in everyone) for i in range(len(times))]
        with open(a.json, "w") as f:
            json.dump({"times": slowest, "buckets": buckets,
                       "engine_calls": stats.intercepted_calls if stats else 0,
                       "bounded_calls": stats.bounded_calls if stats else 0,
                       "dropped_fraction": stats.dropped_fraction if stats else 0}, f)
    dist.destroy_process_group()
    if a.contender == "hook":
        optireduce.torch.shutdown()


# --- the driver --------------------------------------------------------------------------------------
def command(a, contender, json_path):
    build = a.build_dir
    own = [os.path.abspath(__file__), "--worker", "--contender", contender, "--mode", a.mode, "--warmup",
           str(a.warmup), "--steps", str(a.steps), "--call-mib", str(a.call_mib), "--json", json_path]
    env = {"PYTHONPATH": os.path.join(build, "python"), "GLOO_SOCKET_IFNAME": "lo", "MASTER_ADDR": "127.0.0.1",
           "OPTIREDUCE_TRANSPORT": "udp",
           "OPTIREDUCE_UCX_TLS": "tcp", "OPTIREDUCE_UCX_NET_DEVICES": "lo", "OPTIREDUCE_MODE": "bounded"}
    if contender in ("gloo", "backend"):
        return ["env"] + [f"{k}={v}" for k, v in env.items()] + [PYTHON, "-m", "optireduce.launch",
                                                                 "--nproc-per-node", str(a.ranks)] + own
    cmd = ["mpirun", "-np", str(a.ranks), "--oversubscribe", "--bind-to", "none"] + MPI_TCP
    env["LD_PRELOAD"] = os.path.join(build, "lib", "liboptireduce.so")
    for k, v in env.items():
        cmd += ["-x", f"{k}={v}"]
    return cmd + [PYTHON] + own


def run_round(a, profile, contenders, work):
    out = {}
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        load = os.getloadavg()[0]
        for contender in contenders:
            path = os.path.join(work, f"{profile}-{contender}.json")
            if os.path.exists(path):
                os.remove(path)
            cmd = [os.path.join(REPO, "scripts", "netem.sh"), "--profile", profile, "--"] + command(a, contender, path)
            env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=900)
            if r.returncode != 0 or not os.path.exists(path):
                print(f"  {profile} {contender}: FAILED (exit {r.returncode})\n" + r.stdout[-2000:], flush=True)
                continue
            with open(path) as f:
                out[contender] = json.load(f)
            t = out[contender]["times"]
            print(f"  {profile} {contender:>11}: p50 {1e3 * percentile(t, 50):7.1f} ms  p99 {1e3 * percentile(t, 99):7.1f} ms"
                  f"  engine calls {out[contender]['engine_calls']} ({out[contender]['bounded_calls']} bounded)"
                  f"  dropped {100 * out[contender]['dropped_fraction']:.3f} %", flush=True)
    return out, load


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--contender", choices=CONTENDERS, help=argparse.SUPPRESS)
    p.add_argument("--json", help=argparse.SUPPRESS)
    p.add_argument("--mode", choices=["step", "calls"], default="step")
    p.add_argument("--profiles", default="clean,loss-1", help="scripts/netem.sh profiles")
    p.add_argument("--contenders", default=",".join(CONTENDERS))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--warmup", type=int, default=25, help="untimed steps or calls (calibration is 20 calls)")
    p.add_argument("--steps", type=int, default=60, help="timed steps or calls")
    p.add_argument("--call-mib", type=int, default=4, help="--mode calls: MiB per call")
    p.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    p.add_argument("--out", default=os.path.join(REPO, "results", "ddp-step"))
    a = p.parse_args()
    if a.worker:
        return worker(a) or 0
    a.build_dir = os.path.abspath(a.build_dir)
    os.makedirs(a.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="ddp-step-")
    contenders = [c for c in a.contenders.split(",") if c]
    results = {"mode": a.mode, "config": vars(a), "rounds": []}
    for rnd in range(a.rounds):
        for profile in a.profiles.split(","):
            # The order rotates from round to round, so no contender always runs first.
            order = contenders[rnd % len(contenders):] + contenders[:rnd % len(contenders)]
            print(f"round {rnd + 1}/{a.rounds}, {profile} (load {os.getloadavg()[0]:.1f})", flush=True)
            out, load = run_round(a, profile, order, work)
            results["rounds"].append({"round": rnd, "profile": profile, "load": load, "results": out})
            with open(os.path.join(a.out, f"results-{a.mode}.json"), "w") as f:
                json.dump(results, f, indent=1)
    print(f"\n{a.mode}: medians over {a.rounds} rounds of each round's p50 and p99 (ms), ratios in the same run")
    for profile in a.profiles.split(","):
        rounds = [r for r in results["rounds"] if r["profile"] == profile]
        med = {}
        for c in contenders:
            runs = [r["results"][c]["times"] for r in rounds if c in r["results"]]
            if runs:
                med[c] = (statistics.median(1e3 * percentile(t, 50) for t in runs),
                          statistics.median(1e3 * percentile(t, 99) for t in runs), len(runs))
        loads = ", ".join(f"{r['load']:.1f}" for r in rounds)
        print(f"{profile} (load at each round's start: {loads})")
        for c, (p50, p99, n) in med.items():
            ratios = ""
            if "gloo" in med and c != "gloo":
                ratios += f"  vs gloo: p50 {p50 / med['gloo'][0]:.2f}x p99 {p99 / med['gloo'][1]:.2f}x"
            if c.startswith("backend") and "hook" in med:
                ratios += f"  vs hook: p50 {p50 / med['hook'][0]:.2f}x ({p50 - med['hook'][0]:+.2f} ms)"
            print(f"  {c:>11}: p50 {p50:8.1f}  p99 {p99:8.1f}  ({n} rounds){ratios}")
        results.setdefault("medians", {})[profile] = med
    with open(os.path.join(a.out, f"results-{a.mode}.json"), "w") as f:
        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

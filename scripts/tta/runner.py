"""Builds and runs one training job (a trainer of mpi_examples/ under one implementation and one
network profile) and reads what it recorded. Used by scripts/tta/tta.py.

Implementations (how the gradient sum travels; every one crosses the emulated loopback):
  openmpi         plain Open MPI: pml ob1, btl tcp,self on lo; no library
  gloo            torch.distributed over Gloo (TCP on lo); mpirun only launches (torch trainer only)
  optireduce-ucx  liboptireduce.so preloaded, bounded mode, UCX over TCP (OPTIREDUCE_UCX_TLS=tcp)
  optireduce-udp  the same with OPTIREDUCE_TRANSPORT=udp (kernel UDP datagrams: what auto picks
                  across hosts)
  optireduce-ofi  the same with OPTIREDUCE_TRANSPORT=ofi (libfabric datagrams), when it exists
  backend-udp     the torch.distributed backend "optireduce", launched as torchrun launches
                  (python3 -m optireduce.launch, no MPI: liboptireduce-engine.so), bounded mode,
                  OPTIREDUCE_TRANSPORT=udp (torch trainer only)
"""
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYTHON = "/usr/bin/python3"  # Debian's: torch, mpi4py, numpy (python3 on PATH may be another)
IMPLEMENTATIONS = ["openmpi", "gloo", "optireduce-ucx", "optireduce-udp", "optireduce-ofi", "backend-udp"]
# Open MPI over TCP on lo only: shared memory would bypass the emulated link.
MPI_TCP = ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo",
           "--mca", "oob_tcp_if_include", "lo"]


def library(build_dir):
    return os.path.join(build_dir, "lib", "liboptireduce.so")


def trainer_command(trainer, impl, args, json_path, label):
    """The trainer's own command line (what each rank runs)."""
    common = ["--steps", str(args.steps), "--batch", str(args.batch), "--eval-every", str(args.eval_every),
              "--target", str(args.target), "--seed", str(args.seed), "--json", json_path, "--label", label,
              "--data", args.data, "--lr", str(args.lr)]
    if args.test_limit:
        common += ["--test-limit", str(args.test_limit)]
    if trainer == "torch":
        backend = {"gloo": "gloo", "backend-udp": "optireduce"}.get(impl, "mpi")
        return ([PYTHON, os.path.join(REPO, "mpi_examples", "train_torch.py"),
                 "--backend", backend, "--model", args.model,
                 "--hidden", str(args.hidden)] + common)
    return [os.path.join(args.build_dir, "bin", "train_mlp"), "--hidden", str(args.hidden)] + common


def job_command(trainer, impl, args, json_path, label, extra_env=None, ranks=None):
    """mpirun ... for one run (the backend's: env ... python3 -m optireduce.launch ...); extra_env:
    OPTIREDUCE_* settings (only for the library's runs)."""
    if impl == "backend-udp":
        env = {"PYTHONPATH": os.path.join(args.build_dir, "python"), "GLOO_SOCKET_IFNAME": "lo",
               "OPTIREDUCE_UCX_TLS": "tcp", "OPTIREDUCE_UCX_NET_DEVICES": "lo", "OPTIREDUCE_MODE": "bounded",
               "OPTIREDUCE_TRANSPORT": "udp"}
        env.update(extra_env or {})
        return (["env"] + [f"{k}={v}" for k, v in env.items()] +
                [PYTHON, "-m", "optireduce.launch", "--nproc-per-node", str(ranks or args.ranks)] +
                trainer_command(trainer, impl, args, json_path, label)[1:])  # the launcher runs its interpreter
    cmd = ["mpirun", "-np", str(ranks or args.ranks), "--oversubscribe", "--bind-to", "none"] + MPI_TCP
    env = {}
    if impl.startswith("optireduce"):
        env = {"LD_PRELOAD": library(args.build_dir), "OPTIREDUCE_UCX_TLS": "tcp",
               "OPTIREDUCE_UCX_NET_DEVICES": "lo", "OPTIREDUCE_MODE": "bounded"}
        if impl in ("optireduce-udp", "optireduce-ofi"):
            env["OPTIREDUCE_TRANSPORT"] = impl.split("-")[1]
    if impl == "gloo":
        env["GLOO_SOCKET_IFNAME"] = "lo"
    if trainer == "torch":  # train_torch.py fuses its gradients with the optireduce package
        env["PYTHONPATH"] = os.path.join(args.build_dir, "python")
    env.update(extra_env or {})
    for name, value in env.items():
        cmd += ["-x", f"{name}={value}"]
    return cmd + trainer_command(trainer, impl, args, json_path, label)


def netem_wrap(profile, stats_path, cmd):
    return [os.path.join(REPO, "scripts", "netem.sh"), "--profile", profile, "--stats", stats_path, "--"] + cmd


def profile_supported(profile):
    """netem.sh validates --profile before it needs root; a rejected name exits 2 at once."""
    if os.geteuid() != 0:
        return False, "network namespaces need root"
    r = subprocess.run([os.path.join(REPO, "scripts", "netem.sh"), "--profile", profile, "--", "true"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=60)
    if r.returncode == 0:
        return True, ""
    return False, (r.stderr.strip().splitlines() or ["netem.sh failed"])[-1]


def ofi_available(args, workdir):
    """Whether OPTIREDUCE_TRANSPORT=ofi is accepted and runs: a 2-rank Horovod-shaped job that must
    go through the engine (a build whose configuration rejects 'ofi' stops it at MPI_Init)."""
    job = os.path.join(args.build_dir, "bin", "horovod_like")
    if not os.path.exists(job):
        return False, f"{job} not built"
    cmd = ["mpirun", "-np", "2", "--oversubscribe"] + MPI_TCP + [
        "-x", f"LD_PRELOAD={library(args.build_dir)}", "-x", "OPTIREDUCE_TRANSPORT=ofi",
        "-x", "OPTIREDUCE_MODE=reliable", job, "--steps", "1", "--expect-engine"]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120, cwd=workdir)
    except subprocess.TimeoutExpired:
        return False, "a 2-rank job with OPTIREDUCE_TRANSPORT=ofi did not finish in 120 s"
    if r.returncode == 0:
        return True, ""
    lines = [l for l in r.stdout.splitlines() if "OPTIREDUCE_TRANSPORT" in l or "optireduce" in l.lower()]
    return False, (lines or r.stdout.strip().splitlines() or ["failed"])[-1][:200]


def read_records(path):
    start, evals, end = None, [], None
    if not os.path.exists(path):
        return start, evals, end
    with open(path) as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            kind = rec.get("event")
            if kind == "start":
                start = rec
            elif kind == "eval":
                evals.append(rec)
            elif kind == "end":
                end = rec
    return start, evals, end


def run(cmd, log_path, timeout, prefix, quiet=False):
    """Runs cmd, copying its output to log_path and rank 0's progress lines to stdout; after
    `timeout` seconds its whole process group gets SIGTERM (netem.sh then removes its namespace),
    30 s later SIGKILL. Returns (exit code, 124 on timeout; seconds)."""
    t0 = time.monotonic()
    expired = threading.Event()

    def stop(proc):
        expired.set()
        for sig, grace in ((signal.SIGTERM, 30), (signal.SIGKILL, 0)):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=grace or None)
                return
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue

    with open(log_path, "w") as log:
        log.write("+ " + describe_cmd(cmd) + "\n")
        log.flush()
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                start_new_session=True)
        timer = threading.Timer(timeout, stop, args=(proc,))
        timer.start()
        try:
            for line in proc.stdout:
                log.write(line)
                if not quiet and (line.startswith("step ") or line.startswith("final:")):
                    print(f"    {prefix} {line.rstrip()}", flush=True)
            proc.wait()
        finally:
            timer.cancel()
    return (124 if expired.is_set() else proc.returncode), time.monotonic() - t0


def describe_cmd(cmd):
    return " ".join(shlex.quote(c) for c in cmd)


if __name__ == "__main__":
    sys.exit("runner.py is a module of scripts/tta/tta.py")

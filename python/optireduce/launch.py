"""Starts the ranks of a PyTorch job on this host with torchrun's environment, for interpreters
where torchrun itself cannot start (Debian's torch 1.13 under Python 3.11):

    python3 -m optireduce.launch --nproc-per-node 4 train.py [args...]
    python3 -m optireduce.launch --nnodes 2 --node-rank 0 --master-addr HOST --master-port 29500 \\
        --nproc-per-node 4 train.py

Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and
MASTER_PORT (what init_process_group's env:// reads), and runs `python3 SCRIPT ARGS` (or
`python3 -m MODULE ARGS` with -m) with this interpreter. The first rank to fail ends the others
(SIGTERM, then SIGKILL after --grace seconds) and its exit status is the launcher's; SIGINT and
SIGTERM are passed on. Static ranks only: no restarts, no elastic membership.
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time


def parse(argv):
    p = argparse.ArgumentParser(prog="python3 -m optireduce.launch", description=__doc__.split("\n\n")[0])
    p.add_argument("--nproc-per-node", type=int, default=1, help="ranks on this host")
    p.add_argument("--nnodes", type=int, default=1, help="hosts, each running this launcher")
    p.add_argument("--node-rank", type=int, default=0, help="this host's number, from 0")
    p.add_argument("--master-addr", default="127.0.0.1", help="the host of rank 0's store")
    p.add_argument("--master-port", type=int, default=0,
                   help="its TCP port (0: a free one, single host only)")
    p.add_argument("--grace", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL")
    p.add_argument("-m", dest="module", action="store_true", help="run the program as a module (python3 -m)")
    p.add_argument("program", help="the script (or module with -m)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    a = p.parse_args(argv)
    if a.nproc_per_node < 1 or a.nnodes < 1 or not 0 <= a.node_rank < a.nnodes:
        p.error("need --nproc-per-node >= 1, --nnodes >= 1 and 0 <= --node-rank < --nnodes")
    if a.master_port == 0 and a.nnodes > 1:
        p.error("--master-port is needed with --nnodes > 1 (every host must name the same port)")
    if not 0 <= a.master_port < 65536:
        p.error("--master-port must be a TCP port (0..65535)")
    return a


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None):
    a = parse(sys.argv[1:] if argv is None else argv)
    port = a.master_port or free_port()
    world = a.nnodes * a.nproc_per_node
    command = [sys.executable] + (["-m"] if a.module else []) + [a.program] + a.args
    children = []
    for local in range(a.nproc_per_node):
        env = dict(os.environ, RANK=str(a.node_rank * a.nproc_per_node + local), WORLD_SIZE=str(world),
                   LOCAL_RANK=str(local), LOCAL_WORLD_SIZE=str(a.nproc_per_node), GROUP_RANK=str(a.node_rank),
                   MASTER_ADDR=a.master_addr, MASTER_PORT=str(port))
        children.append(subprocess.Popen(command, env=env))

    def stop(sig):
        for c in children:
            if c.poll() is None:
                c.send_signal(sig)

    def forward(sig, _frame):
        stop(sig)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, forward)

    status, failed_at = 0, None
    while any(c.poll() is None for c in children):
        if failed_at is None:
            bad = next((c for c in children if c.poll() not in (None, 0)), None)
            if bad is not None:
                status, failed_at = bad.returncode, time.monotonic()
                print(f"optireduce.launch: rank {children.index(bad) + a.node_rank * a.nproc_per_node} exited "
                      f"{bad.returncode}: ending the others", file=sys.stderr, flush=True)
                stop(signal.SIGTERM)
        elif time.monotonic() - failed_at > a.grace:
            stop(signal.SIGKILL)
        time.sleep(0.05)
    if status == 0:
        status = next((c.returncode for c in children if c.returncode != 0), 0)
    return 128 - status if status < 0 else status


if __name__ == "__main__":
    sys.exit(main())

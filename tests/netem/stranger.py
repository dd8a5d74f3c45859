#!/usr/bin/python3
"""A stranger on the job's network: sends random UDP datagrams to every UDP socket bound in its
network namespace on an address starting with PREFIX (the engines' datagram endpoints; nothing
else here uses UDP) until STOP_FILE exists or it gets SIGTERM. Half are random bytes, half start
like a genuine datagram (magic, version, kind) so they reach the tag check. Writes how many it
sent to OUT when it stops.

    stranger.py OUT [PREFIX [STOP_FILE]]     PREFIX default "127."

One stranger per network namespace: in scripts/cluster.sh each host runs its own (they share the
file system, so one STOP_FILE stops them all)."""
import os
import random
import signal
import socket
import subprocess
import sys
import time

out = sys.argv[1]
prefix = sys.argv[2] if len(sys.argv) > 2 else "127."
stop_file = sys.argv[3] if len(sys.argv) > 3 else None
sent = 0


def stop(*_):
    with open(out, "w") as f:
        f.write(f"{sent}\n")
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
rng = random.Random(7)
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
while not (stop_file and os.path.exists(stop_file)):
    listing = subprocess.run(["ss", "-Hunl"], capture_output=True, text=True).stdout
    targets = []
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[3].startswith(prefix):
            host, _, port = fields[3].rpartition(":")
            targets.append((host, int(port)))
    for target in targets:
        for i in range(20):
            body = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 1500)))
            if i % 2:
                body = b"ORDG" + bytes([2, rng.randrange(1, 6)]) + body
            try:
                sock.sendto(body, target)
                sent += 1
            except OSError:
                pass
    time.sleep(0.01)
stop()

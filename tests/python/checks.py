"""One line per check of a multi-rank test: rank 0 prints what passed, every rank what failed."""
import os
import subprocess
import sys


class Checks:
    def __init__(self, name, rank):
        self.name, self.rank, self.failures = name, rank, 0

    def check(self, ok, what):
        if not ok:
            self.failures += 1
            print(f"{self.name} [rank {self.rank}] FAIL: {what}", file=sys.stderr, flush=True)
        elif self.rank == 0:
            print(f"ok: {what}", flush=True)


def run_wrapped(command, outputs, env=None):
    """A wrapper's job (COMMAND after an optional "--") run after removing its stale outputs; its exit code."""
    command = command[1:] if command[:1] == ["--"] else command
    for stale in outputs:
        if os.path.exists(stale):
            os.remove(stale)
    return subprocess.call(command, env=env)

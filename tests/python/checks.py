"""One line per check of a multi-rank test: rank 0 prints what passed, every rank what failed."""
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

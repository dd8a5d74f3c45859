#!/usr/bin/python3
"""CPU per call of an MPI job profiled rank by rank (scripts/bench/profile.sh): the samples of
every rank's perf.data (cpu-clock at 1000 Hz, so one sample is a millisecond of CPU) summed by
shared object and by symbol, divided by the number of calls.

    perf_by_symbol.py DIR CALLS [TOP]      DIR holds perf.data.<rank>
"""
import collections
import glob
import os
import re
import subprocess
import sys


def samples(path):
    out = subprocess.run(["perf", "report", "-i", path, "--no-children", "--sort", "dso,sym", "-g", "none",
                          "-F", "overhead,sample,dso,sym", "--stdio"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\d+)\s+(\S+)\s+\[.\]\s+(.*)", line)
        if m:
            yield m.group(3), m.group(4).strip()[:70], int(m.group(2))


def main():
    directory, calls = sys.argv[1], float(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    by_symbol, by_dso = collections.Counter(), collections.Counter()
    files = sorted(glob.glob(os.path.join(directory, "perf.data.*")))
    for path in files:
        for dso, sym, n in samples(path):
            by_symbol[(dso, sym)] += n
            by_dso[dso] += n
    total = sum(by_dso.values())
    print(f"{len(files)} ranks, {total} ms of CPU in all, {total / calls:.1f} ms per call")
    print("| ms per call | share | shared object |\n| ---: | ---: | --- |")
    for dso, n in by_dso.most_common(8):
        print(f"| {n / calls:.1f} | {100 * n / total:.1f} % | {dso} |")
    print("\n| ms per call | share | shared object | symbol |\n| ---: | ---: | --- | --- |")
    for (dso, sym), n in by_symbol.most_common(top):
        print(f"| {n / calls:.1f} | {100 * n / total:.1f} % | {dso} | `{sym}` |")


if __name__ == "__main__":
    main()

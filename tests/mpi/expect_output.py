#!/usr/bin/python3
"""Runs a command and checks what it printed.

Usage: expect_output.py [--with-stderr] --expect REGEX [--expect REGEX...] [--reject REGEX...] -- COMMAND...

Passes when the command exits 0, every --expect REGEX matches and no --reject REGEX matches some
line of its standard output
(re.search, multi-line: ^ and $ anchor at lines); --with-stderr searches standard error too. The output is echoed, so ctest
--output-on-failure shows it. Exit status 77 (the scripts' "cannot import mpi4py/numpy") is
passed on, for ctest's SKIP_RETURN_CODE.
"""
import argparse
import re
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--expect", action="append", default=[], help="a regular expression the output must match")
    parser.add_argument("--reject", action="append", default=[], help="a regular expression the output must not match")
    parser.add_argument("--with-stderr", action="store_true", help="search standard error too (merged)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")

    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT if args.with_stderr else None,
                            text=True)
    sys.stdout.write(result.stdout)
    sys.stdout.flush()
    if result.returncode == 77:
        sys.exit(77)
    if result.returncode != 0:
        print(f"expect_output: FAIL: the command exited {result.returncode}"
              + (" (killed by timeout)" if result.returncode in (124, 137) else ""), file=sys.stderr)
        sys.exit(1)
    missing = [e for e in args.expect if not re.search(e, result.stdout, re.MULTILINE)]
    if missing:
        for e in missing:
            print(f"expect_output: FAIL: no output line matches {e!r}", file=sys.stderr)
        sys.exit(1)
    found = [r for r in args.reject if re.search(r, result.stdout, re.MULTILINE)]
    if found:
        for r in found:
            print(f"expect_output: FAIL: an output line matches {r!r}", file=sys.stderr)
        sys.exit(1)
    print(f"expect_output: PASS: {len(args.expect)} expected lines found, {len(args.reject)} rejected ones absent")


if __name__ == "__main__":
    main()

"""optireduce-report: a summary table (stdout) and a PNG of an OPTIREDUCE_REPORT or OPTIREDUCE_TRACE.

    optireduce-report report.json            # table; report.png next to it
    python3 -m optireduce.report trace.txt --png calls.png
    optireduce-report report.json trace.txt --no-png

Exit 0; 1 when an input cannot be read; 2 on bad arguments. Without matplotlib the table is still
printed and the PNG skipped with a note on stderr.
"""
import argparse
import os
import sys

from .._version import __version__
from . import plots, sources, summary


def _parser():
    p = argparse.ArgumentParser(prog="optireduce-report", description=__doc__.split("\n")[0])
    p.add_argument("inputs", nargs="+", metavar="FILE", help="an OPTIREDUCE_REPORT (JSON) or OPTIREDUCE_TRACE file")
    p.add_argument("--png", help="where the PNG goes (one input only; default: the input's name with .png)")
    p.add_argument("--no-png", action="store_true", help="the table only")
    p.add_argument("--version", action="version", version=f"optireduce-report {__version__}")
    return p


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    if args.png and len(args.inputs) > 1:
        parser.error("--png names one file: give one input")
    status = 0
    for i, path in enumerate(args.inputs):
        try:
            source = sources.load(path)
        except sources.InputError as error:
            print(f"optireduce-report: {error}", file=sys.stderr)
            status = 1
            continue
        is_report = isinstance(source, sources.Report)
        if i:
            print()
        print(summary.report_table(source) if is_report else summary.trace_table(source))
        if not args.no_png:
            status = max(status, _png(source, is_report, args.png or os.path.splitext(path)[0] + ".png"))
    return status


def _png(source, is_report, path):
    try:
        (plots.report_png if is_report else plots.trace_png)(source, path)
    except ImportError as error:
        print(f"optireduce-report: PNG skipped, matplotlib is not importable ({error})", file=sys.stderr)
        return 0
    except OSError as error:
        print(f"optireduce-report: cannot write {path}: {error.strerror}", file=sys.stderr)
        return 1
    print(f"png: {path}")
    return 0

#!/usr/bin/python3
"""Unit checks of the optireduce package, in one process and without MPI_Init.

    test_package.py --project-version V --layout-program P absent
        the library is not in the process: every query says so, nothing crashes
    test_package.py --project-version V --layout-program P loaded LIBRARY
        LIBRARY (liboptireduce.so) is loaded by the test, as an extension would, not preloaded:
        found anyway, version and counters read, per-communicator queries refused cleanly
Also: the ctypes mirrors against the C header's layout (P prints it), the package version against
the CMake project's, GradientFuser's bucketing and packing, the report tool on inputs with fields
a newer library may add.
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import unittest

import optireduce
from optireduce import _capi

ARGS = None


class Layout(unittest.TestCase):
    def test_mirrors_match_the_header(self):
        layout = json.loads(subprocess.check_output([ARGS.layout_program]))
        for c_name, mirror in (("optireduce_process_stats", _capi.ProcessStatsStruct),
                               ("optireduce_call_stats", _capi.CallStatsStruct)):
            c = layout[c_name]
            # The library fills the whole struct it knows: the mirror must be at least as large.
            self.assertGreaterEqual(ctypes.sizeof(mirror), c["size"], c_name)
            self.assertEqual(set(c["fields"]), set(_capi.public_fields(mirror)), c_name)
            for name, (offset, size) in c["fields"].items():
                field = getattr(mirror, name)
                self.assertEqual((field.offset, field.size), (offset, size), f"{c_name}.{name}")

    def test_package_version_is_the_project_version(self):
        self.assertEqual(optireduce.__version__, ARGS.project_version)


class WithoutLibrary(unittest.TestCase):
    def setUp(self):
        if ARGS.scenario != "absent":
            self.skipTest("the library is loaded in this run")

    def test_queries_report_not_loaded(self):
        self.assertFalse(optireduce.loaded())
        self.assertIsNone(optireduce.version())
        self.assertIsNone(optireduce.stats())

    def test_last_call_and_set_mode(self):
        comm = _uninitialised_world()
        self.assertIsNone(optireduce.last_call(comm))
        with self.assertRaises(optireduce.NotLoadedError):
            optireduce.set_mode(comm, "reliable")
        with self.assertRaises(ValueError):
            optireduce.set_mode(comm, "fast")
        with self.assertRaises(TypeError):
            optireduce.last_call(42)

    def test_torch_imports_without_mpi(self):
        # In a fresh interpreter: another test here imports mpi4py.
        code = "import sys, optireduce.torch; print('mpi4py.MPI' in sys.modules)"
        self.assertEqual(subprocess.check_output([sys.executable, "-c", code], text=True).strip(), "False")


class WithLibrary(unittest.TestCase):
    def setUp(self):
        if ARGS.scenario != "loaded":
            self.skipTest("the library is not loaded in this run")

    def test_found_without_preload(self):
        self.assertFalse(optireduce.loaded(), "found before it was loaded")
        ctypes.CDLL(ARGS.library, mode=os.RTLD_LOCAL)  # not in the global scope: found through the maps
        self.assertTrue(optireduce.loaded())
        self.assertEqual(_capi.library().origin, os.path.realpath(ARGS.library))
        self.assertEqual(optireduce.version(), optireduce.__version__)
        s = optireduce.stats()
        self.assertIsInstance(s, optireduce.ProcessStats)
        self.assertEqual((s.intercepted_calls, s.passthrough_calls, s.entries_reduced, s.dropped_fraction),
                         (0, 0, 0, 0.0))
        self.assertEqual(set(s.as_dict()), set(_capi.public_fields(_capi.ProcessStatsStruct)))
        # Before MPI_Init the per-communicator API answers "not initialised": None, no crash.
        self.assertIsNone(optireduce.last_call(_uninitialised_world()))


def _uninitialised_world():
    import mpi4py
    mpi4py.rc.initialize = False  # a handle to convert, no MPI_Init
    from mpi4py import MPI
    assert not MPI.Is_initialized()
    return MPI.COMM_WORLD


class Fuser(unittest.TestCase):
    """Bucketing and packing only: GradientFuser needs MPI only to reduce."""

    def setUp(self):
        import torch
        self.torch = torch
        self.params = [torch.nn.Parameter(torch.zeros(n, dtype=d)) for n, d in
                       ((100, torch.float32), (50, torch.float64), (300, torch.float32), (10, torch.float32),
                        (20, torch.float64), (7, torch.float16))]
        self.frozen = torch.nn.Parameter(torch.zeros(5), requires_grad=False)

    def test_buckets_by_dtype_and_size(self):
        from optireduce.torch import GradientFuser
        fuser = GradientFuser(self.params + [self.frozen], bucket_bytes=1600)
        shapes = [(b.dtype, b.numel()) for b in fuser.buckets]
        # float32: 100 (400 B) + 300 (1200 B) = 1600 fits, + 10 starts a new bucket.
        self.assertEqual(shapes, [(self.torch.float32, 400), (self.torch.float32, 10), (self.torch.float64, 70),
                                  (self.torch.float16, 7)])

    def test_pack_unpack_round_trip(self):
        from optireduce.torch import GradientFuser
        for i, p in enumerate(self.params):
            p.grad = self.torch.arange(p.numel(), dtype=p.dtype) + 10 * i
        self.params[3].grad = None  # a parameter without a gradient contributes zeros
        fuser = GradientFuser(self.params, bucket_bytes=1 << 20)
        fuser.pack()
        self.assertEqual(fuser.buckets[0][:100].tolist(), list(range(100)))
        self.assertEqual(fuser.buckets[0][400:].tolist(), [0.0] * 10)
        for b in fuser.buckets:
            b.mul_(2)
        fuser.unpack(scale=0.25)
        for i, p in enumerate(self.params):
            expected = [0.0] * 10 if i == 3 else [(k + 10 * i) * 0.5 for k in range(p.numel())]
            self.assertEqual(p.grad.tolist(), expected, f"parameter {i}")

    def test_rejects_nothing_to_reduce(self):
        from optireduce.torch import GradientFuser
        with self.assertRaises(ValueError):
            GradientFuser([self.frozen])


class ReportTool(unittest.TestCase):
    """Fields a newer report or trace may carry must not break the tool."""

    def run_tool(self, text, suffix):
        with tempfile.TemporaryDirectory() as work:
            path = os.path.join(work, "input" + suffix)
            with open(path, "w") as f:
                f.write(text)
            out = subprocess.run([sys.executable, "-m", "optireduce.report", path, "--no-png"],
                                 capture_output=True, text=True, env=os.environ)
        return out

    def test_report_with_future_fields(self):
        rank = {"rank": 0, "intercepted_calls": 10, "passthrough_calls": 2, "bytes_reduced": 4 << 20,
                "entries_reduced": 1 << 20, "entries_dropped": 1 << 10, "latency_us": {"p50": 1500, "p99": 3000,
                                                                                     "max": 4000},
                "bounded_calls": 6, "fallback_calls": 1, "deadline_us": {"p50": 2000, "p99": 0, "max": 0},
                "passthrough_by_reason": {"datatype": 1, "nonblocking": 1}, "deadline_saved_s": 1.25,
                "size_classes": [{"bytes": 1 << 20, "p50_us": 900, "p99_us": 1900}]}
        other = dict(rank, rank=1, deadline_saved_s=0.75, passthrough_by_reason={"device": 3},
                     intercepted_by_operation={"allreduce": {"float32": 8}, "reduce_scatter": {"bfloat16": 2}},
                     passthrough_by_operation={"allreduce": 2, "reduce_scatter": 0})
        out = self.run_tool(json.dumps({"version": "9.9.9", "config": {"mode": "bounded"}, "ranks": [other, rank],
                                        "job": {"time_in_allreduce_s": 3.5}}), ".json")
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertIn("library 9.9.9, 2 ranks", lines[0])
        rows = {line.split()[0]: line.split() for line in lines if line.split() and line.split()[0] in ("0", "1", "all")}
        self.assertEqual(rows["all"][1:6], ["20", "4", "12", "2", "8.00"])
        self.assertEqual(rows["all"][6], "0.0977")  # 2048 of 2**21 entries
        self.assertEqual(rows["0"][7:11], ["1.500", "3.000", "4.000", "2.000"])
        self.assertIn("deadline_saved_s: total 2, max 1.25", lines)
        self.assertIn("passthrough by reason: datatype=1 device=3 nonblocking=1", lines)
        self.assertIn("engine calls by operation: allreduce float32 8, reduce_scatter bfloat16 2", lines)
        self.assertIn("passthrough by operation: allreduce 2", lines)
        self.assertTrue(any(line.startswith("size_classes: [{'bytes': 1048576") for line in lines))
        self.assertIn("job: {'time_in_allreduce_s': 3.5}", lines)

    def test_trace_with_extra_columns_and_junk(self):
        text = ("0 1 100 calibration ok 0 0 10 10 20.0 0 0 0\n"
                "0 2 100 bounded ok 300 200 10 10 1000.0 10 5 1 extra columns\n"
                "1 1 100 bounded timeout 300 200 10 10 3000.0 50 0 0\n"
                "garbage line\n")
        out = self.run_tool(text, ".txt")
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = {line.split()[0]: line.split() for line in out.stdout.splitlines() if line.split()}
        self.assertIn("3 calls on 2 ranks (1/2 per rank)", out.stdout)
        self.assertEqual(rows["bounded"][1:], ["2", "200", "60", "30.0000", "1.000", "3.000", "3.000", "0.500", "1"])
        self.assertEqual(rows["all"][1:5], ["3", "300", "60", "20.0000"])
        self.assertIn("malformed lines skipped: 1", out.stdout)

    def test_unreadable_input(self):
        out = self.run_tool("not a report", ".txt")
        self.assertEqual(out.returncode, 1)
        self.assertIn("neither a report", out.stderr)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--project-version", required=True)
    parser.add_argument("--layout-program", required=True)
    parser.add_argument("scenario", choices=["absent", "loaded"])
    parser.add_argument("library", nargs="?")
    ARGS, rest = parser.parse_known_args()
    if ARGS.scenario == "loaded" and not ARGS.library:
        parser.error("loaded needs the library's path")
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()

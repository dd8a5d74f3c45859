#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test under CTest: GoogleTest units, then the MPI
# integration tests (real mpirun, real UCX). Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir=${BUILD_DIR:-build}
# mpirun refuses root without these; CI and this machine run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# MPI tests oversubscribe the cores on their own, so they run one at a time.
ctest --test-dir "$build_dir" --output-on-failure "$@"

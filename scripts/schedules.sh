#!/usr/bin/env bash
# Randomized fault schedules against the engine (CI runs seeds 1 to 300 and, with several ranks
# per host (three-stage calls), 1000000 to 1000099; ctest label schedules)
# (tests/schedules: ranks as threads over an in-process datagram network that loses, cuts,
# doubles and reorders messages, deschedules ranks and makes them enter late).
#   scripts/schedules.sh --seeds N [--from S] [--jobs J]   N seeds from S (default 1), J at a time (default 4)
#   scripts/schedules.sh --seed S                          replay one seed, printing its schedule and calls
# Every failing seed prints its schedule, what broke and each call of each rank. The last line is
# "N seeds, M disagreements, F calls failed everywhere" (M: seeds with any hang, disagreement or
# broken bound; F: calls that failed on every rank alike, which shows the schedules are harsh).
# Environment: BUILD_DIR (default build); SCHEDULES_LOG=debug prints the engines' debug
# lines with rank and job time (with --seed).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
[[ -f $build/build.ninja || -f $build/Makefile ]] || { echo "schedules.sh: no build in $build (run scripts/setup.sh, or set BUILD_DIR)" >&2; exit 2; }
cmake --build "$build" -j2 --target optireduce_schedules >/dev/null
exec "$build/tests/schedules/optireduce_schedules" "$@"

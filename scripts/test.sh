#!/usr/bin/env bash
# Builds zaya and runs every test: the release build runs all of them (unit, finite-difference,
# CLI, and the PyTorch reference comparison); an ASan+UBSan build runs the unit and CLI tests again.
# Usage: scripts/test.sh [--no-sanitizers]
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}

echo "== release build (build/)"
cmake --preset default > /dev/null
cmake --build build -j "$JOBS"
echo "== tests (release)"
# One test at a time: each already uses every core through OpenMP/OpenBLAS, and spinning OpenMP
# threads of concurrent tests would fight over the cores.
ctest --preset default

if [[ "${1:-}" != "--no-sanitizers" ]]; then
  echo "== sanitizer build (build-asan/: AddressSanitizer + UndefinedBehaviorSanitizer)"
  cmake --preset asan > /dev/null
  cmake --build build-asan -j "$JOBS"
  echo "== tests (sanitizers; the slow PyTorch comparison runs in the release pass only)"
  # Single-threaded OpenMP here, so tests can run side by side without contention.
  OMP_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --preset asan -j "$JOBS"
fi
echo "== all tests passed"

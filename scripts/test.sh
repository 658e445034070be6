#!/usr/bin/env bash
# Builds zaya and runs every test: the release build runs all of them (unit, finite-difference,
# CLI, and the PyTorch reference comparison) twice, under both OpenBLAS kernel settings (see
# below); an ASan+UBSan build runs the unit tests and a chosen few end-to-end runs again
# (ZAYA_SANITIZER_RUNS in tests/CMakeLists.txt says which and why).
# Then the libFuzzer targets (fuzz/, clang + ASan + UBSan, built in the same build-asan/ tree, so
# the library is compiled once for both) run over their committed corpora for a bounded time each
# (FUZZ_SECONDS, default 5; scripts/fuzz.sh and docs/fuzzing.md).
# Usage: scripts/test.sh [--no-sanitizers]   (--no-sanitizers also skips the fuzzing)
# Works on a fresh machine by itself: it first runs scripts/setup.sh (idempotent, cheap when
# everything is installed).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}

bash scripts/setup.sh

# Tests that ctest reports as not run (Skipped) are collected and listed at the end.
skipped=()
run_ctest() {  # run_ctest LOG COMMAND...
  local log=$1; shift
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  while IFS= read -r name; do skipped+=("$name"); done < <(grep -oE '[0-9]+ - [^ ]+ \(Skipped\)' "$log" | awk '{print $3}')
  return "$rc"
}

echo "== release build (build/)"
cmake --preset default > /dev/null
cmake --build build -j "$JOBS"

# Debian's OpenBLAS must run its Haswell kernels on some AVX-512 EPYC machines
# (OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=512 in their environment), and those kernels round a
# GEMM row differently depending on the call's shape. Results must not depend on which kernels a
# machine uses, so the release tests run under the environment's setting and under the other one.
if [[ -n "${OPENBLAS_CORETYPE:-}" ]]; then
  other=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE); other_name="without OPENBLAS_CORETYPE"
else
  other=(env OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=512)
  other_name="with OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=512"
fi
# Tests side by side (-j): most of them are short processes, scripts that wait on other processes
# or single-threaded parts, and one at a time kept the release pass at 0.9 of 2 cores (412 s; 244 s
# with -j 2). Each test keeps OpenMP's default thread count, so the multi-threaded paths still run
# here; OMP_WAIT_POLICY=passive makes an idle OpenMP thread sleep instead of spinning, so that
# concurrent tests' threads do not fight over the cores. No test asserts on time.
echo "== tests (release, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset})"
run_ctest build/ctest-release.log env OMP_WAIT_POLICY=passive ctest --preset default -j "$JOBS"
if grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
  # The second pass runs what OpenBLAS's kernels could change. Left out: the supervisor drills
  # (aegis), the HTTP server (serve) and the run-safety script, which compare runs within one
  # pass; the tokenizers, the data pipeline, the communicators, the sizing arithmetic, the memory
  # plan's byte counts, the refusals of bad input, the decode bench's bookkeeping and the docs'
  # and layers' checks, which call no GEMM or whose results no GEMM's rounding reaches; the
  # emulated GPU's tests, held to the CPU within a tolerance, not bitwise.
  echo "== tests (release, $other_name; without aegis, serve, run safety, tokenizers, data, comm, sizing, memory plan, bad input, decode bench, gpu-emu, docs, layers)"
  run_ctest build/ctest-release-other.log "${other[@]}" OMP_WAIT_POLICY=passive \
    ctest --preset default -j "$JOBS" -LE 'aegis|serve|docs|layers|gpu-emu|gpu-emu64' \
    -E '^train\.run_safety\.|[Tt]okenizer|^data\.|^comm\.|^cli\.size$|^SizeShapes\.|^train\.device_memory_plan$|^cli\.(mpi_)?bad_input$|^cli\.bounded_inputs$|^cli\.bench_decode$'
else
  echo "== tests (release, $other_name): skipped, this CPU has no AVX2 for the Haswell kernels"
  skipped+=("release suite $other_name")
fi

if [[ "${1:-}" != "--no-sanitizers" ]]; then
  echo "== sanitizer build (build-asan/: AddressSanitizer + UndefinedBehaviorSanitizer)"
  cmake --preset asan > /dev/null
  cmake --build build-asan -j "$JOBS"
  echo "== tests (sanitizers: the unit tests and the end-to-end runs labelled sanitizers)"
  # Single-threaded OpenMP here, so tests can run side by side without contention.
  # The model-size searches (SizeShapes.BudgetsNeed...) are pure arithmetic over thousands of
  # candidate shapes, 90 s under the sanitizers: they run in the release passes.
  run_ctest build-asan/ctest-asan.log env OMP_NUM_THREADS=1 \
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --preset asan -j "$JOBS" -L '^(unit|sanitizers)$' -E '^SizeShapes\.BudgetsNeed'
fi
if [[ "${1:-}" != "--no-sanitizers" ]]; then
  echo "== fuzzing (the targets of build-asan/: every parser of untrusted input, ${FUZZ_SECONDS:-5} s per target)"
  ZAYA_FUZZ_PRESET=asan bash scripts/fuzz.sh "${FUZZ_SECONDS:-5}"
fi
if ((${#skipped[@]})); then
  echo "== all tests that ran passed; SKIPPED (not run on this machine): ${skipped[*]}"
else
  echo "== all tests passed"
fi

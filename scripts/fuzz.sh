#!/usr/bin/env bash
# Builds the libFuzzer targets (preset fuzz: clang, ASan + UBSan) and runs each one over its
# committed corpus fuzz/corpus/<target>/ for SECONDS_PER_TARGET (default 10). New inputs go to a
# scratch corpus under build-fuzz/fuzz-run/, never into the committed one; a crash, sanitizer
# report, leak, timeout (-timeout=5) or out-of-memory (-rss_limit_mb, 512 MB: every reader's memory
# is bounded whatever its input; ZAYA_FUZZ_RSS_MB sets it) leaves its input in
# build-fuzz/fuzz-run/artifacts/ and makes the script exit 1 after the remaining targets ran.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (targets: the names of fuzz/*.cpp)
# ZAYA_FUZZ_JOBS sets the build parallelism (default: all cores). ZAYA_FUZZ_PRESET picks the build:
# fuzz (build-fuzz/, the default) or asan (build-asan/, which builds the targets beside the
# sanitizer tests, so scripts/test.sh compiles the library once for both). See docs/fuzzing.md.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-10}
shift || true
if ! [[ $seconds =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "fuzz.sh: SECONDS_PER_TARGET must be a positive integer, got '$seconds'" >&2
  exit 2
fi
targets=("$@")
if ((${#targets[@]} == 0)); then
  for src in fuzz/*.cpp; do targets+=("$(basename "$src" .cpp)"); done
fi

bash scripts/setup.sh
preset=${ZAYA_FUZZ_PRESET:-fuzz}
build=build-$preset
cmake --preset "$preset" > /dev/null
build_targets=()
for t in "${targets[@]}"; do build_targets+=("fuzz_$t"); done
cmake --build "$build" -j"${ZAYA_FUZZ_JOBS:-$(nproc)}" --target "${build_targets[@]}"

run=$build/fuzz-run
# The targets write each input to a scratch file (fuzz/fuzz_util.h): in memory (/dev/shm) that is
# about three times faster than on disk. One directory per run, removed at the end.
shm=/tmp
if [[ -d /dev/shm && -w /dev/shm ]]; then shm=/dev/shm; fi
TMPDIR=$(mktemp -d "$shm/zaya-fuzz.XXXXXX")
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT
mkdir -p "$run/artifacts"
# Targets run side by side, one per core (ZAYA_FUZZ_PARALLEL, default nproc): each is
# single-threaded and stops after SECONDS_PER_TARGET of wall time, so two cores halve the wait.
fuzz_one() {  # fuzz_one TARGET: runs it, leaves ok or failed in $run/TARGET.result
  local t=$1 scratch="$run/corpus/$1" log="$run/$1.log" dict=()
  mkdir -p "$scratch"
  if [[ -f fuzz/$t.dict ]]; then dict=("-dict=fuzz/$t.dict"); fi
  # The scratch corpus comes first: libFuzzer writes new inputs into its first directory.
  if "$build/fuzz/fuzz_$t" "$scratch" "fuzz/corpus/$t" "${dict[@]}" \
      -max_total_time="$seconds" -timeout=5 -rss_limit_mb="${ZAYA_FUZZ_RSS_MB:-512}" \
      -print_final_stats=1 \
      -artifact_prefix="$run/artifacts/$t-" > "$log" 2>&1; then
    echo ok > "$run/$t.result"
  else
    echo failed > "$run/$t.result"
  fi
}
parallel=${ZAYA_FUZZ_PARALLEL:-$(nproc)}
running=0
for t in "${targets[@]}"; do
  rm -f "$run/$t.result"
  fuzz_one "$t" &
  if ((++running >= parallel)); then
    wait -n || true
    ((running--))
  fi
done
wait
failed=()
printf '%-16s %12s %8s  %s\n' target executions exec/s result
for t in "${targets[@]}"; do
  log="$run/$t.log"
  if [[ $(cat "$run/$t.result" 2> /dev/null) == ok ]]; then
    result=ok
  else
    result="FAILED (log $log)"
    failed+=("$t")
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  printf '%-16s %12s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$result"
done

if ((${#failed[@]})); then
  for t in "${failed[@]}"; do
    echo "---- $t: end of $run/$t.log"
    tail -n 40 "$run/$t.log"
  done
  echo "fuzz.sh: ${#failed[@]} target(s) failed: ${failed[*]} (inputs in $run/artifacts/)" >&2
  exit 1
fi
echo "fuzz.sh: all ${#targets[@]} targets ran ${seconds} s each without a finding"

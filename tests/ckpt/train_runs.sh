# Sourced by the data- and context-parallel equivalence tests (needs ZAYA and MPIRUN):
# run NP LOG args...: `zaya train` at NP ranks (under mpirun when NP > 1), one thread each; prints
# the log and fails when the run does.
run() {
  local np=$1 log=$2; shift 2
  local launch=()
  if ((np > 1)); then launch=("$MPIRUN" -np "$np" --oversubscribe --allow-run-as-root); fi
  "${launch[@]}" "$ZAYA" --threads 1 train --no-progress "$@" > "$log" 2>&1 \
    || { echo "zaya train at $np ranks $* failed:"; cat "$log"; return 1; }
}

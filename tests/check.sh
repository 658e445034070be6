# Sourced by the end-to-end test scripts: check "what" command... runs the command, prints
# "ok   what" or "FAIL what", and counts passes and fails for the script's summary and exit code.
passes=0; fails=0
check() {  # check "what" command...
  local what=$1; shift
  if "$@"; then echo "ok   $what"; passes=$((passes + 1)); else echo "FAIL $what"; fails=$((fails + 1)); fi
}

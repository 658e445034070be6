#!/usr/bin/env bash
# The BLAS kernels zaya chooses at start-up and its self-check, through the command line
# (backend/cpu/blas_startup.h): on this machine as installed, with the library's choice replaced by
# Prescott (the case of a CPU OpenBLAS 0.3.21 does not know), with OPENBLAS_CORETYPE, --blas-kernels
# and ZAYA_BLAS_KERNELS, and with a BLAS whose products are wrong. The expected kernels follow from
# this CPU's flags in /proc/cpuinfo, read here independently of zaya's cpuid code.
#   tests/cli/blas.sh ZAYA SRC WORK [MPIRUN]
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3; MPIRUN=${4:-}
rm -rf "$WORK"; mkdir -p "$WORK"
fails=0
check() {  # check WHAT OUTPUT EXPECTED_SUBSTRING
  if [[ "$2" == *"$3"* ]]; then echo "ok   $1"; else
    echo "FAIL $1: lacks '$3':"; echo "$2" | tail -8; fails=$((fails + 1)); fi
}
# zaya without the caller's kernel settings. OPENBLAS_L2_SIZE stays: machines that need it for
# correct products (AVX-512 EPYCs with OPENBLAS_L2_SIZE=512) keep it whatever the kernels.
clean=(env -u OPENBLAS_CORETYPE -u ZAYA_BLAS_KERNELS -u ZAYA_BLAS_CHOICE
       -u ZAYA_BLAS_TEST_LIBRARY_CHOICE -u ZAYA_BLAS_TEST_WRONG_PRODUCT)
info=(info --config "$SRC/configs/tiny.json")

flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done; }
if has avx512f avx512bw avx512dq avx512vl avx512cd; then best="SkylakeX"; tier="SkylakeX|Cooperlake"
elif has avx2 fma; then best="Haswell"; tier="Haswell|Zen"
elif has avx; then best="Sandybridge"; tier="Sandybridge|Bulldozer|Piledriver|Steamroller|Excavator"
else best=""; tier=""; fi
echo "this CPU's best kernels (from /proc/cpuinfo): ${best:-none better than Prescott}"

# 1. As installed: the kernels run are of the CPU's best tier, whoever chose them, and checked.
out=$("${clean[@]}" "$ZAYA" "${info[@]}" 2>&1)
kernels=$(echo "$out" | sed -n 's/^  kernels  *\([A-Za-z0-9]*\) kernels.*/\1/p')
echo "  as installed: $(echo "$out" | grep -m1 '^  kernels')"
if [[ -n $best ]]; then
  if [[ $kernels =~ ^($tier)$ ]]; then echo "ok   as installed: $kernels kernels, the CPU's best tier"; else
    echo "FAIL as installed: $kernels kernels, not of the tier of $best"; fails=$((fails + 1)); fi
fi
check "the self-check ran and passed" "$out" "self-check                         passed: 16 products"

# 2. A library that falls back to Prescott (the Intel Xeon of family 6, model 207): zaya takes the
#    CPU's best kernels, restarting itself with them, and says so.
out=$("${clean[@]}" ZAYA_BLAS_TEST_LIBRARY_CHOICE=Prescott "$ZAYA" "${info[@]}" 2>&1)
if [[ -n $best ]]; then
  check "library would take Prescott: zaya chooses $best" "$out" \
    "kernels                            $best kernels (chosen by zaya: OpenBLAS would take Prescott)"
else
  check "library takes Prescott on a CPU without AVX" "$out" "Prescott kernels (OpenBLAS's own choice)"
fi
out=$("${clean[@]}" ZAYA_BLAS_TEST_LIBRARY_CHOICE=Prescott "$ZAYA" --blas-kernels library "${info[@]}" 2>&1)
check "--blas-kernels library runs the library's choice" "$out" \
  "kernels                            Prescott kernels (OpenBLAS's own choice)"
check "  ... with OPENBLAS_CORETYPE set for it" "$out" "OPENBLAS_CORETYPE                  Prescott"
out=$("${clean[@]}" ZAYA_BLAS_TEST_LIBRARY_CHOICE=Prescott "$ZAYA" bench step \
  --config "$SRC/configs/tiny.json" --batch 1 --seq 16 --steps 1 --warmup 0 2>&1)
check "bench step logs the choice once" "$out" "blas: OpenBLAS 0.3.21, ${best:-Prescott} kernels"

# 3. The user's OPENBLAS_CORETYPE is respected; --blas-kernels and ZAYA_BLAS_KERNELS override it.
out=$("${clean[@]}" OPENBLAS_CORETYPE=Prescott "$ZAYA" "${info[@]}" 2>&1)
check "OPENBLAS_CORETYPE from the environment is respected" "$out" \
  "Prescott kernels (OPENBLAS_CORETYPE=Prescott from the environment)"
out=$("${clean[@]}" "$ZAYA" --blas-kernels prescott "${info[@]}" 2>&1)
check "--blas-kernels NAME" "$out" "Prescott kernels (--blas-kernels Prescott)"
out=$("${clean[@]}" ZAYA_BLAS_KERNELS=Prescott "$ZAYA" "${info[@]}" 2>&1)
check "ZAYA_BLAS_KERNELS NAME" "$out" "Prescott kernels (ZAYA_BLAS_KERNELS Prescott)"
out=$("${clean[@]}" OPENBLAS_CORETYPE=Prescott ZAYA_BLAS_KERNELS=Nehalem "$ZAYA" --blas-kernels Core2 \
  "${info[@]}" 2>&1)
check "the flag wins over both variables" "$out" "Core2 kernels (--blas-kernels Core2)"

# 4. Refusals: each exits 1 before the command runs, naming what is wrong.
refused() {  # refused WHAT EXPECTED -- command...
  local what=$1 expected=$2; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [[ $rc -ne 1 ]]; then echo "FAIL $what: exit $rc (want 1)"; echo "$out" | tail -5; fails=$((fails + 1))
  elif [[ "$out" == *"zaya ("* || "$out" == *"parameters:"* ]]; then
    echo "FAIL $what: the command ran"; fails=$((fails + 1))
  else check "$what" "$out" "$expected"; fi
}
refused "a BLAS with wrong products is refused" "computes wrong products with" -- \
  "${clean[@]}" ZAYA_BLAS_TEST_WRONG_PRODUCT=1 "$ZAYA" bench step --config "$SRC/configs/tiny.json" \
  --batch 1 --seq 16 --steps 1 --warmup 0
refused "  ... naming the kernels and OPENBLAS_CORETYPE" "kernels (OPENBLAS_CORETYPE=Prescott from the environment), OPENBLAS_CORETYPE=Prescott:" -- \
  "${clean[@]}" OPENBLAS_CORETYPE=Prescott ZAYA_BLAS_TEST_WRONG_PRODUCT=1 "$ZAYA" "${info[@]}"
refused "an unknown kernel name" "--blas-kernels: 'Skylake' is not a kernel choice (expected auto, library or one of" -- \
  "${clean[@]}" "$ZAYA" --blas-kernels Skylake "${info[@]}"
refused "an OPENBLAS_CORETYPE OpenBLAS has no kernels for" "OPENBLAS_CORETYPE=SapphireRapids (from the environment) names no kernels" -- \
  "${clean[@]}" OPENBLAS_CORETYPE=SapphireRapids "$ZAYA" "${info[@]}"

# 5. Under mpirun every rank makes the same choice (each restarts itself before MPI starts).
if [[ -n $MPIRUN ]]; then
  out=$("${clean[@]}" ZAYA_BLAS_TEST_LIBRARY_CHOICE=Prescott "$MPIRUN" -np 2 "$ZAYA" bench step \
    --config "$SRC/configs/tiny.json" --batch 1 --seq 16 --steps 1 --warmup 0 2>&1)
  check "mpirun -np 2: the ranks run the chosen kernels" "$out" \
    "blas: OpenBLAS 0.3.21, ${best:-Prescott} kernels"
fi

if ((fails)); then echo "$fails failed"; exit 1; fi
echo "all passed"

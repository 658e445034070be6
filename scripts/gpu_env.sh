# shellcheck shell=bash
# Sourced by the GPU scripts (scripts/gpu_suite.sh, bench/gpu_step_vs_pytorch.sh) with ROOT set
# to the repository, on the lent GPU machine or in the rehearsal (scripts/gpu_rehearsal.sh).
#  - Unpacks the bundle's libraries (scripts/gpu_bundle.sh packs them with gzip) once per machine.
#  - Finds, by search, the GPU libraries the bundle left out (its `locate` list: the CUDA runtime,
#    cuBLASLt; NCCL, which zaya opens with dlopen, and the driver's libcuda.so.1 when it runs on
#    cuda), in the system's loader cache, CUDA's folders and the Python packages (nvidia.*).
#  - Makes wrappers in $ZAYA_GPU_BIN (zaya, the test binary) that set LD_LIBRARY_PATH for zaya's
#    processes only: python, PyTorch and the machine's own tools keep their own libraries.
# zaya_gpu_preflight then prints where each library comes from and fails if `ldd` finds one missing.
ZAYA_BUNDLE=${ZAYA_BUNDLE:-$ROOT/.gpu-bundle}
# Where the libraries and wrappers go: TMPDIR (scripts/gpu_first_run.sh moves it into the tree
# when /tmp does not allow running programs).
zaya_gpu_lib=${TMPDIR:-/tmp}/zaya-gpu-lib
ZAYA_GPU_BIN=${TMPDIR:-/tmp}/zaya-gpu-bin
ZAYA_GPU_PYTHON=${PYTHON:-python3}
[[ -f $ZAYA_BUNDLE/manifest ]] || {
  echo "gpu_env.sh: no bundle at $ZAYA_BUNDLE (run scripts/gpu_bundle.sh here and carry .gpu-bundle)" >&2
  return 1
}
# The manifest: `device NAME`, `bin FILE` for each binary, `locate SONAME` for each library to find.
ZAYA_GPU_DEVICE=$(awk '$1 == "device" {print $2}' "$ZAYA_BUNDLE/manifest")
mapfile -t zaya_gpu_bins < <(awk '$1 == "bin" {print $2}' "$ZAYA_BUNDLE/manifest")
mapfile -t zaya_gpu_locate < <(awk '$1 == "locate" {print $2}' "$ZAYA_BUNDLE/manifest")
# gzip, which tar calls; without it, Python's tarfile (the GPU machine has Python for PyTorch).
zaya_gpu_unpack() {  # zaya_gpu_unpack ARCHIVE DIR
  if command -v gzip > /dev/null; then tar -C "$2" -xzf "$1"; else
    "$ZAYA_GPU_PYTHON" -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:gz").extractall(sys.argv[2])' "$1" "$2"
  fi
}
if [[ ! -f $zaya_gpu_lib/.unpacked || $ZAYA_BUNDLE/lib.tar.gz -nt $zaya_gpu_lib/.unpacked ]]; then
  rm -rf "$zaya_gpu_lib" && mkdir -p "$zaya_gpu_lib" &&
    zaya_gpu_unpack "$ZAYA_BUNDLE/lib.tar.gz" "$zaya_gpu_lib" && touch "$zaya_gpu_lib/.unpacked" ||
    { echo "gpu_env.sh: could not unpack $ZAYA_BUNDLE/lib.tar.gz (gzip or $ZAYA_GPU_PYTHON's tarfile)" >&2; return 1; }
fi

# Folders where a GPU library may be, in order: the loader's cache, CUDA's installs, the driver's
# folder, then the nvidia.* packages of every Python site folder (PyTorch's wheels bring the CUDA
# runtime, cuBLAS and NCCL there; CUDA 13's wheels put them in nvidia/cu13/lib).
zaya_gpu_search_dirs() {
  ldconfig -p 2>/dev/null | awk -F'=> ' '/=>/ {sub(/\/[^\/]*$/, "", $2); print $2}' | sort -u
  local d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/*/lib /usr/local/cuda-*/lib64 \
    /usr/local/cuda-*/targets/*/lib /usr/local/nvidia/lib64 /usr/local/nvidia/lib \
    /usr/lib/x86_64-linux-gnu /usr/lib64; do
    [[ -d $d ]] && echo "$d"
  done
  "$ZAYA_GPU_PYTHON" -c 'import site, sys; print("\n".join(sys.path + site.getsitepackages()))' \
    2>/dev/null | while read -r d; do
    [[ -d $d/nvidia ]] && find "$d/nvidia" -maxdepth 3 -type d -name lib 2>/dev/null
  done
  return 0
}
# zaya_gpu_find SONAME: the first search folder that holds it.
zaya_gpu_find() {
  local d
  for d in "${zaya_gpu_dirs[@]}"; do
    [[ -e $d/$1 ]] && { echo "$d/$1"; return 0; }
  done
  return 1
}
mapfile -t zaya_gpu_dirs < <(zaya_gpu_search_dirs | awk '!seen[$0]++')
ZAYA_LD_PATH=$zaya_gpu_lib
zaya_gpu_found=()   # "SONAME PATH" lines, printed by the preflight
zaya_gpu_missing=() # SONAMEs not found
zaya_gpu_optional=()
[[ $ZAYA_GPU_DEVICE == cuda ]] && zaya_gpu_optional=(libcuda.so.1 libnccl.so.2)
for so in "${zaya_gpu_locate[@]}" "${zaya_gpu_optional[@]}"; do
  if path=$(zaya_gpu_find "$so"); then
    zaya_gpu_found+=("$so $path")
    case :$ZAYA_LD_PATH: in *:"$(dirname "$path")":*) ;; *) ZAYA_LD_PATH+=:$(dirname "$path") ;; esac
  else
    zaya_gpu_missing+=("$so")
  fi
done
unset so path

# Wrappers: zaya's processes get ZAYA_LD_PATH, nothing else does. The real binaries stay in the
# bundle beside the plugin, which zaya loads from beside /proc/self/exe.
rm -rf "$ZAYA_GPU_BIN" && mkdir -p "$ZAYA_GPU_BIN"
for b in "${zaya_gpu_bins[@]}"; do
  [[ $b == *.so ]] && continue
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%q${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %q "$@"\n' \
    "$ZAYA_LD_PATH" "$ZAYA_BUNDLE/bin/$b" > "$ZAYA_GPU_BIN/$b"
  chmod +x "$ZAYA_GPU_BIN/$b"
done
unset b

# Prints what was found where and checks every bundled binary with ldd under zaya's library path;
# returns non-zero (after saying why) if a library is missing.
zaya_gpu_preflight() {
  local rc=0 b line
  echo "bundle: $ZAYA_BUNDLE, device $ZAYA_GPU_DEVICE, binaries: ${zaya_gpu_bins[*]}"
  echo "carried libraries: $(ls "$zaya_gpu_lib" | wc -l) in $zaya_gpu_lib"
  for line in "${zaya_gpu_found[@]}"; do echo "found: $line"; done
  for so in "${zaya_gpu_missing[@]}"; do
    if [[ " ${zaya_gpu_locate[*]} " == *" $so "* ]]; then
      echo "MISSING: $so (needed; searched ${#zaya_gpu_dirs[@]} folders: the loader cache," \
        "/usr/local/cuda*, /usr/local/nvidia, the nvidia.* Python packages of $ZAYA_GPU_PYTHON)"
      rc=1
    elif [[ $so == libcuda.so.1 ]]; then
      echo "warning: no libcuda.so.1 (the driver's): the GPU runs will report no usable device"
    else
      echo "not found: $so (optional: the NCCL test skips without it)"
    fi
  done
  for b in "${zaya_gpu_bins[@]}"; do
    if LD_LIBRARY_PATH=$ZAYA_LD_PATH ldd "$ZAYA_BUNDLE/bin/$b" 2>&1 | grep -E 'not found|not a dynamic'; then
      echo "ldd: $b has missing libraries (above)"
      rc=1
    else
      echo "ldd: $b: every library resolves"
    fi
  done
  command -v nvidia-smi > /dev/null &&
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$ZAYA_GPU_PYTHON" -c 'import sys, torch; print(f"python {sys.version.split()[0]}, torch {torch.__version__}, cuda available: {torch.cuda.is_available()}")' 2>&1 | tail -1
  return $rc
}

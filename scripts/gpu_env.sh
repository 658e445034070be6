# Sourced by the GPU scripts on a lent GPU machine (scripts/gpu_suite.sh,
# bench/gpu_step_vs_pytorch.sh) with ROOT set to the repository: unpacks the bundle's libraries
# (scripts/gpu_bundle.sh packs them with xz to stay under the device tool's carry limit) once per
# machine, and puts them, CUDA's, and PyTorch's NCCL on the library path.
zaya_gpu_lib=${TMPDIR:-/tmp}/zaya-gpu-lib
if [[ -f $ROOT/.gpu-bundle/lib.tar.xz ]] &&
  [[ ! -f $zaya_gpu_lib/.unpacked || $ROOT/.gpu-bundle/lib.tar.xz -nt $zaya_gpu_lib/.unpacked ]]; then
  rm -rf "$zaya_gpu_lib" && mkdir -p "$zaya_gpu_lib" &&
    tar -C "$zaya_gpu_lib" -xJf "$ROOT/.gpu-bundle/lib.tar.xz" && touch "$zaya_gpu_lib/.unpacked"
fi
export LD_LIBRARY_PATH=$zaya_gpu_lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# NCCL is loaded with dlopen and not carried (218 MB): PyTorch's copy, where its wheel has one.
zaya_nccl_lib=$(python3 -c "import nvidia.nccl as n; print(list(n.__path__)[0] + '/lib')" 2>/dev/null)
if [[ -n $zaya_nccl_lib && -d $zaya_nccl_lib ]]; then
  export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$zaya_nccl_lib
fi

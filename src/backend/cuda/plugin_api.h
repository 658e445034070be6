// The CUDA backend as a plugin: libzaya_cuda_backend.so, which `--device cuda` loads with dlopen
// (backend/device_select.cpp). The plugin holds the kernels, cuBLASLt and the CUDA runtime, so a
// CPU-only run never maps them (linked into `zaya`, they would cost every CPU run about 200 MB of
// resident memory and 0.1 s at start).
//
// Plain C++ on both sides: the plugin and `zaya` come from one build, with one compiler and one
// libstdc++, so C++ types and exceptions (zaya::Error) cross the boundary. The one C symbol,
// zaya_cuda_plugin(), returns the table below; its `abi` must equal the loader's kBackendAbi (a
// hash of the Backend interface and of this header, backend_abi.h), so a plugin of another build
// is refused by name instead of calling through a stale table.
#pragma once

#include <cstddef>
#include <string>

#include <memory>

#include "backend/backend.h"
#include "dist/communicator.h"

namespace zaya::cuda {

struct PluginApi {
  const char* abi;
  // Empty when a GPU is usable; otherwise why not.
  std::string (*unavailable_reason)();
  // "GPU 0 of 8: NVIDIA H100 80GB HBM3, 79.1 GiB" (requires a device).
  std::string (*device_summary)();
  // Makes GPU local_rank % (visible GPUs) the process's device; returns its index.
  int (*select_device)(int local_rank);
  // The backend over the current device: fp32, or bf16 GEMM inputs with fp32 accumulation.
  const Backend& (*backend)(bool bf16);
  // Seconds per product C[m, n] = op(A) · op(B) (row-major, op = transpose where asked) through
  // cuBLASLt, fp32 or bf16 inputs and output with fp32 accumulation, timed with events over
  // `reps` calls after a warm-up (`zaya bench gemm --device cuda`).
  double (*time_gemm)(int m, int n, int k, bool trans_a, bool trans_b, bool bf16, int reps);
  // Seconds of a STREAM kernel over arrays of n floats on the device (0 copy, 1 scale, 2 add,
  // 3 triad), the fastest of `runs` launches (`zaya bench membw --device cuda`).
  double (*time_stream_kernel)(int kernel, size_t n, int runs);
  // Bytes of device memory in use (total minus free), for the peak-memory figures.
  size_t (*device_memory_used)();
  // A communicator over NCCL for GPU memory, of the ranks of `host` (nccl_communicator.h):
  // sums in rank order, or NCCL's own reductions (the benchmark's peer).
  std::unique_ptr<dist::Communicator> (*make_nccl_communicator)(dist::Communicator& host,
                                                                bool rank_order_sums);
};

}  // namespace zaya::cuda

extern "C" const zaya::cuda::PluginApi* zaya_cuda_plugin();

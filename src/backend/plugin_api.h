// A backend as a plugin: a shared library beside `zaya` that the device registry
// (backend/device_registry.h) loads with dlopen for a device registered with a plugin file
// (libzaya_cuda_backend.so for --device cuda, libzaya_cuda_emu_backend.so for cuda-emu). The
// plugin holds the kernels and their libraries (cuBLASLt, the CUDA runtime), so a CPU-only run
// never maps them (linked into `zaya`, they would cost every CPU run about 200 MB of resident
// memory and 0.1 s at start).
//
// Plain C++ on both sides: a plugin and `zaya` come from one build, with one compiler and one
// libstdc++, so C++ types and exceptions (zaya::Error) cross the boundary. Every plugin exports
// the one C symbol zaya_backend_plugin(), which returns the table below; its `abi` must equal the
// loader's kBackendAbi (a hash of the Backend interface and of this header, backend_abi.h), so a
// plugin of another build is refused by name instead of calling through a stale table.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "dist/communicator.h"

namespace zaya {

struct BackendPlugin {
  const char* abi;
  // Empty when a device is usable; otherwise why not (the runtime's reason).
  std::string (*unavailable_reason)();
  // "GPU 0 of 8: NVIDIA H100 80GB HBM3, 79.1 GiB" (requires a device).
  std::string (*device_summary)();
  // Makes device local_rank % (visible devices) the process's device; returns its index.
  int (*select_device)(int local_rank);
  // The backend over the current device: fp32, or bf16 GEMM inputs with fp32 accumulation.
  const Backend& (*backend)(bool bf16);
  // Seconds per product C[m, n] = op(A) · op(B) (row-major, op = transpose where asked), fp32 or
  // bf16 inputs and output with fp32 accumulation, timed over `reps` calls after a warm-up
  // (`zaya bench gemm --device NAME`).
  double (*time_gemm)(int m, int n, int k, bool trans_a, bool trans_b, bool bf16, int reps);
  // Seconds of a STREAM kernel over arrays of n floats on the device (0 copy, 1 scale, 2 add,
  // 3 triad), the fastest of `runs` launches (`zaya bench membw --device NAME`).
  double (*time_stream_kernel)(int kernel, size_t n, int runs);
  // Bytes of device memory in use (total minus free) and in all, for the peak-memory figures,
  // and the most that zaya's own allocations held at once (not the context's or libraries').
  void (*device_memory)(size_t* used, size_t* total, size_t* peak);
  // A communicator over the device's own collectives (NCCL on cuda), of the ranks of `host`:
  // sums in rank order, or the library's own reductions (the benchmark's peer). Called only for
  // devices registered with collectives of their own (DeviceCapabilities::collectives).
  std::unique_ptr<dist::Communicator> (*make_collective)(dist::Communicator& host,
                                                         bool rank_order_sums);
};

}  // namespace zaya

extern "C" const zaya::BackendPlugin* zaya_backend_plugin();

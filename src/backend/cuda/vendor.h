// The one place where GPU vendor names live. Every .cu file of backend/cuda includes this header
// and writes CUDA's names; the HIP build (ZAYA_HIP, compiled by hipcc for AMD GPUs) maps them to
// HIP's, the way ggml's vendors/hip.h does, so one source serves NVIDIA and AMD. The emulated
// device (ZAYA_CUDA_EMU, `--device cuda-emu`) compiles the same sources as C++ for the CPU
// (backend/cuda_emu/emu_cuda.h). Kernels are launched through ZAYA_LAUNCH and take dynamic shared
// memory through ZAYA_DYNAMIC_SHARED, so that all three build from one text.
#pragma once

#if defined(ZAYA_HIP)
#include <hip/hip_runtime.h>

#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaErrorNoDevice hipErrorNoDevice
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaDeviceProp hipDeviceProp_t
#define cudaSetDevice hipSetDevice
#define cudaGetDevice hipGetDevice
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMemcpy hipMemcpy
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemset hipMemset
#define cudaMemset2D hipMemset2D
#define cudaMemsetAsync hipMemsetAsync
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaStream_t hipStream_t
#define cudaEvent_t hipEvent_t
#define cudaEventCreate hipEventCreate
#define cudaEventDestroy hipEventDestroy
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaEventElapsedTime hipEventElapsedTime
#define cudaMemGetInfo hipMemGetInfo
#define cudaErrorNotReady hipErrorNotReady
#define cudaEventCreateWithFlags hipEventCreateWithFlags
#define cudaEventDisableTiming hipEventDisableTiming
#define cudaEventQuery hipEventQuery
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamWaitEvent hipStreamWaitEvent
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamDestroy hipStreamDestroy
#define cudaHostAlloc hipHostMalloc
#define cudaHostAllocDefault hipHostMallocDefault
#define cudaFreeHost hipHostFree
// CDNA GPUs (MI300X) run 64-lane wavefronts.
#define ZAYA_WARP_SIZE 64
#define ZAYA_SHFL_XOR(value, lane_mask) __shfl_xor(value, lane_mask)
#elif defined(ZAYA_CUDA_EMU)
#include "backend/cuda_emu/emu_cuda.h"
// 32 lanes as NVIDIA's warps; 64 exercises the AMD wavefronts' path (the HIP build's).
#if !defined(ZAYA_EMU_WARP_SIZE)
#define ZAYA_EMU_WARP_SIZE 32
#endif
#define ZAYA_WARP_SIZE ZAYA_EMU_WARP_SIZE
#define ZAYA_SHFL_XOR(value, lane_mask) \
  ::zaya::emu::shuffle_xor(value, lane_mask, 0xffffffffu, __LINE__)
#define ZAYA_LAUNCH(kernel, grid, block, shared_bytes, stream) \
  ::zaya::emu::make_launch(#kernel, kernel, grid, block, shared_bytes)
#define ZAYA_DYNAMIC_SHARED(type, name) \
  type* const name = static_cast<type*>(::zaya::emu::dynamic_shared_memory())
#else
#include <cuda_runtime.h>
#define ZAYA_WARP_SIZE 32
#define ZAYA_SHFL_XOR(value, lane_mask) __shfl_xor_sync(0xffffffffu, value, lane_mask)
#endif

#if !defined(ZAYA_CUDA_EMU)
// kernel<<<grid, block, shared_bytes, stream>>>(arguments...), in one spelling for every build.
#define ZAYA_LAUNCH(kernel, grid, block, shared_bytes, stream) \
  kernel<<<grid, block, shared_bytes, stream>>>
// The block's dynamic shared memory (the launch's shared_bytes) as an array of `type`.
#define ZAYA_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

#include "core/error.h"

// Throws zaya::Error with the runtime's message and the call that failed.
#define ZAYA_CUDA_CHECK(call)                                       \
  do {                                                              \
    const cudaError_t zaya_cuda_status_ = (call);                   \
    ZAYA_CHECK(zaya_cuda_status_ == cudaSuccess, #call,             \
               " failed: ", cudaGetErrorString(zaya_cuda_status_)); \
  } while (0)

// After a kernel launch: a bad launch configuration shows up here, not at the next sync.
#define ZAYA_CUDA_LAUNCHED(what) ZAYA_CUDA_CHECK(cudaGetLastError())

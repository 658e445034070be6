// The names of CUDA that backend/cuda's sources use, for the emulated device (vendor.h includes
// this header when ZAYA_CUDA_EMU is defined): the qualifiers, the thread coordinates, barriers
// and shuffles (kernel_launch.h), bf16, and the runtime calls, implemented on the CPU
// (runtime.cpp) over exact-size host allocations, so AddressSanitizer sees every out-of-bounds
// access a kernel makes.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backend/cuda_emu/kernel_launch.h"

// Qualifiers: plain C++ functions on the host.
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
// Static shared memory: one copy per OS thread, shared by the fibers of the block that runs on
// it (blocks run one after the other).
#define __shared__ static thread_local

#define threadIdx (::zaya::emu::thread_index())
#define blockIdx (::zaya::emu::block_index())
#define blockDim (::zaya::emu::block_dim())
#define gridDim (::zaya::emu::grid_dim())
#define __syncthreads() ::zaya::emu::sync_threads(__LINE__)

using ::zaya::emu::dim3;
using ::zaya::emu::uint3;

// CUDA's min and max of the device's integer and floating types.
#define ZAYA_EMU_MIN_MAX(T) \
  inline T min(T a, T b) {  \
    return b < a ? b : a;   \
  }                         \
  inline T max(T a, T b) {  \
    return a < b ? b : a;   \
  }
ZAYA_EMU_MIN_MAX(int)
ZAYA_EMU_MIN_MAX(unsigned)
ZAYA_EMU_MIN_MAX(long)
ZAYA_EMU_MIN_MAX(unsigned long)
ZAYA_EMU_MIN_MAX(long long)
ZAYA_EMU_MIN_MAX(float)
ZAYA_EMU_MIN_MAX(double)
#undef ZAYA_EMU_MIN_MAX

inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// bf16: the upper half of an fp32, rounded to nearest even (NaN stays NaN).
struct __nv_bfloat16 {
  uint16_t bits;
};
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  const uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {uint16_t((u >> 16) | 0x40)};
  return {uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}
inline float __bfloat162float(__nv_bfloat16 h) {
  return __uint_as_float(uint32_t(h.bits) << 16);
}

// The runtime's types and calls (runtime.cpp).
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorNoDevice = 100,
  cudaErrorNotReady = 600,
};
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16BF = 14 };
constexpr unsigned cudaEventDisableTiming = 2;
constexpr unsigned cudaStreamNonBlocking = 1;

struct CUstream_st;
struct CUevent_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  int multiProcessorCount;
  int warpSize;
  size_t sharedMemPerBlock;
  int maxThreadsPerBlock;
};

const char* cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetLastError();
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);
cudaError_t cudaMalloc(void** p, size_t bytes);
cudaError_t cudaFree(void* p);
// Pinned host memory: plain host memory here (the emulator copies synchronously anyway).
constexpr unsigned cudaHostAllocDefault = 0;
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned flags);
cudaError_t cudaFreeHost(void* p);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* dst, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaMemset2D(void* dst, size_t pitch, int value, size_t width, size_t height);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags = 0);
cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t stop);
template <typename Kernel>
cudaError_t cudaFuncSetAttribute(Kernel* kernel, cudaFuncAttribute attribute, int value) {
  if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0)
    return cudaErrorInvalidValue;
  ::zaya::emu::set_max_dynamic_shared(reinterpret_cast<const void*>(kernel), size_t(value));
  return cudaSuccess;
}

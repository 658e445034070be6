// The CUDA runtime calls of backend/cuda on the emulated device (emu_cuda.h): one device, whose
// memory is the host's (device_memory.h); every call completes before it returns (a kernel
// launch too), so streams and events only keep the host's clock.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "backend/cuda/vendor.h"
#include "backend/cuda_emu/device_memory.h"

namespace {

using zaya::emu::require_device_range;

// The capacity the emulated device reports (what cudaMemGetInfo's callers size by).
constexpr size_t kEmulatedBytes = size_t(16) << 30;

// A copy's two sides are checked against its kind: device sides must lie in an allocation.
cudaError_t checked_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return cudaSuccess;
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (dst_device) require_device_range(dst, bytes, "cudaMemcpy (emulated) destination");
  if (src_device) require_device_range(src, bytes, "cudaMemcpy (emulated) source");
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

}  // namespace

struct CUstream_st {};
struct CUevent_st {
  std::chrono::steady_clock::time_point at = std::chrono::steady_clock::now();
};

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorNotReady:
      return "device not ready";
  }
  return "unknown error";
}

cudaError_t cudaGetLastError() {
  return cudaSuccess;  // the emulator throws at the failing call instead
}
cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return cudaErrorInvalidValue;
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof(prop->name), "cuda-emu (the CUDA kernels on the CPU, warp %d)",
                ZAYA_WARP_SIZE);
  prop->totalGlobalMem = kEmulatedBytes;
  prop->multiProcessorCount = 1;
  prop->warpSize = ZAYA_WARP_SIZE;
  prop->sharedMemPerBlock = 48 * 1024;
  prop->maxThreadsPerBlock = 1024;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  const size_t used = zaya::emu::device_bytes_in_use();
  *total_bytes = kEmulatedBytes;
  *free_bytes = used < kEmulatedBytes ? kEmulatedBytes - used : 0;
  return cudaSuccess;
}
cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = zaya::emu::device_allocate(bytes);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  return zaya::emu::device_release(p) ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned flags) {
  if (p == nullptr || flags != cudaHostAllocDefault) return cudaErrorInvalidValue;
  *p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  return *p != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeHost(void* p) {
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return checked_copy(dst, src, bytes, kind);
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t) {
  return checked_copy(dst, src, bytes, kind);
}
cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  if (bytes == 0) return cudaSuccess;
  require_device_range(dst, bytes, "cudaMemset (emulated)");
  std::memset(dst, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t) {
  return cudaMemset(dst, value, bytes);
}
cudaError_t cudaMemset2D(void* dst, size_t pitch, int value, size_t width, size_t height) {
  if (width == 0 || height == 0) return cudaSuccess;
  if (width > pitch) return cudaErrorInvalidValue;
  require_device_range(dst, pitch * (height - 1) + width, "cudaMemset2D (emulated)");
  for (size_t r = 0; r < height; ++r)
    std::memset(static_cast<char*>(dst) + r * pitch, value, width);
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  *stream = new CUstream_st;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete stream;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) {
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) {
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* event) {
  *event = new CUevent_st;
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) {
  return cudaEventCreate(event);
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  event->at = std::chrono::steady_clock::now();
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) {
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t) {
  return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t stop) {
  *ms = std::chrono::duration<float, std::milli>(stop->at - start->at).count();
  return cudaSuccess;
}

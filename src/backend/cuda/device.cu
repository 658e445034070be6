#include "backend/cuda/device.h"

#include <cstdio>

#include "backend/cuda/vendor.h"

namespace zaya::cuda {

std::string unavailable_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // clear it: the next call must not report this again
    return cudaGetErrorString(status);
  }
  return count > 0 ? std::string() : "no GPU device is visible";
}

std::string device_summary() {
  int device = 0, count = 0;
  ZAYA_CUDA_CHECK(cudaGetDevice(&device));
  ZAYA_CUDA_CHECK(cudaGetDeviceCount(&count));
  cudaDeviceProp prop{};
  ZAYA_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  char text[360];
  std::snprintf(text, sizeof(text), "GPU %d of %d: %s, %.1f GiB", device, count, prop.name,
                double(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

int select_device(int local_rank) {
  int count = 0;
  ZAYA_CUDA_CHECK(cudaGetDeviceCount(&count));
  ZAYA_CHECK(count > 0, "no GPU device is visible");
  const int device = local_rank % count;
  ZAYA_CUDA_CHECK(cudaSetDevice(device));
  return device;
}

void synchronize() {
  ZAYA_CUDA_CHECK(cudaDeviceSynchronize());
}

void* device_alloc(size_t bytes) {
  void* p = nullptr;
  ZAYA_CUDA_CHECK(cudaMalloc(&p, bytes));
  return p;
}

void device_free(void* p) noexcept {
  if (p) (void)cudaFree(p);  // a destructor has nobody to tell
}

void copy_to_device(void* dst, const void* src, size_t bytes) {
  ZAYA_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

void copy_to_host(void* dst, const void* src, size_t bytes) {
  ZAYA_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

void copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes) ZAYA_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}

void fill_zero(void* dst, size_t bytes) {
  ZAYA_CUDA_CHECK(cudaMemset(dst, 0, bytes));
}

}  // namespace zaya::cuda

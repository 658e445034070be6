// The embedding's backward: dtable[token[t]] += dout[t] for every token, in token order (the
// CPU's order: cpu::embedding_backward). Tokens repeat, so two rows may land on one row of the
// table; each element must see its additions in token order to give the CPU's bits.
//
// The tokens are sorted by id (a stable radix sort of (id, position): CUB, or hipCUB where ROCm
// has it) and one thread per (id, column) adds that id's rows in token order into a register,
// starting from the table's value: one writer per element, the same additions in the same order
// as the CPU, and parallel over ids × columns. Without CUB (Debian's hipcc has no hipCUB) one
// thread per column walks every token in order instead: the same bits, parallel over columns
// only.
#include <algorithm>

#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"

#if defined(ZAYA_HIP)
#if __has_include(<hipcub/hipcub.hpp>)
#include <hipcub/hipcub.hpp>
#define ZAYA_HAVE_CUB 1
namespace cub = hipcub;
#endif
#elif !defined(ZAYA_CUDA_EMU)  // the emulated device takes the fallback below
#include <cub/device/device_radix_sort.cuh>
#define ZAYA_HAVE_CUB 1
#endif

#include "backend/cuda/device.h"

namespace zaya::cuda {

namespace {

#if !defined(ZAYA_HAVE_CUB)
__global__ void embedding_backward_kernel(float* dtable, const float* dout, const int* tokens,
                                          int n, int e) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= e) return;
  for (int t = 0; t < n; ++t) dtable[size_t(tokens[t]) * e + j] += dout[size_t(t) * e + j];
}
#else
__global__ void iota_kernel(int32_t* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i;
}

// ids: the token ids sorted, rows: their token positions (in token order within an id). Block
// (x, y) takes columns [x·blockDim, …) of the sorted positions y, y + gridDim.y, …; the first
// position of each id adds that id's rows.
__global__ void embedding_backward_sorted_kernel(float* dtable, const float* dout,
                                                 const int32_t* ids, const int32_t* rows, int n,
                                                 int e) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= e) return;
  for (int p = blockIdx.y; p < n; p += gridDim.y) {
    const int32_t id = ids[p];
    if (p > 0 && ids[p - 1] == id) continue;  // not the first of its id
    float* out = dtable + size_t(id) * e + j;
    float acc = *out;
    for (int k = p; k < n && ids[k] == id; ++k) acc += dout[size_t(rows[k]) * e + j];
    *out = acc;
  }
}
#endif

}  // namespace

void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int n, int e,
                        int vocab) {
  if (n == 0 || e == 0) return;
  ZAYA_CHECK(vocab > 0, "embedding_backward: a table of ", vocab, " rows");
#if defined(ZAYA_HAVE_CUB)
  ScratchBuffer<int32_t> positions(static_cast<size_t>(n)), ids(static_cast<size_t>(n)),
      rows(static_cast<size_t>(n));
  ZAYA_LAUNCH(iota_kernel, blocks_for(n, 256), 256, 0, 0)(positions.get(), n);
  ZAYA_CUDA_LAUNCHED("embedding_backward (positions)");
  // Only the bits an id below vocab can have: 18 passes' worth of ZAYA1's 262,272 ids instead of
  // 32 (tokens are non-negative, so the sign bit CUB flips for signed keys is never examined).
  int end_bit = 1;  // the bit width of vocab - 1 (C++17 here: no std::bit_width)
  while (end_bit < 31 && (unsigned(vocab - 1) >> end_bit) != 0) ++end_bit;
  size_t temp_bytes = 0;
  ZAYA_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, tokens, ids.get(),
                                                  positions.get(), rows.get(), n, 0, end_bit));
  ScratchBuffer<unsigned char> temp(temp_bytes);
  // Stable: the positions of one id stay in token order.
  ZAYA_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, tokens, ids.get(),
                                                  positions.get(), rows.get(), n, 0, end_bit));
  const dim3 grid(blocks_for(e, 128), unsigned(std::min(n, 4096)));
  ZAYA_LAUNCH(embedding_backward_sorted_kernel, grid, 128, 0, 0)
  (dtable, dout, ids.get(), rows.get(), n, e);
  ZAYA_CUDA_LAUNCHED("embedding_backward");
#else
  ZAYA_LAUNCH(embedding_backward_kernel, blocks_for(e, 128), 128, 0, 0)(dtable, dout, tokens, n, e);
  ZAYA_CUDA_LAUNCHED("embedding_backward");
#endif
}

}  // namespace zaya::cuda

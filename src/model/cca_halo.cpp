#include "model/cca_halo.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

namespace zaya {

namespace {

constexpr int kTagFirst = 7411, kTagSecond = 7412;

// The last kHaloRows rows of local chunk `which` of every sequence, [B, 2, P] ↔ proj [B, L, P].
size_t tail_row(const ContextShard& s, int b, int which, int i) {
  return size_t(b) * size_t(s.local_len()) + size_t(s.offset(which) + s.len(which) - kHaloRows + i);
}

void copy_tail(float* dst, const float* proj, int B, int P, const ContextShard& s, int which) {
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < kHaloRows; ++i)
      std::memcpy(dst + (size_t(b) * kHaloRows + i) * P, proj + tail_row(s, b, which, i) * P,
                  sizeof(float) * P);
}

void add_tail(float* dproj, const float* src, int B, int P, const ContextShard& s, int which) {
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < kHaloRows; ++i) {
      float* row = dproj + tail_row(s, b, which, i) * P;
      const float* g = src + (size_t(b) * kHaloRows + i) * P;
      for (int j = 0; j < P; ++j) row[j] += g[j];
    }
}

}  // namespace

void cca_halo_forward(float* const halo[2], const float* proj, int B, int P,
                      const ContextShard& shard) {
  const int N = shard.size(), r = shard.rank();
  const size_t n = size_t(B) * kHaloRows * P;
  std::vector<float> tail0(n), tail1(n);
  copy_tail(tail0.data(), proj, B, P, shard, 0);
  copy_tail(tail1.data(), proj, B, P, shard, 1);
  // First chunks run up the ranks (r−1 → r); second chunks down (r+1 → r).
  const int up = r + 1 < N ? r + 1 : -1, down = r > 0 ? r - 1 : -1;
  auto first =
      shard.comm->start_sendrecv(tail0.data(), n, up, halo[0], n, down, DType::F32, kTagFirst);
  auto second =
      shard.comm->start_sendrecv(tail1.data(), n, down, halo[1], n, up, DType::F32, kTagSecond);
  first->wait();
  second->wait();
  if (r == 0) std::fill_n(halo[0], n, 0.0f);  // chunk 0: the sequence's zero padding
  if (r == N - 1) std::copy(tail0.begin(), tail0.end(), halo[1]);  // chunk N follows chunk N−1
}

void cca_halo_backward(float* dproj, const float* const dhalo[2], int B, int P,
                       const ContextShard& shard) {
  const int N = shard.size(), r = shard.rank();
  const size_t n = size_t(B) * kHaloRows * P;
  std::vector<float> from_up(n), from_down(n);
  const int up = r + 1 < N ? r + 1 : -1, down = r > 0 ? r - 1 : -1;
  // The reverse of the forward: the first chunk's halo gradient goes down to the owner of chunk
  // r−1, the second's up to the owner of chunk 2N−2−r.
  auto first =
      shard.comm->start_sendrecv(dhalo[0], n, down, from_up.data(), n, up, DType::F32, kTagFirst);
  auto second = shard.comm->start_sendrecv(dhalo[1], n, up, from_down.data(), n, down, DType::F32,
                                           kTagSecond);
  first->wait();
  second->wait();
  if (up >= 0) add_tail(dproj, from_up.data(), B, P, shard, 0);
  if (down >= 0) add_tail(dproj, from_down.data(), B, P, shard, 1);
  if (r == N - 1) add_tail(dproj, dhalo[1], B, P, shard, 0);
}

}  // namespace zaya

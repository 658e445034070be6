#include "backend/cpu/cpu_as_device_backend.h"

#include <algorithm>

#include "backend/cpu/bf16_ops.h"
#include "backend/cpu/lm_head_loss.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/model_ops.h"
#include "backend/stored_range.h"
#include "core/tensor.h"

namespace zaya {

void CpuAsDeviceBackend::set_product_weights(const float* base, size_t n) const {
  if (!bf16_) return;
  rounded_.resize(n);
  cpu::round_to_bf16(rounded_.data(), base, n);
  base_ = base;
  n_ = n;
  stored_ = rounded_.data();
}

void CpuAsDeviceBackend::set_stored_bf16_weights(const float* base, size_t n,
                                                 const uint16_t* bf16) const {
  ZAYA_CHECK(bf16_, "the fp32 cpu-as-device backend has no bf16 weights");
  rounded_.clear();
  rounded_.shrink_to_fit();
  base_ = base;
  n_ = n;
  stored_ = bf16;
}

void CpuAsDeviceBackend::set_stored_bf16_gradients(const float* base, size_t n,
                                                   uint16_t* bf16) const {
  ZAYA_CHECK(bf16_, "the fp32 cpu-as-device backend has no bf16 gradients");
  grads_base_ = base;
  grads_n_ = n;
  grads_ = bf16;
}

float* CpuAsDeviceBackend::grad(float* dw, size_t n, size_t at) const {
  if (grads_ == nullptr || stored_index(dw, n, grads_base_, grads_n_) < 0) return dw;
  if (grad_scratch_.size() < at + n) grad_scratch_.resize(at + n);
  std::fill_n(grad_scratch_.data() + at, n, 0.0f);
  return grad_scratch_.data() + at;
}

void CpuAsDeviceBackend::add_stored_grads(float* dw, size_t n, size_t at) const {
  const int64_t index = grads_ ? stored_index(dw, n, grads_base_, grads_n_) : -1;
  if (index < 0) return;
  uint16_t* g = grads_ + index;
  const float* add = grad_scratch_.data() + at;
  for (size_t i = 0; i < n; ++i) g[i] = f32_to_bf16(bf16_to_f32(g[i]) + add[i]);
}

const float* CpuAsDeviceBackend::weight(const float* w, size_t n, size_t at) const {
  const int64_t index = bf16_ && stored_ ? stored_index(w, n, base_, n_) : -1;
  if (index < 0) return w;
  if (scratch_.size() < at + n) scratch_.resize(at + n);
  cpu::widen_bf16(scratch_.data() + at, stored_ + index, n);
  return scratch_.data() + at;
}

std::vector<const float*> CpuAsDeviceBackend::group_weights(const float* const* weights, int groups,
                                                            size_t each) const {
  std::vector<const float*> read(static_cast<size_t>(groups));
  // Room for every group first: growing the scratch would move the widened groups before.
  if (bf16_ && stored_ != nullptr && scratch_.size() < size_t(groups) * each)
    scratch_.resize(size_t(groups) * each);
  for (int g = 0; g < groups; ++g) read[size_t(g)] = weight(weights[g], each, size_t(g) * each);
  return read;
}

void CpuAsDeviceBackend::matmul_forward(float* out, const float* in, const float* w,
                                        const float* bias, int n, int k, int m) const {
  cpu::matmul_forward(out, in, weight(w, size_t(k) * size_t(m)), bias, n, k, m);
}

void CpuAsDeviceBackend::matmul_backward(float* din, float* dw, float* dbias, const float* dout,
                                         const float* in, const float* w, int n, int k,
                                         int m) const {
  const size_t size = size_t(k) * size_t(m);
  cpu::matmul_backward(din, grad(dw, size), dbias, dout, in, weight(w, size), n, k, m);
  add_stored_grads(dw, size);
}

void CpuAsDeviceBackend::grouped_matmul_forward(float* out, const float* in,
                                                const float* const* weights, const int* offsets,
                                                int groups, int k, int m) const {
  const std::vector<const float*> read = group_weights(weights, groups, size_t(k) * size_t(m));
  cpu::grouped_matmul_forward(out, in, read.data(), offsets, groups, k, m);
}

void CpuAsDeviceBackend::grouped_matmul_backward(float* din, float* const* dweights,
                                                 const float* dout, const float* in,
                                                 const float* const* weights, const int* offsets,
                                                 int groups, int k, int m) const {
  const size_t each = size_t(k) * size_t(m);
  const std::vector<const float*> read = group_weights(weights, groups, each);
  std::vector<float*> write(static_cast<size_t>(groups));
  if (dweights != nullptr) {
    // Room for every group first: growing the scratch would move the groups before.
    if (grads_ != nullptr && grad_scratch_.size() < size_t(groups) * each)
      grad_scratch_.resize(size_t(groups) * each);
    for (int g = 0; g < groups; ++g) write[size_t(g)] = grad(dweights[g], each, size_t(g) * each);
  }
  cpu::grouped_matmul_backward(din, dweights ? write.data() : nullptr, dout, in, read.data(),
                               offsets, groups, k, m);
  if (dweights != nullptr)
    for (int g = 0; g < groups; ++g) add_stored_grads(dweights[g], each, size_t(g) * each);
}

double CpuAsDeviceBackend::lm_head_loss_forward(float* lse, const float* y, const float* w,
                                                const int32_t* targets, int n, int e, int v,
                                                const LmHeadChunks& chunks, float* scratch,
                                                int64_t* count) const {
  return cpu::lm_head_loss_forward(lse, y, weight(w, size_t(v) * size_t(e)), targets, n, e, v,
                                   chunks, scratch, count);
}

void CpuAsDeviceBackend::lm_head_loss_backward(float* dy, float* dw, const float* y, const float* w,
                                               const float* lse, const int32_t* targets, int n,
                                               int e, int v, float loss_scale,
                                               const LmHeadChunks& chunks, float* scratch) const {
  cpu::lm_head_loss_backward(dy, dw, y, weight(w, size_t(v) * size_t(e)), lse, targets, n, e, v,
                             loss_scale, chunks, scratch);
}

void CpuAsDeviceBackend::embedding_forward(float* out, const float* table, const int32_t* tokens,
                                           int n, int e) const {
  const int64_t index = bf16_ && stored_ ? stored_index(table, 1, base_, n_) : -1;
  if (index < 0) {
    cpu::embedding_forward(out, table, tokens, n, e);
    return;
  }
  // The gather of the bf16 rows, widened (the table's extent is not an argument: each row read
  // must lie inside the stored weights).
  const size_t first = size_t(index);
  for (int t = 0; t < n; ++t) {
    const size_t row = first + size_t(tokens[t]) * size_t(e);
    ZAYA_CHECK(tokens[t] >= 0 && row + size_t(e) <= n_, "embedding_forward: token ", tokens[t],
               " is outside the stored weights");
    cpu::widen_bf16(out + size_t(t) * size_t(e), stored_ + row, size_t(e));
  }
}

}  // namespace zaya

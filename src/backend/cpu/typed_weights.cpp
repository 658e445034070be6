#include "backend/cpu/typed_weights.h"

#include <vector>

#include "backend/cpu/bf16_ops.h"
#include "backend/cpu/lm_head_loss.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/model_ops.h"
#include "core/tensor.h"

namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN
ZAYA_CPU_TARGET_BEGIN

namespace {

// The fp32 values of n weights: w itself, or its bf16 values widened into `scratch`.
const float* fp32_of(WeightRef w, size_t n, std::vector<float>& scratch) {
  if (!w.is_bf16()) return w.f32();
  scratch.resize(n);
  widen_bf16(scratch.data(), w.bf16_values(), n);
  return scratch.data();
}

// A weight gradient of n elements as an fp32 op adds into it: dw itself (nullptr when empty),
// or zeros in `scratch` that add_rounded then adds into the bf16 values.
float* fp32_target(GradRef dw, size_t n, std::vector<float>& scratch) {
  if (!dw.is_bf16()) return dw.f32();
  scratch.assign(n, 0.0f);
  return scratch.data();
}

void add_rounded(GradRef dw, const std::vector<float>& sum) {
  if (!dw.is_bf16()) return;
  uint16_t* g = dw.bf16_values();
  for (size_t i = 0; i < sum.size(); ++i) g[i] = f32_to_bf16(bf16_to_f32(g[i]) + sum[i]);
}

}  // namespace

void matmul_forward(float* out, const float* in, WeightRef w, const float* bias, int n, int k,
                    int m) {
  std::vector<float> scratch;
  cpu::matmul_forward(out, in, fp32_of(w, size_t(k) * size_t(m), scratch), bias, n, k, m);
}

void matmul_backward(float* din, GradRef dw, float* dbias, const float* dout, const float* in,
                     WeightRef w, int n, int k, int m) {
  const size_t size = size_t(k) * size_t(m);
  std::vector<float> weights, grads;
  cpu::matmul_backward(din, fp32_target(dw, size, grads), dbias, dout, in,
                       fp32_of(w, size, weights), n, k, m);
  add_rounded(dw, grads);
}

void grouped_matmul_forward(float* out, const float* in, const WeightRef* weights,
                            const int* offsets, int groups, int k, int m) {
  const size_t each = size_t(k) * size_t(m);
  std::vector<std::vector<float>> scratch(static_cast<size_t>(groups));
  std::vector<const float*> read(static_cast<size_t>(groups));
  for (size_t g = 0; g < read.size(); ++g) read[g] = fp32_of(weights[g], each, scratch[g]);
  cpu::grouped_matmul_forward(out, in, read.data(), offsets, groups, k, m);
}

void grouped_matmul_backward(float* din, const GradRef* dweights, const float* dout,
                             const float* in, const WeightRef* weights, const int* offsets,
                             int groups, int k, int m) {
  const size_t each = size_t(k) * size_t(m), count = static_cast<size_t>(groups);
  std::vector<std::vector<float>> weight_scratch(count), grad_scratch(count);
  std::vector<const float*> read(count);
  std::vector<float*> write(count);
  for (size_t g = 0; g < count; ++g) {
    read[g] = fp32_of(weights[g], each, weight_scratch[g]);
    if (dweights != nullptr) write[g] = fp32_target(dweights[g], each, grad_scratch[g]);
  }
  cpu::grouped_matmul_backward(din, dweights ? write.data() : nullptr, dout, in, read.data(),
                               offsets, groups, k, m);
  if (dweights != nullptr)
    for (size_t g = 0; g < count; ++g) add_rounded(dweights[g], grad_scratch[g]);
}

double lm_head_loss_forward(float* lse, const float* y, WeightRef w, const int32_t* targets, int n,
                            int e, int v, const LmHeadChunks& chunks, float* scratch,
                            int64_t* count) {
  std::vector<float> weights;
  return cpu::lm_head_loss_forward(lse, y, fp32_of(w, size_t(v) * size_t(e), weights), targets, n,
                                   e, v, chunks, scratch, count);
}

void lm_head_loss_backward(float* dy, GradRef dw, const float* y, WeightRef w, const float* lse,
                           const int32_t* targets, int n, int e, int v, float loss_scale,
                           const LmHeadChunks& chunks, float* scratch) {
  const size_t size = size_t(v) * size_t(e);
  std::vector<float> weights, grads;
  cpu::lm_head_loss_backward(dy, fp32_target(dw, size, grads), y, fp32_of(w, size, weights), lse,
                             targets, n, e, v, loss_scale, chunks, scratch);
  add_rounded(dw, grads);
}

void embedding_forward(float* out, WeightRef table, const int32_t* tokens, int n, int e) {
  if (!table.is_bf16()) {
    cpu::embedding_forward(out, table.f32(), tokens, n, e);
    return;
  }
  // The gather of the bf16 rows, widened (the model checks every token against the vocabulary).
  for (int t = 0; t < n; ++t)
    widen_bf16(out + size_t(t) * size_t(e), table.bf16_values() + size_t(tokens[t]) * size_t(e),
               size_t(e));
}

ZAYA_CPU_TARGET_END
ZAYA_CPU_PATH_END
}  // namespace zaya::cpu

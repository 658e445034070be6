// cpu-as-device (backend/device_select.h): the CPU ops on memory the model treats as a device's,
// so that every copy and every resident buffer of --device cuda runs on any machine.
//
// With bf16 weights it also stands in for the bf16 CUDA backend's weights: the products (dense,
// grouped, the LM head) and the embedding's gather read each weight rounded to bf16, either
// rounded once per forward from the fp32 weights (set_product_weights) or stored as bf16 alone
// (set_stored_bf16_weights, the model's bf16 weight storage); and the products' backward adds
// into bf16 gradients (set_stored_bf16_gradients), computing in fp32 and rounding once. The
// activations stay fp32 (the CUDA backend rounds them too): this is the GPU's memory layout and
// weight rounding on the CPU, for checking the storage's bookkeeping bitwise, not the GPU's
// numbers. The rounded weights are widened into a scratch buffer for each op, so one instance
// serves one model at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace zaya {

class CpuAsDeviceBackend final : public CpuBackend {
 public:
  explicit CpuAsDeviceBackend(bool bf16_weights = false) : bf16_(bf16_weights) {}
  const char* name() const override { return "cpu-as-device"; }
  bool host_memory() const override { return false; }
  bool bf16_weights() const override { return bf16_; }
  void set_product_weights(const float* base, size_t n) const override;
  void set_stored_bf16_weights(const float* base, size_t n, const uint16_t* bf16) const override;
  void set_stored_bf16_gradients(const float* base, size_t n, uint16_t* bf16) const override;

  void matmul_forward(float* out, const float* in, const float* w, const float* bias, int n, int k,
                      int m) const override;
  void matmul_backward(float* din, float* dw, float* dbias, const float* dout, const float* in,
                       const float* w, int n, int k, int m) const override;
  void grouped_matmul_forward(float* out, const float* in, const float* const* weights,
                              const int* offsets, int groups, int k, int m) const override;
  void grouped_matmul_backward(float* din, float* const* dweights, const float* dout,
                               const float* in, const float* const* weights, const int* offsets,
                               int groups, int k, int m) const override;
  double lm_head_loss_forward(float* lse, const float* y, const float* w, const int32_t* targets,
                              int n, int e, int v, const LmHeadChunks& chunks, float* scratch,
                              int64_t* count) const override;
  void lm_head_loss_backward(float* dy, float* dw, const float* y, const float* w, const float* lse,
                             const int32_t* targets, int n, int e, int v, float loss_scale,
                             const LmHeadChunks& chunks, float* scratch) const override;
  void embedding_forward(float* out, const float* table, const int32_t* tokens, int n,
                         int e) const override;

 private:
  // The weights [w, w + n) as the op reads them: w itself, or (inside the bf16 weights) their
  // bf16 values widened into the scratch at `at` floats.
  const float* weight(const float* w, size_t n, size_t at = 0) const;
  // Where a product's backward writes the weight gradient [dw, dw + n): dw itself, or (inside the
  // bf16 gradients) zeros in the gradient scratch at `at`, which add_stored_grads then adds into
  // the bf16 values.
  float* grad(float* dw, size_t n, size_t at = 0) const;
  void add_stored_grads(float* dw, size_t n, size_t at = 0) const;
  // weight() of each group's [each] weights, side by side in the scratch.
  std::vector<const float*> group_weights(const float* const* weights, int groups,
                                          size_t each) const;

  bool bf16_;
  mutable const float* base_ = nullptr;  // the weights' addresses [base_, base_ + n_)
  mutable size_t n_ = 0;
  mutable const uint16_t* stored_ = nullptr;  // their bf16 values
  mutable std::vector<uint16_t> rounded_;     // set_product_weights's copy
  mutable std::vector<float> scratch_;
  mutable const float* grads_base_ = nullptr;  // the gradients' addresses
  mutable size_t grads_n_ = 0;
  mutable uint16_t* grads_ = nullptr;  // their bf16 values
  mutable std::vector<float> grad_scratch_;
};

}  // namespace zaya

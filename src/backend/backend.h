// The seam under the model (shared/docs/design.md §GPU): every computation of a training step is
// an op of a Backend, so the model's orchestration (model/zaya_model, cca, moe) is written once
// and runs on any backend. The conventions are the CPU op set's (backend/cpu/*.h), which is the
// oracle every backend is held to: row-major plain buffers in the backend's memory; `*_forward`
// overwrites its outputs; `*_backward` ADDS into the gradients it is given and skips nullptr ones.
//
// Where the host must read a value the ops computed (the experts' row offsets, the loss), the
// op says so or the model calls to_host: each such read is an explicit copy, visible at its call
// site. CpuBackend (backend/cpu/cpu_backend.h) is the one implementation so far; the CUDA one
// needs device memory under the step's arena and the parameters first (docs/gpu.md).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/lm_head_loss.h"

namespace zaya {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // Memory. to_device/to_host cross between host memory and the backend's.
  virtual void copy(void* dst, const void* src, size_t bytes) const = 0;
  virtual void fill_zero(void* dst, size_t bytes) const = 0;
  virtual void to_device(void* dst, const void* src, size_t bytes) const = 0;
  virtual void to_host(void* dst, const void* src, size_t bytes) const = 0;
  // dst[r·dst_stride + j] = src[r·src_stride + j] for j < width (a column slice of each row).
  virtual void copy_rows(float* dst, size_t dst_stride, const float* src, size_t src_stride,
                         int rows, int width) const = 0;
  virtual void fill(float* dst, size_t n, float value) const = 0;
  virtual void add_into(float* dst, const float* src, size_t n) const = 0;  // dst += src

  // Dense ops (backend/cpu/*.h say what each computes).
  virtual void matmul_forward(float* out, const float* in, const float* w, const float* bias, int n,
                              int k, int m) const = 0;
  virtual void matmul_backward(float* din, float* dw, float* dbias, const float* dout,
                               const float* in, const float* w, int n, int k, int m) const = 0;
  // offsets are HOST memory (the experts' row ranges; see sort_by_route).
  virtual void grouped_matmul_forward(float* out, const float* in, const float* const* weights,
                                      const int* offsets, int groups, int k, int m) const = 0;
  virtual void grouped_matmul_backward(float* din, float* const* dweights, const float* dout,
                                       const float* in, const float* const* weights,
                                       const int* offsets, int groups, int k, int m) const = 0;
  virtual void rmsnorm_forward(float* out, float* rstd, const float* in, const float* w, int n,
                               int c, float eps) const = 0;
  virtual void rmsnorm_backward(float* din, float* dw, const float* dout, const float* in,
                                const float* w, const float* rstd, int n, int c) const = 0;
  virtual void l2norm_forward(float* out, float* inv_norm, const float* in, const float* temp,
                              int n, int heads, int d) const = 0;
  virtual void l2norm_backward(float* din, float* dtemp, const float* dout, const float* in,
                               const float* temp, const float* inv_norm, int n, int heads,
                               int d) const = 0;
  virtual void residual_merge_forward(float* out, const float* h, const float* hb, const float* hs,
                                      const float* r, const float* rb, const float* rs, int n,
                                      int c) const = 0;
  virtual void residual_merge_backward(float* dh, float* dhb, float* dhs, float* dr, float* drb,
                                       float* drs, const float* dout, const float* h,
                                       const float* hb, const float* hs, const float* r,
                                       const float* rb, const float* rs, int n, int c) const = 0;
  virtual void gelu_forward(float* out, const float* in, long n) const = 0;
  virtual void gelu_backward(float* din, const float* dout, const float* in, long n) const = 0;
  virtual void swiglu_forward(float* out, const float* in, int n, int f) const = 0;
  virtual void swiglu_backward(float* din, const float* dout, const float* in, int n,
                               int f) const = 0;
  virtual void softmax_forward(float* out, const float* in, int n, int c) const = 0;
  virtual void softmax_backward(float* din, const float* dout, const float* out, int n,
                                int c) const = 0;
  virtual void rope_apply(float* x, const float* cos_t, const float* sin_t, int batch, int seq,
                          int heads, int d, int rot, bool inverse) const = 0;
  virtual void depthwise_conv_forward(float* a, const float* u, const float* w, const float* bias,
                                      int batch, int seq, int channels) const = 0;
  virtual void depthwise_conv_backward(float* du, float* dw, float* dbias, const float* da,
                                       const float* u, const float* w, int batch, int seq,
                                       int channels) const = 0;
  virtual void grouped_conv_forward(float* z, const float* a, const float* w, const float* bias,
                                    int batch, int seq, int channels, int group_size) const = 0;
  virtual void grouped_conv_backward(float* da, float* dw, float* dbias, const float* dz,
                                     const float* a, const float* w, int batch, int seq,
                                     int channels, int group_size) const = 0;
  virtual void attention_forward(float* out, float* lse, const float* q, const float* k,
                                 const float* v, int batch, int seq, int nq, int nk, int d,
                                 float scale) const = 0;
  virtual void attention_backward(float* dq, float* dk, float* dv, const float* dout,
                                  const float* out, const float* lse, const float* q,
                                  const float* k, const float* v, int batch, int seq, int nq,
                                  int nk, int d, float scale) const = 0;
  // The losses return host values (the sum of the rows' losses, and *count).
  virtual double cross_entropy_forward(float* lse, const float* logits, const int32_t* targets,
                                       int n, int vocab, int64_t* count) const = 0;
  virtual void cross_entropy_backward_inplace(float* logits, const float* lse,
                                              const int32_t* targets, int n, int vocab,
                                              float loss_scale) const = 0;
  virtual double lm_head_loss_forward(float* lse, const float* y, const float* w,
                                      const int32_t* targets, int n, int e, int v,
                                      const cpu::LmHeadChunks& chunks, float* scratch,
                                      int64_t* count) const = 0;
  virtual void lm_head_loss_backward(float* dy, float* dw, const float* y, const float* w,
                                     const float* lse, const int32_t* targets, int n, int e, int v,
                                     float loss_scale, const cpu::LmHeadChunks& chunks,
                                     float* scratch) const = 0;

  // The model's own steps (backend/cpu/model_ops.h says what each computes).
  virtual void embedding_forward(float* out, const float* table, const int32_t* tokens, int n,
                                 int e) const = 0;
  virtual void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int n,
                                  int e) const = 0;
  virtual void cca_mix_forward(float* qk1, float* v, const float* proj, int n, int seq, int nq,
                               int nk, int d) const = 0;
  virtual void cca_mix_backward(float* dproj, const float* dqk1, const float* du, const float* dv,
                                int n, int seq, int nq, int nk, int d) const = 0;
  virtual void eda_forward(float* state, const float* scale, const float* state_in, int n,
                           int r) const = 0;
  virtual void eda_backward(float* dscale, float* dstate_in, const float* dstate,
                            const float* state_in, const float* scale, int n, int r) const = 0;
  virtual void top1_routes(int32_t* route, const float* probs, const float* biases, int n,
                           int routes) const = 0;
  virtual void sort_by_route(int32_t* order, int32_t* offsets, const int32_t* route, int n,
                             int routes) const = 0;
  virtual void gather_rows(float* out, const float* in, const int32_t* order, int rows,
                           int width) const = 0;
  virtual void scatter_add_rows(float* out, const float* in, const int32_t* order, int rows,
                                int width) const = 0;
  virtual void moe_combine_forward(float* out, const float* y, const float* x, const float* probs,
                                   const int32_t* route, const int32_t* order, int n, int n_exp,
                                   int e, int routes) const = 0;
  virtual void moe_combine_backward(float* dprobs, float* dy, float* dx, const float* dout,
                                    const float* y, const float* x, const float* probs,
                                    const int32_t* route, const int32_t* order, int n, int n_exp,
                                    int e, int routes) const = 0;
};

}  // namespace zaya

// The CPU backend: the Backend (backend/backend.h) over the op set of backend/cpu, in host
// memory. Every op forwards to its cpu:: function unchanged, so a model run through it computes
// bit for bit what the op set computes.
#pragma once

#include "backend/backend.h"

namespace zaya {

class CpuBackend final : public Backend {
 public:
  const char* name() const override;
  void copy(void* dst, const void* src, size_t bytes) const override;
  void fill_zero(void* dst, size_t bytes) const override;
  void to_device(void* dst, const void* src, size_t bytes) const override;
  void to_host(void* dst, const void* src, size_t bytes) const override;
  void copy_rows(float* dst, size_t dst_stride, const float* src, size_t src_stride, int rows,
                 int width) const override;
  void fill(float* dst, size_t n, float value) const override;
  void add_into(float* dst, const float* src, size_t n) const override;
  void matmul_forward(float* out, const float* in, const float* w, const float* bias, int n, int k,
                      int m) const override;
  void matmul_backward(float* din, float* dw, float* dbias, const float* dout, const float* in,
                       const float* w, int n, int k, int m) const override;
  void grouped_matmul_forward(float* out, const float* in, const float* const* weights,
                              const int* offsets, int groups, int k, int m) const override;
  void grouped_matmul_backward(float* din, float* const* dweights, const float* dout,
                               const float* in, const float* const* weights, const int* offsets,
                               int groups, int k, int m) const override;
  void rmsnorm_forward(float* out, float* rstd, const float* in, const float* w, int n, int c,
                       float eps) const override;
  void rmsnorm_backward(float* din, float* dw, const float* dout, const float* in, const float* w,
                        const float* rstd, int n, int c) const override;
  void l2norm_forward(float* out, float* inv_norm, const float* in, const float* temp, int n,
                      int heads, int d) const override;
  void l2norm_backward(float* din, float* dtemp, const float* dout, const float* in,
                       const float* temp, const float* inv_norm, int n, int heads,
                       int d) const override;
  void residual_merge_forward(float* out, const float* h, const float* hb, const float* hs,
                              const float* r, const float* rb, const float* rs, int n,
                              int c) const override;
  void residual_merge_backward(float* dh, float* dhb, float* dhs, float* dr, float* drb, float* drs,
                               const float* dout, const float* h, const float* hb, const float* hs,
                               const float* r, const float* rb, const float* rs, int n,
                               int c) const override;
  void gelu_forward(float* out, const float* in, long n) const override;
  void gelu_backward(float* din, const float* dout, const float* in, long n) const override;
  void swiglu_forward(float* out, const float* in, int n, int f) const override;
  void swiglu_backward(float* din, const float* dout, const float* in, int n, int f) const override;
  void softmax_forward(float* out, const float* in, int n, int c) const override;
  void softmax_backward(float* din, const float* dout, const float* out, int n,
                        int c) const override;
  void rope_apply(float* x, const float* cos_t, const float* sin_t, int batch, int seq, int heads,
                  int d, int rot, bool inverse) const override;
  void depthwise_conv_forward(float* a, const float* u, const float* w, const float* bias,
                              int batch, int seq, int channels) const override;
  void depthwise_conv_backward(float* du, float* dw, float* dbias, const float* da, const float* u,
                               const float* w, int batch, int seq, int channels) const override;
  void grouped_conv_forward(float* z, const float* a, const float* w, const float* bias, int batch,
                            int seq, int channels, int group_size) const override;
  void grouped_conv_backward(float* da, float* dw, float* dbias, const float* dz, const float* a,
                             const float* w, int batch, int seq, int channels,
                             int group_size) const override;
  void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                         int batch, int seq, int nq, int nk, int d, float scale) const override;
  void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* out,
                          const float* lse, const float* q, const float* k, const float* v,
                          int batch, int seq, int nq, int nk, int d, float scale) const override;
  double cross_entropy_forward(float* lse, const float* logits, const int32_t* targets, int n,
                               int vocab, int64_t* count) const override;
  void cross_entropy_backward_inplace(float* logits, const float* lse, const int32_t* targets,
                                      int n, int vocab, float loss_scale) const override;
  double lm_head_loss_forward(float* lse, const float* y, const float* w, const int32_t* targets,
                              int n, int e, int v, const cpu::LmHeadChunks& chunks, float* scratch,
                              int64_t* count) const override;
  void lm_head_loss_backward(float* dy, float* dw, const float* y, const float* w, const float* lse,
                             const int32_t* targets, int n, int e, int v, float loss_scale,
                             const cpu::LmHeadChunks& chunks, float* scratch) const override;
  void embedding_forward(float* out, const float* table, const int32_t* tokens, int n,
                         int e) const override;
  void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int n,
                          int e) const override;
  void cca_mix_forward(float* qk1, float* v, const float* proj, int n, int seq, int nq, int nk,
                       int d) const override;
  void cca_mix_backward(float* dproj, const float* dqk1, const float* du, const float* dv, int n,
                        int seq, int nq, int nk, int d) const override;
  void eda_forward(float* state, const float* scale, const float* state_in, int n,
                   int r) const override;
  void eda_backward(float* dscale, float* dstate_in, const float* dstate, const float* state_in,
                    const float* scale, int n, int r) const override;
  void top1_routes(int32_t* route, const float* probs, const float* biases, int n,
                   int routes) const override;
  void sort_by_route(int32_t* order, int32_t* offsets, const int32_t* route, int n,
                     int routes) const override;
  void gather_rows(float* out, const float* in, const int32_t* order, int rows,
                   int width) const override;
  void scatter_add_rows(float* out, const float* in, const int32_t* order, int rows,
                        int width) const override;
  void moe_combine_forward(float* out, const float* y, const float* x, const float* probs,
                           const int32_t* route, const int32_t* order, int n, int n_exp, int e,
                           int routes) const override;
  void moe_combine_backward(float* dprobs, float* dy, float* dx, const float* dout, const float* y,
                            const float* x, const float* probs, const int32_t* route,
                            const int32_t* order, int n, int n_exp, int e,
                            int routes) const override;
};

// The process's CPU backend (stateless; shared by every model).
const Backend& cpu_backend();

}  // namespace zaya

#include "backend/cpu/cpu_backend.h"

#include <cstring>

#include "backend/cpu/activation.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/conv.h"
#include "backend/cpu/loss.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/model_ops.h"
#include "backend/cpu/norm.h"
#include "backend/cpu/residual.h"
#include "backend/cpu/rope.h"

namespace zaya {

const Backend& cpu_backend() {
  static const CpuBackend backend;
  return backend;
}

const char* CpuBackend::name() const {
  return "cpu";
}

void CpuBackend::copy(void* dst, const void* src, size_t bytes) const {
  if (bytes) std::memmove(dst, src, bytes);
}

void CpuBackend::fill_zero(void* dst, size_t bytes) const {
  if (bytes) std::memset(dst, 0, bytes);
}

void CpuBackend::to_device(void* dst, const void* src, size_t bytes) const {
  copy(dst, src, bytes);
}

void CpuBackend::to_host(void* dst, const void* src, size_t bytes) const {
  copy(dst, src, bytes);
}

void CpuBackend::copy_rows(float* dst, size_t dst_stride, const float* src, size_t src_stride,
                           int rows, int width) const {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r)
    std::memcpy(dst + size_t(r) * dst_stride, src + size_t(r) * src_stride, sizeof(float) * width);
}

void CpuBackend::fill(float* dst, size_t n, float value) const {
  for (size_t i = 0; i < n; ++i) dst[i] = value;
}

void CpuBackend::add_into(float* dst, const float* src, size_t n) const {
  for (size_t i = 0; i < n; ++i) dst[i] += src[i];
}

void CpuBackend::matmul_forward(float* out, const float* in, const float* w, const float* bias,
                                int n, int k, int m) const {
  cpu::matmul_forward(out, in, w, bias, n, k, m);
}

void CpuBackend::matmul_backward(float* din, float* dw, float* dbias, const float* dout,
                                 const float* in, const float* w, int n, int k, int m) const {
  cpu::matmul_backward(din, dw, dbias, dout, in, w, n, k, m);
}

void CpuBackend::grouped_matmul_forward(float* out, const float* in, const float* const* weights,
                                        const int* offsets, int groups, int k, int m) const {
  cpu::grouped_matmul_forward(out, in, weights, offsets, groups, k, m);
}

void CpuBackend::grouped_matmul_backward(float* din, float* const* dweights, const float* dout,
                                         const float* in, const float* const* weights,
                                         const int* offsets, int groups, int k, int m) const {
  cpu::grouped_matmul_backward(din, dweights, dout, in, weights, offsets, groups, k, m);
}

void CpuBackend::rmsnorm_forward(float* out, float* rstd, const float* in, const float* w, int n,
                                 int c, float eps) const {
  cpu::rmsnorm_forward(out, rstd, in, w, n, c, eps);
}

void CpuBackend::rmsnorm_backward(float* din, float* dw, const float* dout, const float* in,
                                  const float* w, const float* rstd, int n, int c) const {
  cpu::rmsnorm_backward(din, dw, dout, in, w, rstd, n, c);
}

void CpuBackend::l2norm_forward(float* out, float* inv_norm, const float* in, const float* temp,
                                int n, int heads, int d) const {
  cpu::l2norm_forward(out, inv_norm, in, temp, n, heads, d);
}

void CpuBackend::l2norm_backward(float* din, float* dtemp, const float* dout, const float* in,
                                 const float* temp, const float* inv_norm, int n, int heads,
                                 int d) const {
  cpu::l2norm_backward(din, dtemp, dout, in, temp, inv_norm, n, heads, d);
}

void CpuBackend::residual_merge_forward(float* out, const float* h, const float* hb,
                                        const float* hs, const float* r, const float* rb,
                                        const float* rs, int n, int c) const {
  cpu::residual_merge_forward(out, h, hb, hs, r, rb, rs, n, c);
}

void CpuBackend::residual_merge_backward(float* dh, float* dhb, float* dhs, float* dr, float* drb,
                                         float* drs, const float* dout, const float* h,
                                         const float* hb, const float* hs, const float* r,
                                         const float* rb, const float* rs, int n, int c) const {
  cpu::residual_merge_backward(dh, dhb, dhs, dr, drb, drs, dout, h, hb, hs, r, rb, rs, n, c);
}

void CpuBackend::gelu_forward(float* out, const float* in, long n) const {
  cpu::gelu_forward(out, in, n);
}

void CpuBackend::gelu_backward(float* din, const float* dout, const float* in, long n) const {
  cpu::gelu_backward(din, dout, in, n);
}

void CpuBackend::swiglu_forward(float* out, const float* in, int n, int f) const {
  cpu::swiglu_forward(out, in, n, f);
}

void CpuBackend::swiglu_backward(float* din, const float* dout, const float* in, int n,
                                 int f) const {
  cpu::swiglu_backward(din, dout, in, n, f);
}

void CpuBackend::softmax_forward(float* out, const float* in, int n, int c) const {
  cpu::softmax_forward(out, in, n, c);
}

void CpuBackend::softmax_backward(float* din, const float* dout, const float* out, int n,
                                  int c) const {
  cpu::softmax_backward(din, dout, out, n, c);
}

void CpuBackend::rope_apply(float* x, const float* cos_t, const float* sin_t, int batch, int seq,
                            int heads, int d, int rot, bool inverse) const {
  cpu::rope_apply(x, cos_t, sin_t, batch, seq, heads, d, rot, inverse);
}

void CpuBackend::depthwise_conv_forward(float* a, const float* u, const float* w, const float* bias,
                                        int batch, int seq, int channels) const {
  cpu::depthwise_conv_forward(a, u, w, bias, batch, seq, channels);
}

void CpuBackend::depthwise_conv_backward(float* du, float* dw, float* dbias, const float* da,
                                         const float* u, const float* w, int batch, int seq,
                                         int channels) const {
  cpu::depthwise_conv_backward(du, dw, dbias, da, u, w, batch, seq, channels);
}

void CpuBackend::grouped_conv_forward(float* z, const float* a, const float* w, const float* bias,
                                      int batch, int seq, int channels, int group_size) const {
  cpu::grouped_conv_forward(z, a, w, bias, batch, seq, channels, group_size);
}

void CpuBackend::grouped_conv_backward(float* da, float* dw, float* dbias, const float* dz,
                                       const float* a, const float* w, int batch, int seq,
                                       int channels, int group_size) const {
  cpu::grouped_conv_backward(da, dw, dbias, dz, a, w, batch, seq, channels, group_size);
}

void CpuBackend::attention_forward(float* out, float* lse, const float* q, const float* k,
                                   const float* v, int batch, int seq, int nq, int nk, int d,
                                   float scale) const {
  cpu::attention_forward(out, lse, q, k, v, batch, seq, nq, nk, d, scale);
}

void CpuBackend::attention_backward(float* dq, float* dk, float* dv, const float* dout,
                                    const float* out, const float* lse, const float* q,
                                    const float* k, const float* v, int batch, int seq, int nq,
                                    int nk, int d, float scale) const {
  cpu::attention_backward(dq, dk, dv, dout, out, lse, q, k, v, batch, seq, nq, nk, d, scale);
}

double CpuBackend::cross_entropy_forward(float* lse, const float* logits, const int32_t* targets,
                                         int n, int vocab, int64_t* count) const {
  return cpu::cross_entropy_forward(lse, logits, targets, n, vocab, count);
}

void CpuBackend::cross_entropy_backward_inplace(float* logits, const float* lse,
                                                const int32_t* targets, int n, int vocab,
                                                float loss_scale) const {
  cpu::cross_entropy_backward_inplace(logits, lse, targets, n, vocab, loss_scale);
}

double CpuBackend::lm_head_loss_forward(float* lse, const float* y, const float* w,
                                        const int32_t* targets, int n, int e, int v,
                                        const cpu::LmHeadChunks& chunks, float* scratch,
                                        int64_t* count) const {
  return cpu::lm_head_loss_forward(lse, y, w, targets, n, e, v, chunks, scratch, count);
}

void CpuBackend::lm_head_loss_backward(float* dy, float* dw, const float* y, const float* w,
                                       const float* lse, const int32_t* targets, int n, int e,
                                       int v, float loss_scale, const cpu::LmHeadChunks& chunks,
                                       float* scratch) const {
  cpu::lm_head_loss_backward(dy, dw, y, w, lse, targets, n, e, v, loss_scale, chunks, scratch);
}

void CpuBackend::embedding_forward(float* out, const float* table, const int32_t* tokens, int n,
                                   int e) const {
  cpu::embedding_forward(out, table, tokens, n, e);
}

void CpuBackend::embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int n,
                                    int e) const {
  cpu::embedding_backward(dtable, dout, tokens, n, e);
}

void CpuBackend::cca_mix_forward(float* qk1, float* v, const float* proj, int n, int seq, int nq,
                                 int nk, int d) const {
  cpu::cca_mix_forward(qk1, v, proj, n, seq, nq, nk, d);
}

void CpuBackend::cca_mix_backward(float* dproj, const float* dqk1, const float* du, const float* dv,
                                  int n, int seq, int nq, int nk, int d) const {
  cpu::cca_mix_backward(dproj, dqk1, du, dv, n, seq, nq, nk, d);
}

void CpuBackend::eda_forward(float* state, const float* scale, const float* state_in, int n,
                             int r) const {
  cpu::eda_forward(state, scale, state_in, n, r);
}

void CpuBackend::eda_backward(float* dscale, float* dstate_in, const float* dstate,
                              const float* state_in, const float* scale, int n, int r) const {
  cpu::eda_backward(dscale, dstate_in, dstate, state_in, scale, n, r);
}

void CpuBackend::top1_routes(int32_t* route, const float* probs, const float* biases, int n,
                             int routes) const {
  cpu::top1_routes(route, probs, biases, n, routes);
}

void CpuBackend::sort_by_route(int32_t* order, int32_t* offsets, const int32_t* route, int n,
                               int routes) const {
  cpu::sort_by_route(order, offsets, route, n, routes);
}

void CpuBackend::gather_rows(float* out, const float* in, const int32_t* order, int rows,
                             int width) const {
  cpu::gather_rows(out, in, order, rows, width);
}

void CpuBackend::scatter_add_rows(float* out, const float* in, const int32_t* order, int rows,
                                  int width) const {
  cpu::scatter_add_rows(out, in, order, rows, width);
}

void CpuBackend::moe_combine_forward(float* out, const float* y, const float* x, const float* probs,
                                     const int32_t* route, const int32_t* order, int n, int n_exp,
                                     int e, int routes) const {
  cpu::moe_combine_forward(out, y, x, probs, route, order, n, n_exp, e, routes);
}

void CpuBackend::moe_combine_backward(float* dprobs, float* dy, float* dx, const float* dout,
                                      const float* y, const float* x, const float* probs,
                                      const int32_t* route, const int32_t* order, int n, int n_exp,
                                      int e, int routes) const {
  cpu::moe_combine_backward(dprobs, dy, dx, dout, y, x, probs, route, order, n, n_exp, e, routes);
}

}  // namespace zaya

// The GPU ops, with the CPU backend's conventions (backend/cpu/*.h): pointers are device memory,
// row-major; `*_forward` overwrites its outputs; `*_backward` ADDS into the gradient buffers it is
// given and skips any that are nullptr. Each op computes what its cpu:: namesake computes, in
// fp32 with the same fp64 accumulations, and is held to it by tests/gpu (every reduction runs in
// a fixed order, so a GPU run is bitwise reproducible). Launches go to the default stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/op_types.h"
#include "backend/optim_types.h"

namespace zaya::cuda {

// RMSNorm over the last dimension c (cpu::rmsnorm_*); rstd[n] may be nullptr in the forward.
void rmsnorm_forward(float* out, float* rstd, const float* in, const float* w, int n, int c,
                     float eps);
void rmsnorm_backward(float* din, float* dw, const float* dout, const float* in, const float* w,
                      const float* rstd, int n, int c);

// CCA's per-head query/key normalisation with temperature (cpu::l2norm_*).
void l2norm_forward(float* out, float* inv_norm, const float* in, const float* temp, int n,
                    int heads, int d);
void l2norm_backward(float* din, float* dtemp, const float* dout, const float* in,
                     const float* temp, const float* inv_norm, int n, int heads, int d);

// Row softmax over c columns (cpu::softmax_*).
void softmax_forward(float* out, const float* in, int n, int c);
void softmax_backward(float* din, const float* dout, const float* out, int n, int c);

// SwiGLU on in[n, 2f], the gate first (cpu::swiglu_*).
void swiglu_forward(float* out, const float* in, int n, int f);
void swiglu_backward(float* din, const float* dout, const float* in, int n, int f);

// ZAYA1's residual scaling (cpu::residual_merge_*); r == nullptr at stage 0.
void residual_merge_forward(float* out, const float* h, const float* hb, const float* hs,
                            const float* r, const float* rb, const float* rs, int n, int c);
void residual_merge_backward(float* dh, float* dhb, float* dhs, float* dr, float* drb, float* drs,
                             const float* dout, const float* h, const float* hb, const float* hs,
                             const float* r, const float* rb, const float* rs, int n, int c);
// residual_merge_forward then rmsnorm_forward of its output, one block per row reading it once
// (cpu::merge_rmsnorm_forward).
void merge_rmsnorm_forward(float* r_out, float* x_out, float* rstd, const float* h, const float* hb,
                           const float* hs, const float* r, const float* rb, const float* rs,
                           const float* w, int n, int c, float eps);

// Partial rotary embedding in place on x[batch, seq, heads, d] (cpu::rope_apply); the tables
// [seq, rot/2] are device copies of rope_tables' (backend/rope_tables.h).
void rope_apply(float* x, const float* cos_t, const float* sin_t, int batch, int seq, int heads,
                int d, int rot, bool inverse);

// CCA's causal convolutions (cpu::depthwise_conv_*, cpu::grouped_conv_*).
void depthwise_conv_forward(float* a, const float* u, const float* w, const float* bias, int batch,
                            int seq, int channels);
void depthwise_conv_backward(float* du, float* dw, float* dbias, const float* da, const float* u,
                             const float* w, int batch, int seq, int channels);
void grouped_conv_forward(float* z, const float* a, const float* w, const float* bias, int batch,
                          int seq, int channels, int group_size);
void grouped_conv_backward(float* da, float* dw, float* dbias, const float* dz, const float* a,
                           const float* w, int batch, int seq, int channels, int group_size);

// Causal GQA attention, q[batch, seq, nq, d], k/v[batch, seq, nk, d], lse[batch, nq, seq]
// (cpu::attention_forward / attention_backward).
void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       int batch, int seq, int nq, int nk, int d, float scale);
void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* out,
                        const float* lse, const float* q, const float* k, const float* v, int batch,
                        int seq, int nq, int nk, int d, float scale);
// One block of a sharded attention (cpu::attention_block_forward, attention_row_dot,
// attention_block_backward): no kernels yet (ring attention runs on host memory only); each
// fails, naming itself.
void attention_block_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                             const AttentionBlock& blk);
void attention_row_dot(float* D, const float* dout, const float* out, const AttentionBlock& blk);
void attention_block_backward(float* dq, float* dk, float* dv, const float* dout, const float* D,
                              const float* lse, const float* q, const float* k, const float* v,
                              const AttentionBlock& blk);

// Cross-entropy (cpu::cross_entropy_*); targets is device memory. The forward copies the n row
// losses to the host and sums them there in row order.
double cross_entropy_forward(float* lse, const float* logits, const int32_t* targets, int n,
                             int vocab, int64_t* count);
void cross_entropy_backward_inplace(float* logits, const float* lse, const int32_t* targets, int n,
                                    int vocab, float loss_scale);
// The step's loss from the per-row losses on the device (0 at ignored targets): one explicit
// copy of the rows and targets, summed on the host in row order; *count = rows with a target.
// Shared by the two losses above and below.
double sum_row_losses(const double* row_loss, const int32_t* targets, int n, int64_t* count);

// The tied LM head and the loss in blocks of chunk_tokens × chunk_vocab logits
// (cpu::lm_head_loss_*); targets is device memory, scratch holds one block. The forward sums the
// row losses on the host in row order (one explicit copy of n values).
double lm_head_loss_forward(float* lse, const float* y, const float* w, const int32_t* targets,
                            int n, int e, int v, int chunk_tokens, int chunk_vocab, float* scratch,
                            int64_t* count);
void lm_head_loss_backward(float* dy, float* dw, const float* y, const float* w, const float* lse,
                           const int32_t* targets, int n, int e, int v, float loss_scale,
                           int chunk_tokens, int chunk_vocab, float* scratch);

// The same, with the blocks as the CPU op takes them (the Backend's signature).
inline double lm_head_loss_forward(float* lse, const float* y, const float* w,
                                   const int32_t* targets, int n, int e, int v,
                                   const LmHeadChunks& chunks, float* scratch, int64_t* count) {
  return lm_head_loss_forward(lse, y, w, targets, n, e, v, chunks.tokens, chunks.vocab, scratch,
                              count);
}
inline void lm_head_loss_backward(float* dy, float* dw, const float* y, const float* w,
                                  const float* lse, const int32_t* targets, int n, int e, int v,
                                  float loss_scale, const LmHeadChunks& chunks, float* scratch) {
  lm_head_loss_backward(dy, dw, y, w, lse, targets, n, e, v, loss_scale, chunks.tokens,
                        chunks.vocab, scratch);
}

// Mixed precision for the ops called while it lives (the bf16 CUDA backend sets it around each
// op): every matrix product rounds its two inputs to bf16 (weights and activations alike; round
// to nearest even) and accumulates in fp32 into its fp32 output. Everything else stays fp32: the
// residual stream, norms and softmax statistics, the loss, gradients and master weights.
class Bf16Gemms {
 public:
  explicit Bf16Gemms(bool on);
  ~Bf16Gemms();
  Bf16Gemms(const Bf16Gemms&) = delete;
  Bf16Gemms& operator=(const Bf16Gemms&) = delete;

 private:
  bool previous_;
};

// The model's weights [base, base + n) in bf16, rounded once (to nearest even) for the products
// that follow: under Bf16Gemms an operand inside that range is read from this copy instead of
// being rounded again by each product, which gives the same bits for half the conversions (a
// weight is an operand of the forward product and of the backward's input gradient). The caller
// renews it whenever the weights may have changed (ZayaModel: every forward).
void set_bf16_weights(const float* base, size_t n);
// The bf16 weight storage: the weight addresses [base, base + n) stand for the bf16 values at
// bf16[0, n) (device memory, the model's; no copy is made), with no fp32 memory behind them
// (Backend::set_stored_bf16_weights). Replaces set_bf16_weights's copy until its next call.
void set_stored_bf16_weights(const float* base, size_t n, const uint16_t* bf16);
// The model's bf16 gradients (Backend::set_stored_bf16_gradients): a bf16 product whose output
// lies in [base, base + n) adds into bf16[0, n) instead (cuBLASLt with a bf16 C: the sum in fp32,
// one rounding). nullptr/0 ends it.
void set_stored_bf16_gradients(const float* base, size_t n, uint16_t* bf16);
// Under Bf16Gemms, the bf16 value of the weight at address p when p lies inside the weights of
// set_bf16_weights or set_stored_bf16_weights; nullptr otherwise.
const uint16_t* bf16_weights_at(const float* p);
// dst = src rounded to bf16 (nearest even, core/tensor.h's bits); dst = the values of bf16 src.
void round_to_bf16(uint16_t* dst, const float* src, size_t n);
void widen_bf16(float* dst, const uint16_t* src, size_t n);

// out[n, m] = in[n, k] · w[m, k]ᵀ (+ bias[m]) through cuBLASLt in fp32 (no TF32; bf16 inputs
// under Bf16Gemms), and its backward (cpu::matmul_*).
void matmul_forward(float* out, const float* in, const float* w, const float* bias, int n, int k,
                    int m);
void matmul_backward(float* din, float* dw, float* dbias, const float* dout, const float* in,
                     const float* w, int n, int k, int m);

// Row-major C[m, n] = alpha · op(A) · op(B) + beta · C through cuBLASLt in fp32 (cpu::gemm; the
// benchmarks' general product).
void dense_gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                int lda, const float* b, int ldb, float beta, float* c, int ldc);

// GELU, exact (erf), as the router MLP's (cpu::gelu_*).
void gelu_forward(float* out, const float* in, long n);
void gelu_backward(float* din, const float* dout, const float* in, long n);

// The MoE layer's routing (model/moe.cpp). top1_routes: model/moe.h's top1_route per token.
// sort_by_route: order[N] lists the tokens grouped by route, in token order inside a route, and
// offsets[routes + 1] the groups' starts (a stable counting sort: deterministic, dropless).
void top1_routes(int32_t* route, const float* probs, const float* biases, int n, int routes);
void sort_by_route(int32_t* order, int32_t* offsets, const int32_t* route, int n, int routes);
// out[i] = in[order[i]] (rows of `width`); scatter_add_rows: out[order[i]] += in[i].
void gather_rows(float* out, const float* in, const int32_t* order, int rows, int width);
void scatter_add_rows(float* out, const float* in, const int32_t* order, int rows, int width);
// out[t] = probs[t, route[t]] · (expert output y[i] for the first n_exp tokens of `order`, x[t]
// for the skip route); the backward writes dprobs at each token's route, dy = gate·dout for
// expert tokens and adds gate·dout to dx for skipped ones.
void moe_combine_forward(float* out, const float* y, const float* x, const float* probs,
                         const int32_t* route, const int32_t* order, int n, int n_exp, int E,
                         int routes);
void moe_combine_backward(float* dprobs, float* dy, float* dx, const float* dout, const float* y,
                          const float* x, const float* probs, const int32_t* route,
                          const int32_t* order, int n, int n_exp, int E, int routes);
// EDA, the router state carried across MoE stages: state += scale ⊙ state_in ([n, R] rows);
// the backward adds Σ_t dstate ⊙ state_in to dscale and scale ⊙ dstate to dstate_in.
void eda_forward(float* state, const float* scale, const float* state_in, int n, int R);
void eda_backward(float* dscale, float* dstate_in, const float* dstate, const float* state_in,
                  const float* scale, int n, int R);
// One product per expert over its rows [offsets[g], offsets[g+1]) (cpu::grouped_matmul_*);
// offsets is HOST memory (copied from sort_by_route's, an explicit device-to-host copy), weights
// are device pointers. Experts with no token run no product.
void grouped_matmul_forward(float* out, const float* in, const float* const* weights,
                            const int* offsets, int groups, int k, int m);
void grouped_matmul_backward(float* din, float* const* dweights, const float* dout, const float* in,
                             const float* const* weights, const int* offsets, int groups, int k,
                             int m);

// CCA between the convolutions and the normalisation (model/cca.cpp, whole sequences of `seq`
// tokens): qk1[n, (nq+nk)·d] += the q-k-mean skip of proj[n, (nq+2nk)·d]; v[n, nk·d] = the
// current half of the values ‖ the previous token's other half (zero at a sequence's start).
// The backward overwrites dproj from dqk1 (also the convolutions' output gradient), du (their
// input gradient) and dv.
void cca_mix_forward(float* qk1, float* v, const float* proj, int n, int seq, int nq, int nk,
                     int d);
void cca_mix_backward(float* dproj, const float* dqk1, const float* du, const float* dv, int n,
                      int seq, int nq, int nk, int d);

// dst[r·dst_stride + j] = src[r·src_stride + j] for j < width; dst[0 : n] = value; dst += src.
void copy_rows(float* dst, size_t dst_stride, const float* src, size_t src_stride, int rows,
               int width);
void fill(float* dst, size_t n, float value);
void add_into(float* dst, const float* src, size_t n);
// out[t] = table[tokens[t]]; the backward adds dout[t] to dtable[tokens[t]] in token order.
void embedding_forward(float* out, const float* table, const int32_t* tokens, int n, int e);
void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int n, int e);

// Decoding (backend/cpu/rowwise.h, backend/cpu/decode_ops.h): the row-independent product (one
// thread per output element, cpu::fixed_order_dot's order), CCA's convolution step and state
// advance, attention partials over a paged cache (every block of a row but its last full) and
// their normalisation on one rank. A row's result does not depend on the other rows.
void rows_matmul_forward(float* out, const float* in, const float* w, const float* bias, int n,
                         int k, int m);
void cca_decode_conv(float* z, const float* proj, const float* window, const int32_t* slots,
                     const CcaDecodeStep& s);
void cca_decode_advance(float* window, float* v_prev, float* kv, const int64_t* kv_rows,
                        const float* qkn, const float* proj, const int32_t* slots,
                        const CcaDecodeStep& s);
void kv_attention_partials(float* max, float* sum, float* out, float* scores, const float* q,
                           const PagedKv& kv, int n, int nq, int nk, int d);
void kv_attention_normalize(float* att, const float* sum, const float* out, int items, int d);

// The optimizer's ops, as backend/cpu/optim_ops.h defines them. Segment and chunk tables are host
// memory; each call uploads them (a few hundred bytes to kilobytes, once per step).
// sum_of_squares_chunks: one block per chunk, a fixed tree within it, and the chunks' sums added
// on the host in table order (one explicit copy back), so the norm has the same bits every run.
double sum_of_squares_chunks(const float* x, const OptimSegment* chunks, int count);
// The elementwise updates run over every segment in one launch.
void scale_segments(float* x, const OptimSegment* segments, int count, float s);
void adamw_update(float* w, const float* g, float* m, float* v, const OptimSegment* segments,
                  int count, const AdamwConstants& c);
void muon_momentum(float* buf, float* d, const float* g, const OptimSegment* segments, int count,
                   float beta, float one_minus_beta, bool nesterov);
void decay_and_step(float* w, const float* d, const OptimSegment* segments, int count);
// Newton–Schulz on `count` same-shape matrices at once: they are stacked, and each of the
// iteration's three products is one strided-batched cuBLASLt GEMM over the stack (fp32, also on
// the bf16 backend).
void newton_schulz_batch(float* const* matrices, int count, int64_t rows, int64_t cols, int steps);

}  // namespace zaya::cuda

// The GPU ops over sequences and heads against their cpu:: namesakes, fp32, element by element
// (kTolerance): CCA's L2 norm, softmax, RoPE, the two causal convolutions, causal GQA
// attention and the cross-entropy. Sequence lengths include 1, 2 and 3.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/activation.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/conv.h"
#include "backend/cpu/lm_head_loss.h"
#include "backend/cpu/loss.h"
#include "backend/cpu/norm.h"
#include "backend/cpu/rope.h"
#include "backend/cuda/device.h"
#include "backend/cuda/ops.h"
#include "gpu_test_util.h"

namespace zaya {
namespace {

using namespace test;

const int kSeqs[] = {1, 2, 3, 41};

TEST(GpuOps, L2NormWithTemperature) {
  for (const int n : kSeqs)
    for (const int d : {8, 32, 128}) {
      const int heads = 3;
      const Floats x = random_floats(size_t(n) * heads * d, 30),
                   temp = random_floats(heads, 31, 0.5f, 2.0f);
      Floats out(x.size()), inv(size_t(n) * heads);
      cpu::l2norm_forward(out.data(), inv.data(), x.data(), temp.data(), n, heads, d);
      DeviceBuffer<float> dx(x), dtemp_(temp), dout_(x.size()), dinv(inv.size());
      cuda::l2norm_forward(dout_.get(), dinv.get(), dx.get(), dtemp_.get(), n, heads, d);
      EXPECT_TRUE(elementwise_close(dout_.download(), out, kTolerance)) << n << " rows, d " << d;
      EXPECT_TRUE(elementwise_close(dinv.download(), inv, kTolerance)) << n << " rows, d " << d;
      const Floats dy = random_floats(x.size(), 32);
      Floats din = random_floats(x.size(), 33), dt = random_floats(heads, 34);
      DeviceBuffer<float> ddy(dy), ddin(din), ddt(dt);
      cpu::l2norm_backward(din.data(), dt.data(), dy.data(), x.data(), temp.data(), inv.data(), n,
                           heads, d);
      cuda::l2norm_backward(ddin.get(), ddt.get(), ddy.get(), dx.get(), dtemp_.get(), dinv.get(), n,
                            heads, d);
      EXPECT_TRUE(elementwise_close(ddin.download(), din, kTolerance)) << n << " rows, d " << d;
      EXPECT_TRUE(elementwise_close(ddt.download(), dt, kTolerance)) << n << " rows, d " << d;
    }
}

TEST(GpuOps, Softmax) {
  for (const int n : kSeqs)
    for (const int c : {1, 5, 17}) {
      const Floats x = random_floats(size_t(n) * c, 35, -5.0f, 5.0f);
      Floats y(x.size());
      cpu::softmax_forward(y.data(), x.data(), n, c);
      DeviceBuffer<float> dx(x), dy_(x.size());
      cuda::softmax_forward(dy_.get(), dx.get(), n, c);
      EXPECT_TRUE(elementwise_close(dy_.download(), y, kTolerance)) << n << "x" << c;
      const Floats g = random_floats(x.size(), 36);
      Floats din = random_floats(x.size(), 37);
      DeviceBuffer<float> dg(g), ddin(din), dyy(y);
      cpu::softmax_backward(din.data(), g.data(), y.data(), n, c);
      cuda::softmax_backward(ddin.get(), dg.get(), dyy.get(), n, c);
      EXPECT_TRUE(elementwise_close(ddin.download(), din, kTolerance)) << n << "x" << c;
    }
}

TEST(GpuOps, RopeForwardAndInverse) {
  for (const int seq : kSeqs) {
    const int batch = 2, heads = 3, d = 16, rot = 8;
    Floats cos_t(size_t(seq) * rot / 2), sin_t(cos_t.size());
    rope_tables(cos_t.data(), sin_t.data(), seq, rot, 10000.0f);
    DeviceBuffer<float> dcos(cos_t), dsin(sin_t);
    for (const bool inverse : {false, true}) {
      Floats x = random_floats(size_t(batch) * seq * heads * d, 38);
      DeviceBuffer<float> dx(x);
      cpu::rope_apply(x.data(), cos_t.data(), sin_t.data(), batch, seq, heads, d, rot, inverse);
      cuda::rope_apply(dx.get(), dcos.get(), dsin.get(), batch, seq, heads, d, rot, inverse);
      EXPECT_TRUE(elementwise_close(dx.download(), x, kTolerance)) << "seq " << seq;
    }
  }
}

TEST(GpuOps, CausalConvolutions) {
  for (const int seq : kSeqs) {
    const int batch = 2, C = 12, G = 4;
    const Floats u = random_floats(size_t(batch) * seq * C, 39);
    const Floats w0 = random_floats(size_t(C) * 2, 40), b0 = random_floats(C, 41);
    const Floats w1 = random_floats(size_t(C) * G * 2, 42), b1 = random_floats(C, 43);
    Floats a(size_t(batch) * (seq + 1) * C), z(size_t(batch) * seq * C);
    cpu::depthwise_conv_forward(a.data(), u.data(), w0.data(), b0.data(), batch, seq, C);
    cpu::grouped_conv_forward(z.data(), a.data(), w1.data(), b1.data(), batch, seq, C, G);
    DeviceBuffer<float> du_(u), dw0(w0), db0(b0), dw1(w1), db1(b1), da_(a.size()), dz_(z.size());
    cuda::depthwise_conv_forward(da_.get(), du_.get(), dw0.get(), db0.get(), batch, seq, C);
    cuda::grouped_conv_forward(dz_.get(), da_.get(), dw1.get(), db1.get(), batch, seq, C, G);
    EXPECT_TRUE(elementwise_close(da_.download(), a, kTolerance)) << "depthwise, seq " << seq;
    EXPECT_TRUE(elementwise_close(dz_.download(), z, kTolerance)) << "grouped, seq " << seq;

    const Floats gz = random_floats(z.size(), 44);
    Floats ga = random_floats(a.size(), 45), gw1 = random_floats(w1.size(), 46),
           gb1 = random_floats(C, 47), gu = random_floats(u.size(), 48),
           gw0 = random_floats(w0.size(), 49), gb0 = random_floats(C, 50);
    DeviceBuffer<float> dgz(gz), dga(ga), dgw1(gw1), dgb1(gb1), dgu(gu), dgw0(gw0), dgb0(gb0);
    cpu::grouped_conv_backward(ga.data(), gw1.data(), gb1.data(), gz.data(), a.data(), w1.data(),
                               batch, seq, C, G);
    cpu::depthwise_conv_backward(gu.data(), gw0.data(), gb0.data(), ga.data(), u.data(), w0.data(),
                                 batch, seq, C);
    cuda::grouped_conv_backward(dga.get(), dgw1.get(), dgb1.get(), dgz.get(), da_.get(), dw1.get(),
                                batch, seq, C, G);
    cuda::depthwise_conv_backward(dgu.get(), dgw0.get(), dgb0.get(), dga.get(), du_.get(),
                                  dw0.get(), batch, seq, C);
    for (auto [got, want, name] : {std::tuple{&dga, &ga, "da"}, std::tuple{&dgw1, &gw1, "dw1"},
                                   std::tuple{&dgb1, &gb1, "db1"}, std::tuple{&dgu, &gu, "du"},
                                   std::tuple{&dgw0, &gw0, "dw0"}, std::tuple{&dgb0, &gb0, "db0"}})
      EXPECT_TRUE(elementwise_close(got->download(), *want, kTolerance)) << name << ", seq " << seq;
  }
}

TEST(GpuOps, CausalGroupedQueryAttention) {
  for (const int seq : kSeqs)
    for (const int d : {8, 64, 128, 160}) {  // 1, 2, 4 and 8 elements per lane (160: some unused)
      const int batch = 2, nq = 4, nk = 2;
      const float scale = 1.0f / float(d);
      const size_t qn = size_t(batch) * seq * nq * d, kn = size_t(batch) * seq * nk * d;
      const Floats q = random_floats(qn, 51), k = random_floats(kn, 52), v = random_floats(kn, 53);
      Floats out(qn), lse(size_t(batch) * nq * seq);
      cpu::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), batch, seq, nq,
                             nk, d, scale);
      DeviceBuffer<float> dq_(q), dk_(k), dv_(v), dout_(qn), dlse(lse.size());
      cuda::attention_forward(dout_.get(), dlse.get(), dq_.get(), dk_.get(), dv_.get(), batch, seq,
                              nq, nk, d, scale);
      EXPECT_TRUE(elementwise_close(dout_.download(), out, kTolerance))
          << "seq " << seq << " d " << d;
      EXPECT_TRUE(elementwise_close(dlse.download(), lse, kTolerance))
          << "seq " << seq << " d " << d;

      const Floats g = random_floats(qn, 54);
      Floats gq = random_floats(qn, 55), gk = random_floats(kn, 56), gv = random_floats(kn, 57);
      DeviceBuffer<float> dg(g), dgq(gq), dgk(gk), dgv(gv);
      cpu::attention_backward(gq.data(), gk.data(), gv.data(), g.data(), out.data(), lse.data(),
                              q.data(), k.data(), v.data(), batch, seq, nq, nk, d, scale);
      cuda::attention_backward(dgq.get(), dgk.get(), dgv.get(), dg.get(), dout_.get(), dlse.get(),
                               dq_.get(), dk_.get(), dv_.get(), batch, seq, nq, nk, d, scale);
      EXPECT_TRUE(elementwise_close(dgq.download(), gq, kTolerance))
          << "dq, seq " << seq << " d " << d;
      EXPECT_TRUE(elementwise_close(dgk.download(), gk, kTolerance))
          << "dk, seq " << seq << " d " << d;
      EXPECT_TRUE(elementwise_close(dgv.download(), gv, kTolerance))
          << "dv, seq " << seq << " d " << d;
    }
}

TEST(GpuOps, CrossEntropyWithIgnoredTargets) {
  for (const int n : kSeqs)
    for (const int vocab : {2, 97, 4096}) {
      Floats logits = random_floats(size_t(n) * vocab, 58, -4.0f, 4.0f);
      std::vector<int32_t> targets(n);
      for (int r = 0; r < n; ++r) targets[r] = r % 3 == 2 ? cpu::kIgnoreIndex : (r * 37) % vocab;
      DeviceBuffer<float> dlogits(logits), dlse(n);
      DeviceBuffer<int32_t> dtargets(targets);
      Floats lse(n);
      int64_t count = 0, dcount = 0;
      const double loss =
          cpu::cross_entropy_forward(lse.data(), logits.data(), targets.data(), n, vocab, &count);
      const double dloss =
          cuda::cross_entropy_forward(dlse.get(), dlogits.get(), dtargets.get(), n, vocab, &dcount);
      EXPECT_EQ(dcount, count);
      EXPECT_NEAR(dloss, loss, kTolerance.rtol * std::max(1.0, std::fabs(loss)))
          << n << "x" << vocab;
      EXPECT_TRUE(elementwise_close(dlse.download(), lse, kTolerance)) << n << "x" << vocab;
      cpu::cross_entropy_backward_inplace(logits.data(), lse.data(), targets.data(), n, vocab,
                                          0.25f);
      cuda::cross_entropy_backward_inplace(dlogits.get(), dlse.get(), dtargets.get(), n, vocab,
                                           0.25f);
      EXPECT_TRUE(elementwise_close(dlogits.download(), logits, kTolerance)) << n << "x" << vocab;
    }
}

TEST(GpuOps, ChunkedLmHeadLoss) {
  const int e = 24, v = 97;
  const cpu::LmHeadChunks chunks{5, 40};  // 97 = 40 + 40 + 17: a short last vocabulary chunk
  for (const int n : kSeqs) {
    const Floats y = random_floats(size_t(n) * e, 59), w = random_floats(size_t(v) * e, 60);
    std::vector<int32_t> targets(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) targets[size_t(r)] = r % 4 == 3 ? cpu::kIgnoreIndex : (r * 31) % v;
    Floats lse(static_cast<size_t>(n)), scratch(chunks.scratch_floats(n, v));
    int64_t count = 0, dcount = 0;
    const double loss = cpu::lm_head_loss_forward(lse.data(), y.data(), w.data(), targets.data(), n,
                                                  e, v, chunks, scratch.data(), &count);
    DeviceBuffer<float> dy_(y), dw_(w), dlse(lse.size()), dscratch(scratch.size());
    DeviceBuffer<int32_t> dtargets(targets);
    const double dloss =
        cuda::lm_head_loss_forward(dlse.get(), dy_.get(), dw_.get(), dtargets.get(), n, e, v,
                                   chunks.tokens, chunks.vocab, dscratch.get(), &dcount);
    EXPECT_EQ(dcount, count);
    EXPECT_NEAR(dloss, loss, kTolerance.rtol * std::max(1.0, std::fabs(loss))) << n << " rows";
    EXPECT_TRUE(elementwise_close(dlse.download(), lse, kTolerance)) << n << " rows";

    Floats gy = random_floats(y.size(), 61), gw = random_floats(w.size(), 62);
    DeviceBuffer<float> dgy(gy), dgw(gw);
    cpu::lm_head_loss_backward(gy.data(), gw.data(), y.data(), w.data(), lse.data(), targets.data(),
                               n, e, v, 0.5f, chunks, scratch.data());
    cuda::lm_head_loss_backward(dgy.get(), dgw.get(), dy_.get(), dw_.get(), dlse.get(),
                                dtargets.get(), n, e, v, 0.5f, chunks.tokens, chunks.vocab,
                                dscratch.get());
    EXPECT_TRUE(elementwise_close(dgy.download(), gy, kTolerance)) << "dy, " << n << " rows";
    EXPECT_TRUE(elementwise_close(dgw.download(), gw, kTolerance)) << "dw, " << n << " rows";
  }
}

}  // namespace
}  // namespace zaya

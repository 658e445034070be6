// Every GPU op against its cpu:: namesake, the oracle, forward and backward in fp32: every element
// within 1e-5 of itself or 1e-5 of the reference's RMS (gpu_test_util.h's kTolerance). Row counts
// include 1, 2 and 3; the backward ops start from non-zero gradients (they add) and are given
// nullptr for some outputs (they skip). Without a usable GPU the binary prints why and exits 77:
// ctest reports "skipped".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/activation.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/norm.h"
#include "backend/cpu/residual.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device.h"
#include "backend/cuda/ops.h"
#include "gpu_test_util.h"

namespace zaya {
namespace {

using namespace test;

const int kRows[] = {1, 2, 3, 37};

TEST(GpuOps, RmsNorm) {
  for (const int n : kRows)
    for (const int c : {1, 5, 256, 1000}) {
      const Floats x = random_floats(size_t(n) * c, 1), w = random_floats(c, 2, 0.5f, 1.5f);
      Floats out(x.size()), rstd(n);
      cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), n, c, 1e-5f);
      DeviceBuffer<float> dx(x), dw_(w), dout_(x.size()), drstd(n);
      cuda::rmsnorm_forward(dout_.get(), drstd.get(), dx.get(), dw_.get(), n, c, 1e-5f);
      EXPECT_TRUE(elementwise_close(dout_.download(), out, kTolerance)) << n << "x" << c;
      EXPECT_TRUE(elementwise_close(drstd.download(), rstd, kTolerance)) << n << "x" << c;

      const Floats dy = random_floats(x.size(), 3);
      Floats din = random_floats(x.size(), 4), dw = random_floats(c, 5);
      DeviceBuffer<float> ddy(dy), ddin(din), ddw(dw);
      cpu::rmsnorm_backward(din.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), n,
                            c);
      cuda::rmsnorm_backward(ddin.get(), ddw.get(), ddy.get(), dx.get(), dw_.get(), drstd.get(), n,
                             c);
      EXPECT_TRUE(elementwise_close(ddin.download(), din, kTolerance)) << n << "x" << c;
      EXPECT_TRUE(elementwise_close(ddw.download(), dw, kTolerance)) << n << "x" << c;
    }
}

TEST(GpuOps, SwiGlu) {
  for (const int n : kRows)
    for (const int f : {1, 7, 512}) {
      const Floats in = random_floats(size_t(n) * 2 * f, 6, -4.0f, 4.0f);
      Floats out(size_t(n) * f);
      cpu::swiglu_forward(out.data(), in.data(), n, f);
      DeviceBuffer<float> din_(in), dout_(out.size());
      cuda::swiglu_forward(dout_.get(), din_.get(), n, f);
      EXPECT_TRUE(elementwise_close(dout_.download(), out, kTolerance)) << n << "x" << f;

      const Floats dy = random_floats(out.size(), 7);
      Floats grad = random_floats(in.size(), 8);
      DeviceBuffer<float> ddy(dy), dgrad(grad);
      cpu::swiglu_backward(grad.data(), dy.data(), in.data(), n, f);
      cuda::swiglu_backward(dgrad.get(), ddy.get(), din_.get(), n, f);
      EXPECT_TRUE(elementwise_close(dgrad.download(), grad, kTolerance)) << n << "x" << f;
    }
}

TEST(GpuOps, ResidualMerge) {
  for (const int n : kRows)
    for (const int c : {1, 9, 300})
      for (const bool with_r : {false, true}) {
        const size_t nc = size_t(n) * c;
        const Floats h = random_floats(nc, 9), r = random_floats(nc, 10);
        const Floats hb = random_floats(c, 11), hs = random_floats(c, 12, 0.5f, 1.5f);
        const Floats rb = random_floats(c, 13), rs = random_floats(c, 14, 0.5f, 1.5f);
        DeviceBuffer<float> dh_(h), dr_(r), dhb_(hb), dhs_(hs), drb_(rb), drs_(rs), dout_(nc);
        const float* r_cpu = with_r ? r.data() : nullptr;
        const float* r_gpu = with_r ? dr_.get() : nullptr;
        Floats out(nc);
        cpu::residual_merge_forward(out.data(), h.data(), hb.data(), hs.data(), r_cpu, rb.data(),
                                    rs.data(), n, c);
        cuda::residual_merge_forward(dout_.get(), dh_.get(), dhb_.get(), dhs_.get(), r_gpu,
                                     drb_.get(), drs_.get(), n, c);
        EXPECT_TRUE(elementwise_close(dout_.download(), out, kTolerance)) << n << "x" << c;

        const Floats dy = random_floats(nc, 15);
        Floats gh = random_floats(nc, 16), gr = random_floats(nc, 17), ghb = random_floats(c, 18),
               ghs = random_floats(c, 19), grb = random_floats(c, 20), grs = random_floats(c, 21);
        DeviceBuffer<float> ddy(dy), dgh(gh), dgr(gr), dghb(ghb), dghs(ghs), dgrb(grb), dgrs(grs);
        // dhb skipped (nullptr) on both sides: the op must leave it alone.
        cpu::residual_merge_backward(gh.data(), nullptr, ghs.data(), gr.data(), grb.data(),
                                     grs.data(), dy.data(), h.data(), hb.data(), hs.data(), r_cpu,
                                     rb.data(), rs.data(), n, c);
        cuda::residual_merge_backward(dgh.get(), nullptr, dghs.get(), dgr.get(), dgrb.get(),
                                      dgrs.get(), ddy.get(), dh_.get(), dhb_.get(), dhs_.get(),
                                      r_gpu, drb_.get(), drs_.get(), n, c);
        for (auto [got, want, name] :
             {std::tuple{&dgh, &gh, "dh"}, std::tuple{&dghs, &ghs, "dhs"},
              std::tuple{&dgr, &gr, "dr"}, std::tuple{&dgrb, &grb, "drb"},
              std::tuple{&dgrs, &grs, "drs"}, std::tuple{&dghb, &ghb, "dhb (untouched)"}})
          EXPECT_TRUE(elementwise_close(got->download(), *want, kTolerance))
              << name << " " << n << "x" << c << (with_r ? " with r" : "");
      }
}

// The stage's start in one op: the merge and the RMSNorm of its output, against the CPU's two.
TEST(GpuOps, MergeRmsnormForward) {
  for (const int n : kRows)
    for (const int c : {1, 9, 300, 2048})
      for (const bool with_r : {false, true}) {
        const size_t nc = size_t(n) * c;
        const Floats h = random_floats(nc, 22), r = random_floats(nc, 23);
        const Floats hb = random_floats(c, 24), hs = random_floats(c, 25, 0.5f, 1.5f);
        const Floats rb = random_floats(c, 26), rs = random_floats(c, 27, 0.5f, 1.5f);
        const Floats w = random_floats(c, 28, 0.5f, 1.5f);
        DeviceBuffer<float> dh_(h), dr_(r), dhb_(hb), dhs_(hs), drb_(rb), drs_(rs), dw_(w);
        DeviceBuffer<float> dmerged(nc), dnormed(nc), drstd{static_cast<size_t>(n)};
        Floats merged(nc), normed(nc), rstd(static_cast<size_t>(n));
        cpu::residual_merge_forward(merged.data(), h.data(), hb.data(), hs.data(),
                                    with_r ? r.data() : nullptr, rb.data(), rs.data(), n, c);
        cpu::rmsnorm_forward(normed.data(), rstd.data(), merged.data(), w.data(), n, c, 1e-5f);
        cuda::merge_rmsnorm_forward(dmerged.get(), dnormed.get(), drstd.get(), dh_.get(),
                                    dhb_.get(), dhs_.get(), with_r ? dr_.get() : nullptr,
                                    drb_.get(), drs_.get(), dw_.get(), n, c, 1e-5f);
        const std::string what = std::to_string(n) + "x" + std::to_string(c) + (with_r ? " r" : "");
        EXPECT_TRUE(elementwise_close(dmerged.download(), merged, kTolerance)) << "merged " << what;
        EXPECT_TRUE(elementwise_close(dnormed.download(), normed, kTolerance)) << "normed " << what;
        EXPECT_TRUE(elementwise_close(drstd.download(), rstd, kTolerance)) << "rstd " << what;
      }
}

TEST(GpuOps, Matmul) {
  const int shapes[][3] = {{1, 1, 1}, {2, 3, 5}, {3, 64, 17}, {37, 256, 300}, {130, 96, 512}};
  for (const auto& s : shapes)
    for (const bool with_bias : {false, true}) {
      const int n = s[0], k = s[1], m = s[2];
      const Floats in = random_floats(size_t(n) * k, 22), w = random_floats(size_t(m) * k, 23);
      const Floats bias = random_floats(m, 24);
      DeviceBuffer<float> din_(in), dw_(w), dbias_(bias), dout_(size_t(n) * m);
      Floats out(size_t(n) * m);
      cpu::matmul_forward(out.data(), in.data(), w.data(), with_bias ? bias.data() : nullptr, n, k,
                          m);
      cuda::matmul_forward(dout_.get(), din_.get(), dw_.get(), with_bias ? dbias_.get() : nullptr,
                           n, k, m);
      EXPECT_TRUE(elementwise_close(dout_.download(), out, kTolerance))
          << n << "x" << k << "x" << m;

      const Floats dy = random_floats(out.size(), 25);
      Floats gin = random_floats(in.size(), 26), gw = random_floats(w.size(), 27),
             gb = random_floats(m, 28);
      DeviceBuffer<float> ddy(dy), dgin(gin), dgw(gw), dgb(gb);
      cpu::matmul_backward(gin.data(), gw.data(), with_bias ? gb.data() : nullptr, dy.data(),
                           in.data(), w.data(), n, k, m);
      cuda::matmul_backward(dgin.get(), dgw.get(), with_bias ? dgb.get() : nullptr, ddy.get(),
                            din_.get(), dw_.get(), n, k, m);
      EXPECT_TRUE(elementwise_close(dgin.download(), gin, kTolerance)) << "din " << n << "x" << k;
      EXPECT_TRUE(elementwise_close(dgw.download(), gw, kTolerance)) << "dw " << m << "x" << k;
      EXPECT_TRUE(elementwise_close(dgb.download(), gb, kTolerance)) << "dbias " << m;
    }
}

// The model hands cuBLASLt pointers at any float: parameters are packed without padding, and the
// experts' rows and the LM head's chunks start inside larger buffers. Each shape runs first on
// 256-byte aligned buffers, then on pointers 1, 2 and 3 floats in, in fp32 and in bf16: an
// algorithm chosen for the aligned call and reused for the others would fail or fault.
TEST(GpuOps, MatmulOnUnalignedPointers) {
  const int n = 33, k = 64, m = 48;
  const Floats in = random_floats(size_t(n) * k, 51), w = random_floats(size_t(m) * k, 52);
  const Floats dy = random_floats(size_t(n) * m, 53);
  Floats out(size_t(n) * m), gin(in.size(), 0.0f), gw(w.size(), 0.0f);
  cpu::matmul_forward(out.data(), in.data(), w.data(), nullptr, n, k, m);
  cpu::matmul_backward(gin.data(), gw.data(), nullptr, dy.data(), in.data(), w.data(), n, k, m);
  for (const Backend* be : {&cuda_backend(), &cuda_bf16_backend()})
    for (const int shift : {0, 1, 2, 3, 0}) {
      // Each tensor `shift` floats into a buffer of its own.
      auto shifted = [shift](const Floats& host) {
        Floats padded(host.size() + 3, 0.0f);
        std::copy(host.begin(), host.end(), padded.begin() + shift);
        return DeviceBuffer<float>(padded);
      };
      DeviceBuffer<float> din_ = shifted(in), dw_ = shifted(w), ddy = shifted(dy);
      DeviceBuffer<float> dout = shifted(Floats(out.size(), 0.0f));
      DeviceBuffer<float> dgin = shifted(Floats(in.size(), 0.0f));
      DeviceBuffer<float> dgw = shifted(Floats(w.size(), 0.0f));
      be->matmul_forward(dout.get() + shift, din_.get() + shift, dw_.get() + shift, nullptr, n, k,
                         m);
      be->matmul_backward(dgin.get() + shift, dgw.get() + shift, nullptr, ddy.get() + shift,
                          din_.get() + shift, dw_.get() + shift, n, k, m);
      auto unshift = [shift](const DeviceBuffer<float>& d, size_t count) {
        const Floats all = d.download();
        return Floats(all.begin() + shift, all.begin() + shift + long(count));
      };
      // fp32 at the op tolerance; bf16 at its rounding: 2^-8 per input puts ~0.3 % on each
      // product, so a sum of k <= 64 products of ±1 values (RMS 1/3) is off by ~0.3 % of
      // sqrt(k)/3 ≈ 2.7 (σ ≈ 0.009, the tensor's RMS): 2 % of each element, and 2 % of the RMS
      // (six σ) where terms cancelled.
      const Tolerance tol = be == &cuda_backend() ? kTolerance : Tolerance{2e-2, 2e-2};
      EXPECT_TRUE(elementwise_close(unshift(dout, out.size()), out, tol))
          << be->name() << " +" << shift;
      EXPECT_TRUE(elementwise_close(unshift(dgin, gin.size()), gin, tol)) << "din +" << shift;
      EXPECT_TRUE(elementwise_close(unshift(dgw, gw.size()), gw, tol)) << "dw +" << shift;
    }
}

}  // namespace
}  // namespace zaya

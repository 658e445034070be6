// The decode ops (backend/cpu/rowwise.h, backend/cpu/decode_ops.h) and the benchmarks' general
// product against their cpu:: namesakes, the oracle: the row-independent product (k below, at and
// above multiples of 16, with and without a bias), CCA's convolution step and state advance (rows
// in shuffled slots, one whose position another rank keeps), and attention partials over a paged
// cache (ragged rows, full and partial blocks, a row with no position) and their normalisation.
// Where a result is a copy (the state advance) it must be the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/cpu/cca_decode_ops.h"
#include "backend/cpu/decode_ops.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/rowwise.h"
#include "backend/cuda/device.h"
#include "backend/cuda/ops.h"
#include "gpu_test_util.h"

namespace zaya {
namespace {

using namespace test;
using Ints = std::vector<int32_t>;

TEST(GpuDecodeOps, RowsMatmul) {
  for (const int n : {1, 2, 3, 5})
    for (const int k : {1, 15, 16, 17, 40})
      for (const int m : {1, 6, 33})
        for (const bool bias : {false, true}) {
          const Floats in = random_floats(size_t(n) * k, 1), w = random_floats(size_t(m) * k, 2);
          const Floats b = random_floats(size_t(m), 3);
          Floats out(size_t(n) * m);
          cpu::rows_matmul_forward(out.data(), in.data(), w.data(), bias ? b.data() : nullptr, n, k,
                                   m);
          DeviceBuffer<float> din(in), dw(w), db(b), dout(out.size());
          cuda::rows_matmul_forward(dout.get(), din.get(), dw.get(), bias ? db.get() : nullptr, n,
                                    k, m);
          EXPECT_TRUE(elementwise_close(dout.download(), out, kTolerance))
              << n << "x" << k << "x" << m << " bias " << bias;
        }
}

TEST(GpuDecodeOps, GroupedRowsMatmul) {
  const std::vector<int> offsets = {0, 2, 2, 5, 6};  // one empty group
  const int groups = 4, n = 6, k = 40, m = 33;
  const Floats in = random_floats(size_t(n) * k, 7);
  std::vector<Floats> w;
  std::vector<DeviceBuffer<float>> dw;
  std::vector<const float*> weights, dweights;
  for (int g = 0; g < groups; ++g) w.push_back(random_floats(size_t(m) * k, uint32_t(8 + g)));
  for (const Floats& wg : w) {
    weights.push_back(wg.data());
    dw.emplace_back(wg);
  }
  for (const auto& d : dw) dweights.push_back(d.get());
  Floats out(size_t(n) * m);
  cpu::grouped_rows_matmul_forward(out.data(), in.data(), weights.data(), offsets.data(), groups, k,
                                   m);
  DeviceBuffer<float> din(in), dout(out.size());
  cuda::grouped_rows_matmul_forward(dout.get(), din.get(), dweights.data(), offsets.data(), groups,
                                    k, m);
  EXPECT_TRUE(elementwise_close(dout.download(), out, kTolerance));
}

TEST(GpuDecodeOps, DenseGemm) {
  const int m = 7, n = 5, k = 19;
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      const Floats a = random_floats(size_t(m) * k, 4), b = random_floats(size_t(k) * n, 5);
      Floats c = random_floats(size_t(m) * n, 6);
      const int lda = ta ? m : k, ldb = tb ? k : n;
      DeviceBuffer<float> da(a), db(b), dc(c);
      cpu::gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 2.0f, c.data(), n);
      cuda::dense_gemm(ta, tb, m, n, k, 0.5f, da.get(), lda, db.get(), ldb, 2.0f, dc.get(), n);
      EXPECT_TRUE(elementwise_close(dc.download(), c, kTolerance)) << ta << tb;
    }
}

// nq = 4, nk = 2, d = 8: C = 48 channels, P = 64; rows in slots 3, 0 and 2 of 4.
CcaDecodeStep step_shape(int n) {
  CcaDecodeStep s;
  s.n = n;
  s.nq = 4;
  s.nk = 2;
  s.d = 8;
  return s;
}

TEST(GpuDecodeOps, CcaDecodeConvAndAdvance) {
  const Ints slots = {3, 0, 2};
  const int n = int(slots.size()), slot_count = 4;
  CcaDecodeStep s = step_shape(n);
  const int C = (s.nq + s.nk) * s.d, Dk = s.nk * s.d, P = C + Dk, half = Dk / 2;
  const Floats proj = random_floats(size_t(n) * P, 10),
               window = random_floats(size_t(4) * 2 * C, 11);
  const Floats w0 = random_floats(size_t(C) * 2, 12), b0 = random_floats(size_t(C), 13);
  const Floats w1 = random_floats(size_t(C) * s.d * 2, 14), b1 = random_floats(size_t(C), 15);
  DeviceBuffer<float> dproj(proj), dwindow(window), dw0(w0), db0(b0), dw1(w1), db1(b1);
  DeviceBuffer<int32_t> dslots(slots);
  s.conv0_w = w0.data();
  s.conv0_b = b0.data();
  s.conv1_w = w1.data();
  s.conv1_b = b1.data();
  Floats z(size_t(n) * C);
  cpu::cca_decode_conv(z.data(), proj.data(), window.data(), slots.data(), s);
  CcaDecodeStep ds = s;
  ds.conv0_w = dw0.get();
  ds.conv0_b = db0.get();
  ds.conv1_w = dw1.get();
  ds.conv1_b = db1.get();
  DeviceBuffer<float> dz(z.size());
  cuda::cca_decode_conv(dz.get(), dproj.get(), dwindow.get(), dslots.get(), ds);
  EXPECT_TRUE(elementwise_close(dz.download(), z, kTolerance));

  // The advance: rows 0 and 2 write their key and value rows, row 1's position is another rank's.
  const std::vector<int64_t> kv_rows = {5, 9, -1, -1, 0, 2};
  Floats kv = random_floats(size_t(12) * Dk, 16), win = window;
  Floats v_prev = random_floats(size_t(slot_count) * half, 17);
  const Floats qkn = random_floats(size_t(n) * C, 18);
  DeviceBuffer<float> dkv(kv), dwin(win), dvp(v_prev), dqkn(qkn);
  DeviceBuffer<int64_t> drows(kv_rows);
  cpu::cca_decode_advance(win.data(), v_prev.data(), kv.data(), kv_rows.data(), qkn.data(),
                          proj.data(), slots.data(), s);
  cuda::cca_decode_advance(dwin.get(), dvp.get(), dkv.get(), drows.get(), dqkn.get(), dproj.get(),
                           dslots.get(), ds);
  EXPECT_EQ(dwin.download(), win);
  EXPECT_EQ(dvp.download(), v_prev);
  EXPECT_EQ(dkv.download(), kv);
}

TEST(GpuDecodeOps, PagedAttentionPartialsAndNormalize) {
  const int nq = 4, nk = 2, d = 8, bs = 4, stages = 2, stage = 1, blocks = 6, max_blocks = 3;
  const int Dk = nk * d;
  // Row 0: 9 positions in blocks 5, 1, 3 (4 + 4 + 1); row 1: 4 in block 0; row 2: none; row 3:
  // 2 in block 4.
  const Ints table = {5, 1, 3, 0, 0, 0, 0, 0, 0, 4, 0, 0};
  const Ints counts = {4, 4, 1, 4, 0, 0, 0, 0, 0, 2, 0, 0};
  const int n = 4;
  const Floats pool = random_floats(size_t(blocks) * stages * 2 * bs * Dk, 20);
  const Floats q = random_floats(size_t(n) * nq * d, 21, -2.0f, 2.0f);
  DeviceBuffer<float> dpool(pool), dq(q);
  DeviceBuffer<int32_t> dtable(table), dcounts(counts);
  PagedKv kv;
  kv.block_stride = int64_t(stages) * 2 * bs * Dk;
  kv.values_offset = int64_t(bs) * Dk;
  kv.max_blocks = max_blocks;
  kv.block_size = bs;
  const size_t offset = size_t(stage) * 2 * bs * Dk;
  PagedKv host = kv, dev = kv;
  host.keys = pool.data() + offset;
  host.blocks = table.data();
  host.counts = counts.data();
  dev.keys = dpool.get() + offset;
  dev.blocks = dtable.get();
  dev.counts = dcounts.get();
  const size_t items = size_t(n) * nq;
  Floats mx(items), sum(items), out(items * d), scores(items * max_blocks * bs);
  cpu::kv_attention_partials(mx.data(), sum.data(), out.data(), scores.data(), q.data(), host, n,
                             nq, nk, d);
  DeviceBuffer<float> dmx(items), dsum(items), dout(items * d), dscores(scores.size());
  cuda::kv_attention_partials(dmx.get(), dsum.get(), dout.get(), dscores.get(), dq.get(), dev, n,
                              nq, nk, d);
  const Floats gmx = dmx.download(), gsum = dsum.download();
  for (int h = 0; h < nq; ++h) {  // row 2 has no position: exactly m = −inf, l = 0, o = 0
    EXPECT_TRUE(std::isinf(gmx[size_t(2 * nq + h)]) && gmx[size_t(2 * nq + h)] < 0);
    EXPECT_EQ(gsum[size_t(2 * nq + h)], 0.0f);
  }
  Floats mx_finite = mx, gmx_finite = gmx;
  for (size_t i = 0; i < items; ++i)
    if (std::isinf(mx[i])) mx_finite[i] = gmx_finite[i] = 0;
  EXPECT_TRUE(elementwise_close(gmx_finite, mx_finite, kTolerance));
  EXPECT_TRUE(elementwise_close(gsum, sum, kTolerance));
  EXPECT_TRUE(elementwise_close(dout.download(), out, kTolerance));

  // Normalised (rows with positions only: row 2's would divide by 0 on both).
  const Ints rows_with = {0, 1, 3};
  Floats att(items * d, 0.0f);
  cpu::kv_attention_normalize(att.data(), sum.data(), out.data(), int(items), d);
  DeviceBuffer<float> datt(items * d);
  cuda::kv_attention_normalize(datt.get(), dsum.get(), dout.get(), int(items), d);
  const Floats gatt = datt.download();
  Floats want, got;
  for (const int r : rows_with)
    for (size_t i = size_t(r) * nq * d; i < size_t(r + 1) * nq * d; ++i) {
      want.push_back(att[i]);
      got.push_back(gatt[i]);
    }
  EXPECT_TRUE(elementwise_close(got, want, kTolerance));
}

}  // namespace
}  // namespace zaya

// ZayaModel's bf16 weight storage (model/zaya_model.h) on cpu-as-device with bf16 weights, whose
// CPU ops widen the bf16 values they are handed (backend/cpu/typed_weights.h): the products'
// weights (the Muon matrices and the tied embedding) exist only in bf16 and reach the ops as
// typed bf16 weights; the other tensors stay fp32; the master range stays exact. Two models on
// one backend, one storing bf16 and one rounding a copy, keep apart. The expected values come
// from a host model whose weights were rounded here, with core/tensor.h's conversion, before the
// run. (End to end, with the optimizer and ZeRO-1: tests/ckpt/bf16_storage_equivalence.sh.)
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_as_device_backend.h"
#include "core/error.h"
#include "core/tensor.h"
#include "model/zaya_model.h"
#include "optim/bf16_weight_codec.h"
#include "optim/master_weights.h"
#include "test_util.h"

namespace zaya {
namespace {

bool stored_in_bf16(const ParamSpec& s) {
  return s.group == OptimGroup::Muon || s.name == "model.embed_tokens.weight";
}

float rounded(float x) {
  return bf16_to_f32(f32_to_bf16(x));
}

TEST(Bf16WeightStorage, ProductsReadTheWeightsRoundedAndEveryOtherTensorExactly) {
  const ModelConfig c = test::tiny_config();
  const CpuAsDeviceBackend be(/*bf16_weights=*/true);
  ZayaModel stored(c), host(c);
  test::randomise_weights(stored.params(), 5, 6);
  const size_t n = stored.params().size();
  std::copy_n(stored.params().weights(), n, host.params().weights());
  int rounded_tensors = 0;
  for (const ParamSpec& s : host.params().registry().specs()) {
    if (!stored_in_bf16(s)) continue;
    float* w = host.params().weights() + s.offset;
    for (int64_t i = 0; i < s.numel; ++i) w[i] = rounded(w[i]);
    ++rounded_tensors;
  }
  ASSERT_GT(rounded_tensors, 10);
  stored.placement().set_bf16_weight_storage();
  stored.set_backend(be);
  stored.placement().set_resident(true);
  ASSERT_TRUE(stored.placement().bf16_weight_storage());
  const int B = 2, S = 9;
  std::vector<int32_t> tokens(size_t(B) * S);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 29 + 3) % c.vocab_size);
  const auto targets = ZayaModel::shifted_targets(tokens, B, S);
  host.params().zero_grads();
  const float want = host.forward(tokens, targets, B, S);
  host.backward();
  EXPECT_EQ(stored.forward(tokens, targets, B, S), want);
  stored.backward();
  // cpu-as-device's memory is the host's: the gradients can be read where they are.
  EXPECT_TRUE(std::equal(host.params().grads(), host.params().grads() + n,
                         stored.placement().backend_grads()))
      << "the gradients of the stored model are the rounded host model's";
  // And not the unrounded model's: the rounding is live.
  ZayaModel exact(c);
  test::randomise_weights(exact.params(), 5, 6);
  EXPECT_NE(exact.forward(tokens, targets, B, S), want);
}

// bf16 gradients: each Muon matrix gets one product's gradient per backward, added into its bf16
// value with one rounding, so two micro-batches give round(round(g1) + g2) of the gradients g1
// and g2 that the rounded host model computes for each alone; every other gradient accumulates
// in fp32 as on the host.
TEST(Bf16WeightStorage, Bf16GradientsRoundOncePerMicroBatch) {
  const ModelConfig c = test::tiny_config();
  const CpuAsDeviceBackend be(true);
  ZayaModel stored(c), each(c), both(c);
  test::randomise_weights(stored.params(), 9, 4);
  const size_t n = stored.params().size();
  for (ZayaModel* m : {&each, &both}) {
    std::copy_n(stored.params().weights(), n, m->params().weights());
    for (const ParamSpec& s : m->params().registry().specs())
      if (stored_in_bf16(s))
        for (int64_t i = 0; i < s.numel; ++i)
          m->params().weights()[s.offset + size_t(i)] =
              rounded(m->params().weights()[s.offset + size_t(i)]);
  }
  stored.placement().set_bf16_weight_storage(/*bf16_gradients=*/true);
  stored.set_backend(be);
  stored.placement().set_resident(true);
  ASSERT_TRUE(stored.placement().bf16_gradients());
  const int B = 2, S = 7;
  std::vector<int32_t> tokens[2];
  for (int k = 0; k < 2; ++k) {
    tokens[k].resize(size_t(B) * S);
    for (size_t i = 0; i < tokens[k].size(); ++i)
      tokens[k][i] = int32_t((i * 17 + 5 + 11 * size_t(k)) % c.vocab_size);
  }
  std::vector<float> alone[2];
  stored.placement().zero_grads();
  both.params().zero_grads();
  for (int k = 0; k < 2; ++k) {
    const auto targets = ZayaModel::shifted_targets(tokens[k], B, S);
    each.params().zero_grads();
    each.forward(tokens[k], targets, B, S);
    each.backward(0.5f);
    alone[k].assign(each.params().grads(), each.params().grads() + n);
    both.forward(tokens[k], targets, B, S);
    both.backward(0.5f);
    stored.forward(tokens[k], targets, B, S);
    stored.backward(0.5f);
  }
  std::vector<float> got(n);
  stored.placement().load_grads(0, n, got.data());  // cpu-as-device's memory is the host's
  size_t rounded_values = 0;
  for (const ParamSpec& s : stored.params().registry().specs())
    for (int64_t i = 0; i < s.numel; ++i) {
      const size_t k = s.offset + size_t(i);
      const bool bf16 = s.group == OptimGroup::Muon;
      const float want =
          bf16 ? rounded(rounded(alone[0][k]) + alone[1][k]) : both.params().grads()[k];
      ASSERT_EQ(got[k], want) << s.name << "[" << i << "]";
      rounded_values += bf16 && want != alone[0][k] + alone[1][k];
    }
  EXPECT_GT(rounded_values, n / 2) << "the bf16 gradients are rounded";
  // The gradients live in bf16 and fp32 buffers: there is no one fp32 buffer to hand out.
  EXPECT_THROW(stored.placement().backend_grads(), Error);
  stored.placement().fill_grads(2.0f);
  stored.placement().load_grads(0, n, got.data());
  EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float x) { return x == 2.0f; }));
}

// The master weights (optim/master_weights.h) of a range beside the storage: a pull gives the
// stored (rounded) values, and the master's save puts its range back exactly.
TEST(Bf16WeightStorage, PullGivesTheMasterRangeExactlyAndTheStoredValuesElsewhere) {
  const ModelConfig c = test::tiny_config();
  const CpuAsDeviceBackend be(true);
  ZayaModel m(c);
  test::randomise_weights(m.params(), 7, 1);
  const size_t n = m.params().size();
  const std::vector<float> original(m.params().weights(), m.params().weights() + n);
  const size_t lo = n / 3, hi = 2 * n / 3;
  m.set_backend(be);
  m.placement().set_bf16_weight_storage();  // after set_backend: laid out now, from the host copy
  ASSERT_TRUE(m.placement().bf16_weight_storage());
  MasterWeights master(be, m.params(), lo, hi);
  EXPECT_TRUE(
      std::equal(original.begin() + long(lo), original.begin() + long(hi), master.values()));
  std::fill_n(m.params().weights(), n, 0.0f);
  m.placement().pull_weights();
  master.save(m.params());
  size_t inexact = 0;
  for (const ParamSpec& s : m.params().registry().specs())
    for (int64_t i = 0; i < s.numel; ++i) {
      const size_t k = s.offset + size_t(i);
      const float want =
          (k >= lo && k < hi) || !stored_in_bf16(s) ? original[k] : rounded(original[k]);
      ASSERT_EQ(m.params().weights()[k], want) << s.name << "[" << i << "]";
      inexact += want != original[k];
    }
  EXPECT_GT(inexact, n / 3) << "outside the range the bf16 tensors come back rounded";
  EXPECT_THROW(MasterWeights(be, m.params(), hi, n + 1), Error);
  // store_weights writes a flat range from fp32 values: rounded into the bf16 tensors.
  std::vector<float> values(n, 1.0f + 1.0f / 1024);  // not a bf16 value: rounds to 1
  m.placement().store_weights(0, n, values.data());
  m.placement().pull_weights();
  const ParamSpec& emb = m.params().registry().get("model.embed_tokens.weight");
  const ParamSpec& norm = m.params().registry().get("model.final_norm.weight");
  EXPECT_EQ(m.params().weights()[emb.offset], 1.0f);
  EXPECT_EQ(m.params().weights()[norm.offset], values[0]);
  try {
    m.placement().store_weights(n - 1, 2, values.data());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is outside the"), std::string::npos) << e.what();
  }
}

TEST(Bf16WeightStorage, OnlyOnABackendWithBf16WeightsAndItsOwnMemory) {
  const ModelConfig c = test::tiny_config();
  const CpuAsDeviceBackend fp32(false), bf16(true);  // before the model, which they outlive
  ZayaModel m(c);
  m.placement().set_bf16_weight_storage();
  EXPECT_FALSE(m.placement().bf16_weight_storage()) << "the CPU backend: host memory";
  m.set_backend(fp32);
  EXPECT_FALSE(m.placement().bf16_weight_storage()) << "products in fp32";
  EXPECT_NE(m.placement().backend_weights(), nullptr);
  m.set_backend(bf16);
  EXPECT_TRUE(m.placement().bf16_weight_storage());
  try {
    m.placement().backend_weights();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not one fp32 buffer"), std::string::npos) << e.what();
  }
  // A product's weight has no fp32 value there: asking for one names what is missing.
  const size_t fc1 = m.params()
                         .registry()
                         .get("model.layers.1.zaya_block.experts.local_experts.0.linear_fc1.weight")
                         .offset;
  EXPECT_TRUE(m.placement().weight(fc1).is_bf16());
  try {
    m.placement().fp32_weight(fc1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kept in bf16 alone"), std::string::npos) << e.what();
  }
}

// One forward and backward of each model on `be`'s memory: the loss and every gradient.
struct StepResult {
  float loss = 0;
  std::vector<float> grads;
  bool operator==(const StepResult&) const = default;
};

// Two models on one bf16 backend, one keeping its weights in bf16 alone and one keeping fp32
// weights and rounding a copy for the products, with different weights: run side by side, each
// forward and backward interleaved with the other's, each gives the bits it gives alone. (When
// the backend held the product weights, the second forward's replaced the first's before its
// backward.)
TEST(Bf16WeightStorage, TwoModelsOnOneBackendKeepTheirOwnWeights) {
  const ModelConfig c = test::tiny_config();
  const CpuAsDeviceBackend be(true);
  const int B = 2, S = 8;
  std::vector<int32_t> tokens(size_t(B) * S);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 13 + 7) % c.vocab_size);
  const auto targets = ZayaModel::shifted_targets(tokens, B, S);
  auto make = [&](ZayaModel& m, uint64_t seed, bool stored) {
    test::randomise_weights(m.params(), seed, 5);
    if (stored) m.placement().set_bf16_weight_storage();
    m.set_backend(be);
    m.placement().set_resident(true);
    ASSERT_EQ(m.placement().bf16_weight_storage(), stored);
    ASSERT_TRUE(m.placement().bf16_products());
  };
  auto grads = [](ZayaModel& m) {
    std::vector<float> g(m.params().size());
    m.placement().load_grads(0, g.size(), g.data());
    return g;
  };
  StepResult alone[2];
  {
    ZayaModel a(c), b(c);
    make(a, 21, true);
    make(b, 22, false);
    for (int k = 0; k < 2; ++k) {
      ZayaModel& m = k == 0 ? a : b;
      alone[k].loss = m.forward(tokens, targets, B, S);
      m.backward();
      alone[k].grads = grads(m);
    }
  }
  ZayaModel a(c), b(c);
  make(a, 21, true);
  make(b, 22, false);
  StepResult side[2];
  side[0].loss = a.forward(tokens, targets, B, S);
  side[1].loss = b.forward(tokens, targets, B, S);
  a.backward();
  b.backward();
  side[0].grads = grads(a);
  side[1].grads = grads(b);
  EXPECT_NE(alone[0].loss, alone[1].loss) << "the two models differ";
  EXPECT_TRUE(side[0] == alone[0]) << "the stored model, interleaved";
  EXPECT_TRUE(side[1] == alone[1]) << "the model with a rounded copy, interleaved";
}

// ZeRO-1's bf16 codec (optim/bf16_weight_codec.h) on the model's own split: packing fp32 values
// and storing the packed piece puts each bf16 tensor's rounding and each fp32 tensor's exact
// value into the storage, for pieces that start and end inside tensors of either kind; the
// packed fp32 part holds exactly fp32_count values.
TEST(Bf16WeightStorage, TheCodecStoresWhatItPacked) {
  const ModelConfig c = test::tiny_config();
  const CpuAsDeviceBackend be(true);
  ZayaModel m(c);
  const size_t n = m.params().size();
  m.set_backend(be);
  m.placement().set_bf16_weight_storage();
  const Bf16WeightCodec codec(m.placement());
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = 1.0f + float(i % 977) / 4096.0f;
  const size_t pieces[][2] = {{0, n / 7}, {n / 7, n / 2}, {n / 2, n - 3}, {n - 3, n}};
  size_t fp32_total = 0;
  for (const auto& [lo, hi] : pieces) {
    const int64_t f = codec.fp32_count(lo, hi - lo);
    std::vector<uint16_t> bf16(hi - lo);
    std::vector<float> fp32(size_t(f) + 1, -7.0f);  // one past: must stay untouched
    codec.pack(lo, hi - lo, values.data() + lo, bf16.data(), fp32.data());
    EXPECT_EQ(fp32[size_t(f)], -7.0f) << "pack wrote past fp32_count";
    codec.store(lo, hi - lo, bf16.data(), fp32.data());
    fp32_total += size_t(f);
  }
  m.placement().pull_weights();
  size_t bf16_values = 0;
  for (const ParamSpec& s : m.params().registry().specs())
    for (int64_t i = 0; i < s.numel; ++i) {
      const size_t k = s.offset + size_t(i);
      const bool bf16 = stored_in_bf16(s);
      ASSERT_EQ(m.params().weights()[k], bf16 ? rounded(values[k]) : values[k])
          << s.name << "[" << i << "]";
      bf16_values += bf16;
    }
  EXPECT_GT(bf16_values, n / 2);
  EXPECT_GT(fp32_total, 0u);
  EXPECT_LE(fp32_total, n - bf16_values) << "the fp32 tensors' values and padding only";
}

}  // namespace
}  // namespace zaya

// bf16 activation storage (model/stored_activations.h) on cpu-as-device: the forward computes in
// fp32 as ever (the same loss, bitwise), the backward reads the kept bulk rounded to bf16 (other
// gradients, near fp32's), nothing is stored where full recompute keeps only fp32 stage inputs
// (fp32's gradients, bitwise), and the arenas hold exactly what train/train_memory.h plans for
// it, less than fp32's. End to end (losses over a run, resume, the device peak):
// tests/ckpt/bf16_activations.sh and tests/train/device_memory_plan.sh.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "backend/cpu/cpu_as_device_backend.h"
#include "model/zaya_model.h"
#include "test_util.h"
#include "train/train_memory.h"

namespace zaya {
namespace {

struct StoredStep {
  float loss = 0;
  std::vector<float> grads;
  size_t high_water = 0;
  std::vector<int64_t> routed;  // tokens sent to a real expert, per MoE stage
};

StoredStep stored_step(const ModelConfig& c, int B, int S, ActivationStorage storage,
                       RecomputePlan recompute = {}) {
  static const CpuAsDeviceBackend be;
  ZayaModel m(c);
  test::randomise_weights(m.params(), 5, 6);
  m.set_backend(be);
  m.placement().set_resident(true);
  m.set_recompute(recompute);
  m.set_activation_storage(storage);
  std::vector<int32_t> tokens(size_t(B) * S);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 37 + 11) % c.vocab_size);
  StoredStep r;
  r.loss = m.forward(tokens, ZayaModel::shifted_targets(tokens, B, S), B, S);
  m.backward();
  const size_t n = m.params().size();
  // cpu-as-device's memory is the host's: the gradients can be read where they are.
  r.grads.assign(m.placement().backend_grads(), m.placement().backend_grads() + n);
  r.high_water = m.arena_high_water();
  for (int i = 1; i < int(c.num_stages); i += 2) {
    int64_t k = 0;
    for (int32_t route : m.routes(i)) k += route < int32_t(c.num_experts);
    r.routed.push_back(k);
  }
  return r;
}

double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

TEST(StoredActivations, TheForwardIsFp32sAndTheBackwardReadsTheRoundedBulk) {
  const ModelConfig c = test::tiny_config();
  for (const RecomputePlan recompute :
       {RecomputePlan(Recompute::kNone), RecomputePlan(Recompute::kSelective),
        RecomputePlan(Recompute::kNone, Recompute::kSelective)}) {
    const StoredStep fp32 = stored_step(c, 2, 24, ActivationStorage::kFp32, recompute);
    const StoredStep bf16 = stored_step(c, 2, 24, ActivationStorage::kBf16, recompute);
    const std::string mode = recompute_plan_name(recompute);
    EXPECT_EQ(bf16.loss, fp32.loss) << mode << ": the forward computes in fp32";
    // bf16 keeps 8 bits of each stored value (a relative rounding up to 2^-9): the gradients
    // move by about that, not by nothing (the storage is live) and not by more (a value stored
    // in the wrong place, or not widened back, moves them by their own size).
    const double moved = relative_difference(bf16.grads, fp32.grads);
    EXPECT_GT(moved, 1e-5) << mode;
    EXPECT_LT(moved, 1e-2) << mode;
    const StoredStep again = stored_step(c, 2, 24, ActivationStorage::kBf16, recompute);
    EXPECT_EQ(again.grads, bf16.grads) << mode << ": bitwise repeatable";
  }
}

// Under full recompute a stage keeps its residual stream alone (r and its output h): stored in
// bf16 too, so the gradients move as little and the arena is smaller; the recomputed stage reads
// the rounded stream.
TEST(StoredActivations, FullRecomputeStoresTheResidualStreamsInBf16) {
  const ModelConfig c = test::tiny_config();
  const StoredStep fp32 = stored_step(c, 2, 24, ActivationStorage::kFp32, Recompute::kFull);
  const StoredStep bf16 = stored_step(c, 2, 24, ActivationStorage::kBf16, Recompute::kFull);
  EXPECT_EQ(bf16.loss, fp32.loss);
  const double moved = relative_difference(bf16.grads, fp32.grads);
  EXPECT_GT(moved, 1e-5);
  EXPECT_LT(moved, 1e-2);
  EXPECT_LT(bf16.high_water, fp32.high_water);
}

// The plan (train/train_memory.h's activation_arenas with bf16 storage) is the two arenas'
// high water, to the byte, on a device (the inputs copied there), for several shapes and each
// recompute plan, and less than fp32's.
TEST(StoredActivations, TheArenasAreThePlanToTheByte) {
  ModelConfig wide = test::tiny_config();
  wide.hidden_size = 96, wide.expert_hidden = 40, wide.head_dim = 12, wide.num_stages = 4;
  for (const ModelConfig& c : {test::tiny_config(), wide})
    for (const auto& [B, S] : {std::pair{1, 16}, {3, 37}, {2, 64}})
      for (const RecomputePlan recompute :
           {RecomputePlan(Recompute::kNone), RecomputePlan(Recompute::kSelective),
            RecomputePlan(Recompute::kFull), RecomputePlan(Recompute::kFull, Recompute::kSelective),
            RecomputePlan(Recompute::kSelective, Recompute::kNone)}) {
        const std::string what = "hidden " + std::to_string(c.hidden_size) + ", B " +
                                 std::to_string(B) + ", S " + std::to_string(S) + ", recompute " +
                                 recompute_plan_name(recompute);
        const StoredStep bf16 = stored_step(c, B, S, ActivationStorage::kBf16, recompute);
        const StoredStep fp32 = stored_step(c, B, S, ActivationStorage::kFp32, recompute);
        ASSERT_EQ(bf16.routed, fp32.routed) << what;
        EXPECT_EQ(int64_t(bf16.high_water), activation_arenas(c, B, S, bf16.routed, recompute, true,
                                                              {}, ActivationStorage::kBf16)
                                                .total())
            << what;
        EXPECT_EQ(int64_t(fp32.high_water),
                  activation_arenas(c, B, S, fp32.routed, recompute, true).total())
            << what;
        EXPECT_LT(bf16.high_water, fp32.high_water) << what;
      }
}

// Where the stages' activations dominate (a long sequence, many stages: one stage's fp32 forward
// and the backward's buffers are the same in both), bf16 storage keeps at most three quarters
// of fp32's in each mode (0.63x, 0.69x and 0.73x here: the fp32 parts weigh more as the kept
// part shrinks).
TEST(StoredActivations, ALongSequenceKeepsAtMostThreeQuarters) {
  ModelConfig c = test::tiny_config();
  c.num_stages = 24;
  for (const Recompute recompute : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    const StoredStep fp32 = stored_step(c, 1, 256, ActivationStorage::kFp32, recompute);
    const StoredStep bf16 = stored_step(c, 1, 256, ActivationStorage::kBf16, recompute);
    const double ratio = double(bf16.high_water) / double(fp32.high_water);
    std::printf("  recompute %s: bf16 storage keeps %.3fx fp32's activations\n",
                recompute_name(recompute), ratio);
    EXPECT_LT(ratio, 0.75) << recompute_name(recompute);
  }
}

}  // namespace
}  // namespace zaya

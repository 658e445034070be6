// The memory model of `zaya size` against the memory real steps take: the activation count must
// equal the arena's high-water mark after forward + backward, byte for byte, for several shapes
// and for every way the router can spread the tokens.
#include <gtest/gtest.h>

#include <random>

#include "model/config.h"
#include "model/zaya_model.h"
#include "sizing/gpu_plan.h"
#include "train/train_memory.h"

namespace zaya {
namespace {

ModelConfig config_from(const char* name) {
  return load_model_config(std::string(ZAYA_SOURCE_DIR "/configs/") + name);
}

struct Step {
  size_t high_water = 0;
  std::vector<int64_t> routed;  // tokens sent to a real expert, per MoE stage
};

// One forward + backward on random tokens; `held` (one route per token, per MoE stage) or, when
// empty, the router's own choice.
Step run_step(const ModelConfig& c, int B, int S, const std::vector<std::vector<int32_t>>& held,
              RecomputePlan recompute = {}, const LmHeadChunks& chunks = {}) {
  ZayaModel m(c);
  m.params().init(5);
  m.set_recompute(recompute);
  m.set_lm_head_chunks(chunks);
  if (!held.empty()) m.hold_routes(held);
  std::mt19937 g(9);
  std::uniform_int_distribution<int32_t> tok(0, int32_t(c.vocab_size) - 1);
  std::vector<int32_t> tokens(size_t(B) * S);
  for (auto& t : tokens) t = tok(g);
  m.forward(tokens, ZayaModel::shifted_targets(tokens, B, S), B, S);
  m.backward();
  Step s;
  s.high_water = m.arena_high_water();
  for (int i = 1; i < int(c.num_stages); i += 2) {
    int64_t n = 0;
    for (int32_t r : m.routes(i)) n += r < int32_t(c.num_experts);
    s.routed.push_back(n);
  }
  return s;
}

TEST(TrainMemory, ActivationsAreTheArenasHighWater) {
  ModelConfig wide = config_from("tiny.json");
  wide.hidden_size = 96, wide.expert_hidden = 40, wide.head_dim = 12, wide.num_stages = 4;
  for (const ModelConfig& c : {config_from("tiny.json"), wide}) {
    for (const auto& [B, S] : {std::pair{1, 16}, {3, 37}, {2, 64}}) {
      for (const RecomputePlan recompute :
           {RecomputePlan(Recompute::kNone), RecomputePlan(Recompute::kSelective),
            RecomputePlan(Recompute::kFull), RecomputePlan(Recompute::kFull, Recompute::kSelective),
            RecomputePlan(Recompute::kSelective, Recompute::kNone)}) {
        const Step s = run_step(c, B, S, {}, recompute);
        EXPECT_EQ(int64_t(s.high_water), activation_bytes(c, B, S, s.routed, recompute))
            << "hidden " << c.hidden_size << ", B " << B << ", S " << S << ", recompute "
            << recompute_plan_name(recompute);
      }
    }
  }
}

// With the LM head in blocks (train.lm_head_chunk_*), one block of logits in the arena instead of
// all of them: counted to the byte, in every recompute mode, and less than the materialised.
TEST(TrainMemory, ChunkedLmHeadKeepsOneBlockOfLogits) {
  const ModelConfig c = config_from("tiny.json");
  const LmHeadChunks chunks{5, 30};
  for (const Recompute recompute : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    const Step s = run_step(c, 2, 40, {}, recompute, chunks);
    const int64_t counted = activation_arenas(c, 2, 40, s.routed, recompute, false, chunks).total();
    EXPECT_EQ(int64_t(s.high_water), counted) << recompute_name(recompute);
    EXPECT_LT(counted, activation_bytes(c, 2, 40, s.routed, recompute));
  }
}

// The experts' buffers scale with the tokens routed to them: all to the skip route, all to
// experts, and a mix, each held so the counts are known without the router.
TEST(TrainMemory, ExpertBuffersFollowTheRoutes) {
  const ModelConfig c = config_from("tiny.json");
  const int B = 2, S = 24, N = B * S;
  const int64_t moe = c.num_moe_stages();
  for (const int mode : {0, 1, 2}) {
    std::vector<std::vector<int32_t>> held(size_t(moe), std::vector<int32_t>(size_t(N), 0));
    std::vector<int64_t> expect(size_t(moe), 0);
    for (int64_t k = 0; k < moe; ++k)
      for (int t = 0; t < N; ++t) {
        const int32_t skip = int32_t(c.num_experts);
        const int32_t r = mode == 0   ? skip
                          : mode == 1 ? int32_t(t % c.num_experts)
                                      : int32_t((t + k) % c.num_routes());
        held[size_t(k)][size_t(t)] = r;
        expect[size_t(k)] += r != skip;
      }
    const Step s = run_step(c, B, S, held);
    EXPECT_EQ(s.routed, expect);
    EXPECT_EQ(int64_t(s.high_water), activation_bytes(c, B, S, expect)) << "mode " << mode;
  }
  // Without counts, the tokens spread evenly over experts and skip.
  const int64_t even = int64_t(N) * c.num_experts / c.num_routes();
  EXPECT_EQ(activation_bytes(c, B, S),
            activation_bytes(c, B, S, std::vector<int64_t>(size_t(moe), even)));
}

// Recomputation trades compute for memory: at a long sequence the arena of a step with full
// recompute is a fraction of the one without, selective's lies between, and each is what the
// model predicts.
TEST(TrainMemory, RecomputeKeepsAFractionOfTheActivations) {
  const ModelConfig c = config_from("tiny.json");
  const Step none = run_step(c, 1, 256, {}, Recompute::kNone);
  const Step selective = run_step(c, 1, 256, {}, Recompute::kSelective);
  const Step full = run_step(c, 1, 256, {}, Recompute::kFull);
  EXPECT_EQ(int64_t(full.high_water), activation_bytes(c, 1, 256, full.routed, Recompute::kFull));
  EXPECT_EQ(int64_t(selective.high_water),
            activation_bytes(c, 1, 256, selective.routed, Recompute::kSelective));
  EXPECT_LT(double(full.high_water), 0.6 * double(none.high_water));
  EXPECT_LT(double(selective.high_water), 0.8 * double(none.high_water));
  EXPECT_GT(selective.high_water, full.high_water);
}

// ZeRO-1 splits the optimizer state, not the weights or gradients; the parts add up.
TEST(TrainMemory, ZeroOneShardsTheOptimizerState) {
  const ModelConfig c = config_from("small.json");
  const TrainMemory one = train_memory(c, 8, 256, 1, 1000);
  const TrainMemory four = train_memory(c, 8, 256, 4, 1000);
  // zaya info: trained values + routing biases, and the 84 floats of alignment padding between
  // tensors in the flat buffers (model/params.h: every tensor at a multiple of 16 floats; after
  // each of the 4 attention stages' 2 key temperatures 14, after each of the 4 MoE stages' 9
  // balancing biases 7).
  const int64_t P = 7898312 + 36 + 84;
  EXPECT_EQ(one.weights, 4 * P);
  EXPECT_EQ(one.gradients, 4 * P);
  EXPECT_EQ(four.weights, one.weights);
  EXPECT_EQ(one.optimizer, 3 * 4 * P);
  EXPECT_EQ(four.optimizer, 3 * 4 * ((P + 3) / 4));
  EXPECT_EQ(one.zero1, 0);
  EXPECT_GT(four.zero1, 4 * ((P + 3) / 4));
  EXPECT_LT(four.muon, one.muon);
  EXPECT_EQ(one.runtime, 1000);
  EXPECT_EQ(one.total(), one.weights + one.gradients + one.optimizer + one.muon + one.activations +
                             one.checkpoint + one.runtime);
}

// `zaya info`'s GPU plan for ZAYA1-base, as the GPU backend keeps it: bf16 weights are 2 bytes ×
// its 8,840,489,464 values plus 4 bytes × the 14,189,048 values of the tensors kept in fp32
// (norms, biases, convolutions, scales, routing biases: all but the Muon matrices and embedding)
// plus 16 MiB of staging; the gradients 2 bytes × all 8,840,489,464 (a bf16 buffer of the flat
// layout) and 4 × the 551,322,104 not kept in bf16 (the embedding's among them). A checkpoint's
// snapshot and the parameters' fp32 copies are in host memory, not the GPU's. With fp32
// activations (24.85 GiB, every token routed to an expert) and ZeRO-1 an H100 takes micro-batch 1
// from 64 ranks, an MI300X from 2; each the first power of two at which micro-batch 1 fits in
// 90 % of the device (and half as many do not).
TEST(TrainMemory, GpuPlanForZaya1Base) {
  const ModelConfig c = load_model_config(ZAYA_SOURCE_DIR "/configs/zaya1-base.json");
  GpuPlanRequest request;
  request.seq = 4096;
  const std::string one = format_gpu_memory_plan(c, request);
  EXPECT_NE(
      one.find("weights (bf16)                                       16.54 GiB       16.54 GiB"),
      std::string::npos)
      << one;  // 2 × 8,840,489,464 + 4 × 14,189,048 + 4 × 2^22 B = 16.5352 GiB
  EXPECT_NE(
      one.find("gradients (bf16, embedding fp32)                     18.52 GiB       18.52 GiB"),
      std::string::npos)
      << one;  // 2 × 8,840,489,464 + 4 × 551,322,104 B = 18.5205 GiB
  // 80 GB and 192 GB are 74.5 and 178.8 GiB (the built-in profiles, docs/sizing.md).
  const double gib = double(int64_t(1) << 30), h100 = 0.9 * int64_t(74.5 * gib),
               mi300x = 0.9 * int64_t(178.8 * gib);
  const int64_t runtime = int64_t(2) << 30;
  auto fits = [&](int world, double limit, MemoryOptions o) {
    return double(train_memory(c, 1, 4096, world, runtime, o).total()) <= limit;
  };
  const MemoryOptions built = request.options;
  EXPECT_TRUE(fits(64, h100, built) && !fits(32, h100, built));
  EXPECT_TRUE(fits(2, mi300x, built) && !fits(1, mi300x, built));
  EXPECT_NE(
      one.find("fewest ranks for micro-batch 1                              64               2"),
      std::string::npos)
      << one;
  // The snapshot (3 × 4 bytes × the range: every value of the flat layout at 1 rank) and the
  // two 16 MiB pinned chunks its copies go through are the host's; the host keeps no other copy
  // of the optimizer state, and of the parameters their weights alone.
  const TrainMemory m = train_memory(c, 1, 4096, 1, runtime, built);
  const int64_t flat = int64_t(ParamRegistry(c).total_floats());
  EXPECT_GE(flat, int64_t(8840489464));
  EXPECT_EQ(m.checkpoint, 0);
  EXPECT_EQ(m.host_snapshot, 12 * flat + 32 * 1024 * 1024);
  EXPECT_EQ(m.host_params, 4 * flat);
  EXPECT_EQ(m.host_total(), 16 * flat + 32 * 1024 * 1024);
  // fp32 gradients: weights, gradients and activations alone exceed an H100's 90 %.
  MemoryOptions fp32_gradients = built;
  fp32_gradients.gradients = 4;
  EXPECT_FALSE(fits(1 << 20, h100, fp32_gradients));
  // Full recompute keeps each stage's input and output rows (2 × 80 × 4096 × 2048 × 4 B = 5.0
  // GiB) and the materialised logits (4096 × 262,272 × 4 B = 4.0 GiB) of the 24.47 GiB: less
  // than half; selective keeps more than full and less than none.
  MemoryOptions full = built, selective = built;
  full.recompute = Recompute::kFull;
  selective.recompute = Recompute::kSelective;
  const int64_t lean = train_memory(c, 1, 4096, 16, runtime, full).activations;
  const int64_t some = train_memory(c, 1, 4096, 16, runtime, selective).activations;
  EXPECT_GT(lean, int64_t(9.0 * gib));
  EXPECT_LT(lean, train_memory(c, 1, 4096, 16, runtime, built).activations / 2);
  EXPECT_TRUE(lean < some && some < m.activations);
  // ZeRO-2 holds the embedding's fp32 gradient (262,272 × 2048 × 4 B = 2.0 GiB) and two stages':
  // more than the first, a fifth of ZeRO-1's at most; at one rank, ZeRO-1's.
  MemoryOptions zero2 = built;
  zero2.zero_stage = 2;
  const int64_t g2 = train_memory(c, 1, 4096, 8, runtime, zero2).gradients;
  EXPECT_GT(g2, int64_t(4) * 262272 * 2048);
  EXPECT_LT(g2, m.gradients / 5);
  EXPECT_EQ(train_memory(c, 1, 4096, 1, runtime, zero2).gradients,
            train_memory(c, 1, 4096, 1, runtime, built).gradients);
  // Issue 41's target: at 8 ranks an H100 fits micro-batch 2 and an MI300X 8 with 10 % free:
  // full recompute and ZeRO-2 in bf16 activations (or fp32); with the LM head in blocks, bf16
  // activations and selective recompute too (the materialised logits are 8 GiB at micro-batch
  // 2). Every option is built: nothing is marked otherwise.
  request.world = 8;
  const std::string node = format_gpu_memory_plan(c, request);
  EXPECT_NE(node.find("bf16        full       2       micro-batch 2   micro-batch 8"),
            std::string::npos)
      << node;
  EXPECT_EQ(node.find("not built"), std::string::npos) << node;
  MemoryOptions target = built;
  target.activations = 2, target.recompute = Recompute::kSelective, target.zero_stage = 2;
  target.lm_head_chunks = {1024, 32768};
  EXPECT_LE(double(train_memory(c, 2, 4096, 8, runtime, target).total()), h100);
  EXPECT_LE(double(train_memory(c, 8, 4096, 8, runtime, target).total()), mi300x);
  // bf16 storage keeps little more than half of fp32's selective activations.
  MemoryOptions fp32_target = target;
  fp32_target.activations = 4;
  const int64_t a16 = train_memory(c, 2, 4096, 8, runtime, target).activations;
  const int64_t a32 = train_memory(c, 2, 4096, 8, runtime, fp32_target).activations;
  EXPECT_LT(double(a16), 0.6 * double(a32));
  request.world = 1024;
  const std::string cluster = format_gpu_memory_plan(c, request);
  EXPECT_NE(cluster.find(
                "largest micro-batch with 10 % free               micro-batch 1   micro-batch 4"),
            std::string::npos)
      << cluster;
}

TEST(TrainMemory, FormatsBytes) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(3.0 * (1 << 30)), "3.00 GiB");
}

}  // namespace
}  // namespace zaya

// The batched decoder (infer/batch_decoder.h) on the CUDA backend: its state in device memory,
// every step through the backend's ops. A sequence's logits must be the same bits alone and in a
// batch of any size and slot order (as on the CPU, tests/unit/test_batch_decoder.cpp), and within
// the whole-model tolerance of the CPU decoder's, with the same routes, at every step.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "../unit/decoder_test_util.h"
#include "backend/cuda/cuda_backend.h"
#include "gpu_test_util.h"
#include "infer/batch_decoder.h"

namespace zaya {
namespace {

constexpr int kT = 24;      // positions per sequence
constexpr int kSteps = 12;  // decode steps after a prompt of 5

// Through the whole model's six stages: ten times the op tolerance (as test_gpu_model.cpp).
constexpr test::Tolerance kModelLogits{1e-4, 1e-4};

struct Decoded {
  std::vector<float> logits;                 // the followed sequence's, prefill and every step
  std::vector<std::vector<int32_t>> routes;  // its route at every MoE stage of every step
};

// Sequence `seq` (prompt 5) decoded for kSteps steps, sharing every step with `others` sequences
// (prompts of 2..8 tokens) that join before it (slot last) or after it (slot first).
Decoded decode(ZayaModel& model, const std::vector<int32_t>& seq, int others, bool first) {
  const int V = int(model.config().vocab_size);
  DecoderLimits lim;
  lim.max_sequences = others + 1;
  lim.capacity = kT;
  lim.block_size = 4;
  BatchDecoder dec(model, lim);
  std::vector<std::vector<int32_t>> other;
  std::vector<int> other_ids;
  for (int i = 0; i < others; ++i) other.push_back(test::random_tokens(kT, V, 50u + uint32_t(i)));
  const auto add_others = [&] {
    for (int i = 0; i < others; ++i)
      other_ids.push_back(dec.add(std::span(other[size_t(i)]).first(size_t(2 + 3 * i % 7)), kT));
  };
  if (!first) add_others();
  const int id = dec.add(std::span(seq).first(5), kT);
  if (first) add_others();
  Decoded d;
  d.logits.assign(dec.logits(id).begin(), dec.logits(id).end());
  for (int step = 0; step < kSteps; ++step) {
    std::vector<int> ids = {id};
    std::vector<int32_t> next = {seq[size_t(dec.length(id))]};
    for (int i = 0; i < others; ++i) {
      const int o = other_ids[size_t(i)];
      ids.insert(first ? ids.end() : ids.begin(), o);
      next.insert(first ? next.end() : next.begin(), other[size_t(i)][size_t(dec.length(o))]);
    }
    dec.step(ids, next);
    d.logits.insert(d.logits.end(), dec.logits(id).begin(), dec.logits(id).end());
    const size_t row = first ? 0 : ids.size() - 1;
    for (const std::vector<int32_t>& stage : dec.last_routes()) d.routes.push_back({stage[row]});
  }
  return d;
}

TEST(GpuDecoder, BatchIndependentAndMatchesTheCpu) {
  ZayaModel cpu_model = test::perturbed_tiny(7), gpu_model = test::perturbed_tiny(7);
  gpu_model.set_backend(cuda_backend());
  const std::vector<int32_t> seq = test::random_tokens(kT, int(cpu_model.config().vocab_size), 21);
  const Decoded want = decode(cpu_model, seq, 0, true);
  const Decoded alone = decode(gpu_model, seq, 0, true);
  EXPECT_TRUE(test::elementwise_close(alone.logits, want.logits, kModelLogits));
  EXPECT_EQ(alone.routes, want.routes);
  for (const auto& [others, first] : {std::pair{1, true}, {3, false}}) {
    const Decoded batched = decode(gpu_model, seq, others, first);
    ASSERT_EQ(batched.logits.size(), alone.logits.size());
    EXPECT_EQ(std::memcmp(batched.logits.data(), alone.logits.data(),
                          sizeof(float) * alone.logits.size()),
              0)
        << others << " other sequences";
    EXPECT_EQ(batched.routes, alone.routes);
  }
}

}  // namespace
}  // namespace zaya

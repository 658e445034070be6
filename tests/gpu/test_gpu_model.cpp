// The whole tiny model on the CUDA backend against the CPU backend, the oracle: the same weights
// and tokens, then every logit within 1e-5, identical routes at every MoE stage, and every
// gradient element within 1e-4 (of itself, or of its tensor's RMS; gpu_compare.h). Once with
// materialised logits, once with the LM head and the loss in blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "../unit/test_util.h"
#include "backend/cuda/cuda_backend.h"
#include "gpu_test_util.h"
#include "model/zaya_model.h"

namespace zaya {
namespace {

struct StepResult {
  float loss = 0;
  std::vector<float> logits, grads;
  std::vector<std::vector<int32_t>> routes;
};

StepResult run_step(ZayaModel& model, const std::vector<int32_t>& tokens, int B, int S,
                    bool chunked) {
  const std::vector<int32_t> targets = ZayaModel::shifted_targets(tokens, B, S);
  StepResult r;
  if (chunked) model.set_lm_head_chunks(cpu::LmHeadChunks{4, 40});
  r.loss = model.forward(tokens, targets, B, S);
  if (!chunked) {
    const std::span<const float> l = model.logits();
    r.logits.assign(l.begin(), l.end());
  }
  for (int i = 1; i < int(model.config().num_stages); i += 2) {
    const std::span<const int32_t> route = model.routes(i);
    r.routes.emplace_back(route.begin(), route.end());
  }
  model.params().zero_grads();
  model.backward(1.0f);
  r.grads.assign(model.params().grads(), model.params().grads() + model.params().size());
  return r;
}

// Gradients come through the whole model's backward, six stages of the fp32 ops whose differences
// kTolerance bounds one op at a time: ten times the op tolerance, element by element, with the
// floor at 1e-4 of each tensor's RMS.
constexpr test::Tolerance kModelGradients{1e-4, 1e-4};

TEST(GpuModel, TinyModelMatchesTheCpu) {
  const ModelConfig config = test::tiny_config();
  const int B = 2, S = 13;
  std::vector<int32_t> tokens(size_t(B) * S);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = int32_t((i * 37 + 11) % size_t(config.vocab_size));
  for (const bool chunked : {false, true}) {
    ZayaModel cpu_model(config), gpu_model(config);
    test::randomise_weights(cpu_model.params(), 5, 6);
    std::copy_n(cpu_model.params().weights(), cpu_model.params().size(),
                gpu_model.params().weights());
    gpu_model.set_backend(cuda_backend());
    const StepResult want = run_step(cpu_model, tokens, B, S, chunked);
    const StepResult got = run_step(gpu_model, tokens, B, S, chunked);
    EXPECT_NEAR(got.loss, want.loss, 1e-5 * std::fabs(want.loss)) << "chunked " << chunked;
    if (!chunked) {
      EXPECT_TRUE(test::elementwise_close(got.logits, want.logits, test::kTolerance));
    }
    EXPECT_EQ(got.routes, want.routes) << "chunked " << chunked;
    for (const ParamSpec& p : cpu_model.params().registry().specs()) {
      if (p.group == OptimGroup::Buffer) continue;
      const std::vector<float> g(got.grads.begin() + p.offset,
                                 got.grads.begin() + p.offset + p.numel);
      const std::vector<float> w(want.grads.begin() + p.offset,
                                 want.grads.begin() + p.offset + p.numel);
      EXPECT_TRUE(test::elementwise_close(g, w, kModelGradients))
          << p.name << (chunked ? " (chunked)" : "");
    }
  }
}

}  // namespace
}  // namespace zaya

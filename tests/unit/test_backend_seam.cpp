// The model through the backend seam (backend/backend.h) on a backend that keeps its own memory.
// The backend here computes with the CPU ops, but says it has memory of its own, so the model
// takes the path a GPU takes: copies of the weights in the backend's memory, the arena there,
// the tokens, targets and RoPE rows copied over, the host's gradients copied there, added into and
// copied back, logits and routes copied back. A step must give bitwise the loss, logits, routes
// and gradients of the plain CPU path; a missing copy (weights, gradients) shows up as a
// difference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/device_select.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "model/zaya_model.h"
#include "test_util.h"

namespace zaya {
namespace {

struct StepBits {
  float loss = 0;
  std::vector<float> logits, grads;
  std::vector<std::vector<int32_t>> routes;
};

StepBits step(ZayaModel& m, const std::vector<int32_t>& tokens, int B, int S, bool chunked,
              bool recompute) {
  m.set_lm_head_chunks(chunked ? cpu::LmHeadChunks{5, 30} : cpu::LmHeadChunks{});
  m.set_recompute(recompute);
  StepBits r;
  r.loss = m.forward(tokens, ZayaModel::shifted_targets(tokens, B, S), B, S);
  if (!chunked) {
    const std::span<const float> l = m.logits();
    r.logits.assign(l.begin(), l.end());
  }
  for (int i = 1; i < int(m.config().num_stages); i += 2) {
    const std::span<const int32_t> route = m.routes(i);
    r.routes.emplace_back(route.begin(), route.end());
  }
  m.params().zero_grads();
  int64_t reported = -1;
  m.set_gradients_final([&](int64_t from) { reported = from; });
  m.backward(0.5f);
  m.set_gradients_final(nullptr);
  EXPECT_EQ(reported, 0) << "the last report is offset 0, after the gradients are on the host";
  r.grads.assign(m.params().grads(), m.params().grads() + m.params().size());
  return r;
}

TEST(BackendSeam, SeparateMemoryGivesTheCpuPathsBits) {
  const ModelConfig c = test::tiny_config();
  const Backend& separate = cpu_as_device_backend();
  const int B = 2, S = 11;
  std::vector<int32_t> tokens(size_t(B) * S);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 29 + 3) % c.vocab_size);
  for (const bool chunked : {false, true})
    for (const bool recompute : {false, true}) {
      ZayaModel host(c), other(c);
      test::randomise_weights(host.params(), 7, 8);
      std::copy_n(host.params().weights(), host.params().size(), other.params().weights());
      other.set_backend(separate);
      const StepBits want = step(host, tokens, B, S, chunked, recompute);
      const StepBits got = step(other, tokens, B, S, chunked, recompute);
      const std::string what =
          std::string(chunked ? "chunked" : "materialised") + (recompute ? ", recompute" : "");
      EXPECT_EQ(got.loss, want.loss) << what;
      EXPECT_EQ(got.logits, want.logits) << what;
      EXPECT_EQ(got.routes, want.routes) << what;
      EXPECT_EQ(got.grads, want.grads) << what;
    }
}

// Gradient accumulation over micro-batches: the second backward adds into the first's gradients
// in the host path's order (a device share computed from zero and added at the end would round
// differently, which this catches).
TEST(BackendSeam, AccumulatedMicroBatchesGiveTheCpuPathsBits) {
  const ModelConfig c = test::tiny_config();
  const int B = 1, S = 13;
  ZayaModel host(c), other(c);
  test::randomise_weights(host.params(), 3, 4);
  std::copy_n(host.params().weights(), host.params().size(), other.params().weights());
  other.set_backend(cpu_as_device_backend());
  for (ZayaModel* m : {&host, &other}) {
    m->params().zero_grads();
    for (int micro = 0; micro < 3; ++micro) {
      std::vector<int32_t> tokens(size_t(B) * S);
      for (size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = int32_t((i * 17 + 5 + 41 * micro) % c.vocab_size);
      m->forward(tokens, ZayaModel::shifted_targets(tokens, B, S), B, S);
      m->backward(1.0f / 3);
    }
  }
  const std::vector<float> want(host.params().grads(),
                                host.params().grads() + host.params().size());
  const std::vector<float> got(other.params().grads(),
                               other.params().grads() + other.params().size());
  EXPECT_EQ(got, want);
}

// Every copy to the host is a GPU synchronisation, so the step makes only the ones it needs: the
// experts' row counts once per MoE stage in the forward, the gradients once in the backward, and
// what the caller asks for (routes). The counts come from the config, not from the model.
TEST(BackendSeam, HostReadsAreTheExpertCountsAndTheGradients) {
  const ModelConfig c = test::tiny_config();
  const Backend& be = cpu_as_device_backend();
  const int B = 2, S = 9;
  std::vector<int32_t> tokens(size_t(B) * S);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 7 + 1) % c.vocab_size);
  ZayaModel m(c);
  test::randomise_weights(m.params(), 9, 10);
  m.set_backend(be);
  const int64_t moe_stages = c.num_moe_stages();
  ASSERT_GE(moe_stages, 2);
  int64_t before = be.host_reads(), bytes_before = be.host_read_bytes();
  m.forward(tokens, ZayaModel::shifted_targets(tokens, B, S), B, S);
  EXPECT_EQ(be.host_reads() - before, moe_stages) << "one read of the expert counts per stage";
  EXPECT_EQ(be.host_read_bytes() - bytes_before,
            moe_stages * int64_t(sizeof(int32_t)) * (c.num_experts + 2))
      << "the offsets of every route (experts and skip) and the end";
  before = be.host_reads();
  (void)m.routes(1);
  EXPECT_EQ(be.host_reads() - before, 1);
  before = be.host_reads();
  m.params().zero_grads();
  m.backward(1.0f);
  EXPECT_EQ(be.host_reads() - before, 1) << "the gradients, once";
}

TEST(BackendSeam, ContextParallelismIsRefusedOffTheHost) {
  const ModelConfig c = test::tiny_config();
  const Backend& separate = cpu_as_device_backend();
  ZayaModel m(c);
  m.set_backend(separate);
  auto local = dist::make_communicator();
  m.set_context_group(local.get());
  std::vector<int32_t> tokens(8, 1);
  try {
    m.forward(tokens, {}, 1, 8);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context parallelism runs on the CPU backend only"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace zaya

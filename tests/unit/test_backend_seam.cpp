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
#include "optim/optimizer.h"
#include "test_util.h"

namespace zaya {
namespace {

struct StepBits {
  float loss = 0;
  std::vector<float> logits, grads;
  std::vector<std::vector<int32_t>> routes;
};

StepBits step(ZayaModel& m, const std::vector<int32_t>& tokens, int B, int S, bool chunked,
              Recompute recompute) {
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
    for (const Recompute recompute : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
      ZayaModel host(c), other(c);
      test::randomise_weights(host.params(), 7, 8);
      std::copy_n(host.params().weights(), host.params().size(), other.params().weights());
      other.set_backend(separate);
      const StepBits want = step(host, tokens, B, S, chunked, recompute);
      const StepBits got = step(other, tokens, B, S, chunked, recompute);
      const std::string what = std::string(chunked ? "chunked" : "materialised") + ", recompute " +
                               recompute_name(recompute);
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

// Training with the parameters resident on the backend (ParameterPlacement::set_resident) and the
// optimizer there too: three steps of two micro-batches must give the host path's losses and
// weights bitwise, and the only copies to the host are the experts' row counts (the gradients
// and weights stay). Weights changed on the host after set_resident must not reach the backend
// until push_weights: the forward reads the backend's own copy.
TEST(BackendSeam, ResidentParametersAndOptimizerGiveTheHostPathsBits) {
  const ModelConfig c = test::tiny_config();
  const Backend& be = cpu_as_device_backend();
  const int B = 1, S = 12;
  OptimConfig oc;
  oc.grad_clip = 0.05;  // the tiny model's norm is above it: the clip runs on the backend too
  ZayaModel host(c), other(c);
  test::randomise_weights(host.params(), 5, 6);
  std::copy_n(host.params().weights(), host.params().size(), other.params().weights());
  other.set_backend(be);
  other.placement().set_resident(true);
  ASSERT_TRUE(other.placement().resident());
  Optimizer host_opt(host.params().registry(), oc),
      other_opt(other.params().registry(), oc, nullptr, &be);
  std::vector<float> host_losses, other_losses;
  int64_t reads = 0;
  for (int step = 0; step < 3; ++step)
    for (ZayaModel* m : {&host, &other}) {
      const bool on_host = m == &host;
      const int64_t before = be.host_reads();
      m->placement().zero_grads();
      float loss = 0;
      for (int micro = 0; micro < 2; ++micro) {
        std::vector<int32_t> tokens(size_t(B) * S);
        for (size_t i = 0; i < tokens.size(); ++i)
          tokens[i] = int32_t((i * 13 + 7 * micro + 31 * step) % c.vocab_size);
        loss += m->forward(tokens, ZayaModel::shifted_targets(tokens, B, S), B, S);
        m->backward(0.5f);
      }
      (on_host ? host_losses : other_losses).push_back(loss);
      const float norm = on_host ? host_opt.step(host.params(), 1e-2)
                                 : other_opt.step(other.placement().backend_weights(),
                                                  other.placement().backend_grads(), 1e-2);
      ASSERT_GT(norm, oc.grad_clip);
      if (!on_host) reads += be.host_reads() - before;
    }
  EXPECT_EQ(other_losses, host_losses);
  EXPECT_EQ(reads, 3 * 2 * c.num_moe_stages()) << "only the expert counts cross to the host";
  other.placement().pull_weights();
  EXPECT_TRUE(std::equal(host.params().weights(), host.params().weights() + host.params().size(),
                         other.params().weights()));
  // The backend's copy is the one the forward reads: a host change shows only once pushed.
  std::vector<int32_t> tokens(size_t(B) * S, 3);
  const std::vector<int32_t> targets = ZayaModel::shifted_targets(tokens, B, S);
  const float before = other.forward(tokens, targets, B, S);
  // (Halved, not zeroed: zero weights make CCA's L2 norms 0/0.)
  for (size_t i = 0; i < other.params().size(); ++i) other.params().weights()[i] *= 0.5f;
  EXPECT_EQ(other.forward(tokens, targets, B, S), before);
  other.placement().push_weights();
  EXPECT_NE(other.forward(tokens, targets, B, S), before);
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

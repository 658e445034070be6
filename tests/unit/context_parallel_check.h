// Context parallelism against whole sequences: the same model, tokens and targets, once on whole
// sequences and once spread over a context group (every rank of `group` calls this together).
// Returns the relative error of the loss and the worst per-tensor relative gradient error,
// after summing the group's gradient shares. Shared by the one-rank test (tests/unit) and the
// 2- and 3-rank ones (tests/comm).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "decoder_test_util.h"
#include "dist/communicator.h"
#include "model/context_shard.h"
#include "model/zaya_model.h"

namespace zaya::test {

struct ContextParallelErrors {
  double loss = 0;       // |sharded − whole| / |whole|
  double grad = 0;       // max over tensors of max|Δ| / max|whole|
  std::string worst;     // the tensor of `grad`
  float whole_loss = 0;  // for the messages
};

inline ContextParallelErrors check_context_parallel(dist::Communicator& group, int B, int S,
                                                    uint64_t seed,
                                                    const cpu::LmHeadChunks& chunks = {},
                                                    Recompute recompute = Recompute::kNone) {
  ZayaModel model = perturbed_tiny(seed);  // the same weights on every rank
  model.set_lm_head_chunks(chunks);
  const int V = int(model.config().vocab_size);
  const std::vector<int32_t> tokens = random_tokens(B * S, V, uint32_t(seed) * 7 + 1);
  const std::vector<int32_t> targets = ZayaModel::shifted_targets(tokens, B, S);

  const size_t P = model.params().size();
  model.params().zero_grads();
  const float whole = model.forward(tokens, targets, B, S);
  model.backward();
  const std::vector<float> want(model.params().grads(), model.params().grads() + P);

  model.set_context_group(&group);  // each rank computes its chunks of the same sequences
  model.set_recompute(recompute);   // the whole-sequence run is without
  model.params().zero_grads();
  const float sharded = model.forward(tokens, targets, B, S);
  model.backward();
  model.set_context_group(nullptr);
  std::vector<float> got(P);
  group.all_reduce(model.params().grads(), got.data(), P, DType::F32, dist::ReduceOp::Sum);

  ContextParallelErrors e;
  e.whole_loss = whole;
  e.loss = std::abs(double(sharded) - double(whole)) / std::abs(double(whole));
  for (const ParamSpec& spec : model.params().registry().specs()) {
    double diff = 0, scale = 0;
    for (int64_t i = 0; i < spec.numel; ++i) {
      const size_t j = spec.offset + size_t(i);
      diff = std::max(diff, std::abs(double(got[j]) - double(want[j])));
      scale = std::max(scale, std::abs(double(want[j])));
    }
    const double rel = scale > 0 ? diff / scale : diff;
    if (rel > e.grad) {
      e.grad = rel;
      e.worst = spec.name;
    }
  }
  return e;
}

}  // namespace zaya::test

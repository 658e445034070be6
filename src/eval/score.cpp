#include "eval/score.h"

#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"

namespace zaya {

ScoreResult score_tokens(ZayaModel& model, const TokenBatch& batch, bool with_grads) {
  const int B = batch.batch, S = batch.seq;
  ZAYA_CHECK(B >= 1 && S >= 2, "score: every sequence needs at least 2 tokens (the labels are ",
             "the inputs shifted by one), got ", B, " sequence(s) of ", S);
  const int64_t V = model.config().vocab_size;
  const std::vector<int32_t> targets = ZayaModel::shifted_targets(batch.tokens, B, S);
  ScoreResult r;
  r.loss = model.forward(batch.tokens, targets, B, S);
  // Copied now: backward() reuses the logits buffer for their gradient.
  r.logits = Tensor({B, S, V}, DType::F32);
  std::memcpy(r.logits.raw(), model.logits().data(), r.logits.nbytes());

  // log_softmax at the next token, in double so that the reported values do not depend on the
  // summation order of a float loop.
  r.log_probs = Tensor({B, S - 1}, DType::F32);
  const float* logits = r.logits.data<float>();
  float* lp = r.log_probs.data<float>();
#pragma omp parallel for schedule(static)
  for (int row = 0; row < B * (S - 1); ++row) {
    const int b = row / (S - 1), s = row % (S - 1);
    const float* x = logits + (int64_t(b) * S + s) * V;
    double mx = x[0];
    for (int64_t v = 1; v < V; ++v) mx = std::max(mx, double(x[v]));
    double sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(double(x[v]) - mx);
    const int32_t next = batch.tokens[size_t(b) * S + s + 1];
    lp[row] = float(double(x[next]) - mx - std::log(sum));
  }

  if (with_grads) {
    ParamStore& params = model.params();
    params.zero_grads();
    model.backward(1.0f);
    for (const ParamSpec& spec : params.registry().specs())
      if (spec.trainable())
        r.grads.emplace_back("grad." + spec.name, params.grad(spec.name).clone());
  }
  return r;
}

void write_score_file(const std::string& path, const ScoreResult& result) {
  Tensor loss({}, DType::F32);
  loss.data<float>()[0] = result.loss;
  std::vector<std::pair<std::string, Tensor>> out = {
      {"logits", result.logits}, {"log_probs", result.log_probs}, {"loss", loss}};
  out.insert(out.end(), result.grads.begin(), result.grads.end());
  write_safetensors(path, out, {{"format", "zaya-score"}});
}

std::string score_summary_json(const TokenBatch& batch, const ScoreResult& result) {
  return nlohmann::json{{"sequences", batch.batch},
                        {"tokens", int64_t(batch.batch) * batch.seq},
                        {"predicted", int64_t(batch.batch) * (batch.seq - 1)},
                        {"loss", result.loss},
                        {"perplexity", std::exp(double(result.loss))}}
      .dump();
}

}  // namespace zaya

// Scoring token sequences with a model: logits, the log-probability of each next token, the mean
// next-token loss as Hugging Face computes it (labels = inputs shifted by one, the last position
// of each sequence unlabelled) and, on request, that loss's gradient for every trained parameter.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "eval/token_file.h"
#include "model/zaya_model.h"

namespace zaya {

struct ScoreResult {
  Tensor logits;     // F32 [B, S, V]
  Tensor log_probs;  // F32 [B, S-1]: log p(tokens[b, s+1] | tokens[b, 0..s])
  float loss = 0;    // mean of -log_probs, as the model's forward computes it
  std::vector<std::pair<std::string, Tensor>> grads;  // "grad.<name>", registry order
};

// Needs S >= 2 (a sequence of one token has no label). With `with_grads`, the gradients of the
// mean loss w.r.t. every parameter but the (gradient-free) balancing biases.
ScoreResult score_tokens(ZayaModel& model, const TokenBatch& batch, bool with_grads);

// logits, log_probs, loss [1] and the grads, in one safetensors file.
void write_score_file(const std::string& path, const ScoreResult& result);

// One JSON line: sequences, tokens, predicted (labelled positions), loss, perplexity.
std::string score_summary_json(const TokenBatch& batch, const ScoreResult& result);

}  // namespace zaya

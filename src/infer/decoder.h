// Decoder: one sequence of a ZayaModel, prefilled with a prompt in one forward and then decoded a
// token at a time against the CCA caches (model/cca_decode.h). The MoE stages, residual merges and
// norms keep nothing between tokens (the router state flows across stages within a token only),
// so the caches of the CCA stages are the whole decode state.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/arena.h"
#include "model/cca_decode.h"
#include "model/zaya_model.h"

namespace zaya {

class Decoder {
 public:
  // `capacity` positions (prompt + generated); 0: the model's max_seq_len. The model must outlive
  // the decoder and keep its weights; its forward() activations are overwritten by prefill().
  explicit Decoder(ZayaModel& model, int64_t capacity = 0);

  // Runs the prompt (1..capacity tokens) through one forward and fills every stage's cache;
  // returns the logits [V] for the token after the prompt. Starts a new sequence.
  std::span<const float> prefill(std::span<const int32_t> prompt);
  // Appends `token` at position length() and returns the logits [V] for the next one.
  std::span<const float> step(int32_t token);

  int64_t length() const { return caches_.empty() ? length_ : caches_.front().length; }
  int64_t capacity() const { return capacity_; }
  // Cache bytes per position of context: CCA's compressed keys and values over all attention
  // stages, and what multi-head attention over the hidden size would keep instead (2·E per stage).
  static int64_t cache_bytes_per_token(const ModelConfig& c);
  static int64_t mha_cache_bytes_per_token(const ModelConfig& c);
  // Bytes held now: every stage's key/value buffers at capacity plus the constant state.
  int64_t cache_bytes_allocated() const;

 private:
  ZayaModel& model_;
  int64_t capacity_ = 0;
  int64_t length_ = 0;                      // models without attention stages
  std::vector<CcaCache> caches_;            // one per attention stage
  std::vector<float> rope_cos_, rope_sin_;  // [capacity, rot/2]
  std::vector<float> logits_;
  Arena arena_;
};

}  // namespace zaya

// Decoder: one sequence of a ZayaModel, prefilled with a prompt in one forward and then decoded a
// token at a time against the CCA caches. It is a BatchDecoder of one slot (batch_decoder.h), so a
// sequence decodes to the same bits here as in a batch of any size.
#pragma once

#include <cstdint>
#include <span>

#include "infer/batch_decoder.h"

namespace zaya {

class Decoder {
 public:
  // `capacity` positions (prompt + generated); 0: the model's max_seq_len. The model must outlive
  // the decoder and keep its weights; its forward() activations are overwritten by prefill().
  // `comm` (optional) shards the cache over its ranks (tree attention); every rank calls the same.
  explicit Decoder(ZayaModel& model, int64_t capacity = 0, dist::Communicator* comm = nullptr);

  // Runs the prompt (1..capacity tokens) through one forward and fills every stage's cache;
  // returns the logits [V] for the token after the prompt. Starts a new sequence.
  std::span<const float> prefill(std::span<const int32_t> prompt);
  // Appends `token` at position length() and returns the logits [V] for the next one.
  std::span<const float> step(int32_t token);

  int64_t length() const { return id_ < 0 ? 0 : batch_.length(id_); }
  int64_t capacity() const { return batch_.capacity(); }
  static int64_t cache_bytes_per_token(const ModelConfig& c) {
    return BatchDecoder::cache_bytes_per_token(c);
  }
  static int64_t mha_cache_bytes_per_token(const ModelConfig& c) {
    return BatchDecoder::mha_cache_bytes_per_token(c);
  }
  // Bytes held now: the cache blocks at capacity plus the constant state.
  int64_t cache_bytes_allocated() const { return batch_.cache_bytes_allocated(); }

 private:
  BatchDecoder batch_;
  int id_ = -1;
};

}  // namespace zaya

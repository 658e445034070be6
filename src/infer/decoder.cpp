#include "infer/decoder.h"

#include "core/error.h"

namespace zaya {

namespace {
DecoderLimits one_sequence(int64_t capacity) {
  DecoderLimits l;
  l.max_sequences = 1;
  l.capacity = capacity;
  return l;
}
}  // namespace

Decoder::Decoder(ZayaModel& model, int64_t capacity, dist::Communicator* comm)
    : batch_(model, one_sequence(capacity), comm) {}

std::span<const float> Decoder::prefill(std::span<const int32_t> prompt) {
  if (id_ >= 0) batch_.remove(id_);
  id_ = -1;
  id_ = batch_.add(prompt);
  return batch_.logits(id_);
}

std::span<const float> Decoder::step(int32_t token) {
  ZAYA_CHECK(id_ >= 0, "decode: prefill() a prompt first");
  ZAYA_CHECK(batch_.length(id_) < batch_.capacity(), "decode: the sequence is full (",
             batch_.capacity(), " positions)");
  const int id = id_;
  batch_.step(std::span<const int>(&id, 1), std::span<const int32_t>(&token, 1));
  return batch_.logits(id_);
}

}  // namespace zaya

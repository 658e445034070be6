// A server's tokenizer, used by one thread at a time: Tokenizer is not thread-safe (it caches
// encodings), and the HTTP threads and the engine thread all use it. Every use goes through
// use(), which holds the lock for the call.
#pragma once

#include <cstdint>
#include <mutex>

#include "tokenizer/tokenizer.h"

namespace zaya::serve {

class TokenizerService {
 public:
  explicit TokenizerService(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  template <class Fn>
  auto use(Fn&& fn) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return fn(tokenizer_);
  }
  // What never changes, read without the lock.
  int32_t vocab_size() const { return vocab_size_; }
  int32_t eos() const { return eos_; }

 private:
  const Tokenizer& tokenizer_;
  mutable std::mutex mutex_;
  int32_t vocab_size_ = tokenizer_.vocab_size();
  int32_t eos_ = tokenizer_.end_of_text_id().value_or(-1);
};

}  // namespace zaya::serve

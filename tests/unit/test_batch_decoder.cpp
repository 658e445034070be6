// Batched decoding: sequences of ragged lengths joining and leaving between steps must each get
// what a full forward over their own tokens gives, the same bits alone as in any batch, and the
// cache blocks must be reserved, reused and refused as the limits say.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "decoder_test_util.h"
#include "infer/batch_decoder.h"
#include "infer/decoder.h"

namespace zaya {
namespace {

using test::perturbed_tiny;
using test::random_tokens;
using test::relative_error;

constexpr int kT = 64;  // tokens per test sequence

struct Stream {
  std::vector<int32_t> tokens;
  std::vector<float> full;  // [kT, V] logits of one forward over all tokens
  int prompt = 0;
  int id = -1;
};

Stream make_stream(ZayaModel& model, uint32_t seed, int prompt) {
  Stream s;
  s.tokens = random_tokens(kT, int(model.config().vocab_size), seed);
  model.forward(s.tokens, {}, 1, kT);
  s.full.assign(model.logits().begin(), model.logits().end());
  s.prompt = prompt;
  return s;
}

TEST(BatchDecoder, RaggedSequencesJoiningAndLeavingMatchTheFullForward) {
  ZayaModel model = perturbed_tiny(4);
  const ModelConfig& c = model.config();
  const int V = int(c.vocab_size);
  // Prompts of 1, 3, 17, 2 and 40 tokens; the 4th joins at step 5, the 5th when the 1st leaves.
  std::vector<Stream> s;
  for (const auto& [seed, prompt] : {std::pair{11u, 1}, {12u, 3}, {13u, 17}, {14u, 2}, {15u, 40}})
    s.push_back(make_stream(model, seed, prompt));
  DecoderLimits lim;
  lim.max_sequences = 4;
  lim.capacity = kT;
  lim.block_size = 8;
  BatchDecoder dec(model, lim);
  const auto check = [&](Stream& st, const char* when) {
    const int64_t t = dec.length(st.id) - 1;  // the logits are for the token after position t
    const std::span<const float> want(st.full.data() + size_t(t) * V, size_t(V));
    ASSERT_LE(relative_error(dec.logits(st.id), want), 1e-5)
        << when << ": sequence with prompt " << st.prompt << ", position " << t;
  };
  const auto join = [&](Stream& st) {
    st.id = dec.add(std::span(st.tokens).first(size_t(st.prompt)), kT);
    check(st, "after prefill");
  };
  for (int i = 0; i < 3; ++i) join(s[size_t(i)]);
  std::vector<std::set<int32_t>> routes(size_t(c.num_stages / 2));
  for (int step = 0; dec.active() > 0; ++step) {
    if (step == 5) join(s[3]);
    if (step == 20) {
      dec.remove(s[0].id);
      s[0].id = -1;
      join(s[4]);  // takes the freed slot and blocks
    }
    std::vector<int> ids;
    std::vector<int32_t> next;
    for (Stream& st : s)
      if (st.id >= 0) {
        ids.push_back(st.id);
        next.push_back(st.tokens[size_t(dec.length(st.id))]);
      }
    dec.step(ids, next);
    for (size_t i = 0; i < routes.size(); ++i)
      for (const int32_t r : dec.last_routes()[i]) routes[i].insert(r);
    for (Stream& st : s) {
      if (st.id < 0) continue;
      check(st, "after a step");
      if (dec.length(st.id) == kT) {
        dec.remove(st.id);
        st.id = -1;
        st.prompt = -1;  // done: never joins again
      }
    }
    if (step == 5) {
      ASSERT_EQ(dec.active(), 4);
    }
  }
  // The batched steps went through every expert and the skip route of every MoE stage.
  for (size_t i = 0; i < routes.size(); ++i)
    EXPECT_EQ(routes[i].size(), size_t(c.num_routes())) << "MoE stage " << 2 * i + 1;
  EXPECT_EQ(dec.pool().free_blocks(), dec.pool().total_blocks());
}

// Logits of `steps` decode steps of stream `st` (prompt 5) as raw bits, with `others` other
// sequences (ragged, some joining later) sharing every step; `st` takes slot `slot_first` or last.
std::vector<float> decode_bits(ZayaModel& model, const Stream& st, int others, bool slot_first) {
  DecoderLimits lim;
  lim.max_sequences = others + 1;
  lim.capacity = kT;
  BatchDecoder dec(model, lim);
  std::vector<Stream> other;
  for (int i = 0; i < others; ++i) {
    other.push_back(make_stream(model, 100u + uint32_t(i), 2 + (7 * i) % 40));
  }
  const auto add_others = [&] {
    for (Stream& o : other) o.id = dec.add(std::span(o.tokens).first(size_t(o.prompt)), kT);
  };
  if (!slot_first) add_others();
  const int id = dec.add(std::span(st.tokens).first(5), kT);
  if (slot_first) add_others();
  std::vector<float> bits(dec.logits(id).begin(), dec.logits(id).end());
  for (int step = 0; step < 30; ++step) {
    std::vector<int> ids = {id};
    std::vector<int32_t> next = {st.tokens[size_t(dec.length(id))]};
    for (Stream& o : other)
      if (dec.length(o.id) < kT - 1) {
        ids.insert(slot_first ? ids.end() : ids.begin(), o.id);
        next.insert(slot_first ? next.end() : next.begin(), o.tokens[size_t(dec.length(o.id))]);
      }
    dec.step(ids, next);
    bits.insert(bits.end(), dec.logits(id).begin(), dec.logits(id).end());
  }
  return bits;
}

TEST(BatchDecoder, ASequenceDecodesToTheSameBitsAloneAndInAnyBatch) {
  ZayaModel model = perturbed_tiny(7);
  const Stream st = make_stream(model, 21, 5);
  const std::vector<float> alone = decode_bits(model, st, 0, true);
  for (const auto& [others, first] : {std::pair{1, true}, {3, false}, {7, true}, {15, false}}) {
    const std::vector<float> batched = decode_bits(model, st, others, first);
    ASSERT_EQ(batched.size(), alone.size());
    EXPECT_EQ(std::memcmp(batched.data(), alone.data(), sizeof(float) * alone.size()), 0)
        << others << " other sequences";
  }
  // The one-sequence Decoder is the same decoder.
  Decoder one(model, kT);
  std::vector<float> bits;
  std::span<const float> l = one.prefill(std::span(st.tokens).first(5));
  bits.insert(bits.end(), l.begin(), l.end());
  for (int step = 0; step < 30; ++step) {
    l = one.step(st.tokens[size_t(one.length())]);
    bits.insert(bits.end(), l.begin(), l.end());
  }
  EXPECT_EQ(std::memcmp(bits.data(), alone.data(), sizeof(float) * alone.size()), 0);
}

TEST(BatchDecoder, BlocksAreReservedReusedAndRefused) {
  ZayaModel model = perturbed_tiny(2);
  DecoderLimits lim;
  lim.max_sequences = 3;
  lim.capacity = 40;
  lim.block_size = 16;
  lim.cache_blocks = 5;  // fewer than 3 full sequences (3 blocks each)
  BatchDecoder dec(model, lim);
  EXPECT_EQ(dec.pool().total_blocks(), 5);
  const std::vector<int32_t> prompt(4, 1);
  EXPECT_TRUE(dec.can_add(40));
  const int a = dec.add(prompt, 40);  // 3 blocks
  EXPECT_EQ(dec.pool().free_blocks(), 2);
  EXPECT_FALSE(dec.can_add(33));  // would need 3
  EXPECT_THROW(dec.add(prompt, 33), Error);
  EXPECT_TRUE(dec.can_add(32));
  const int b = dec.add(prompt, 17);  // 2 blocks
  EXPECT_EQ(dec.pool().free_blocks(), 0);
  EXPECT_FALSE(dec.can_add(1));
  EXPECT_THROW(dec.add(prompt, 0), Error);  // capacity 40: 3 blocks, none free
  // A sequence may not outgrow what it reserved.
  for (int i = 0; i < 13; ++i) dec.step(std::vector<int>{b}, std::vector<int32_t>{2});
  EXPECT_EQ(dec.length(b), 17);
  EXPECT_THROW(dec.step(std::vector<int>{b}, std::vector<int32_t>{2}), Error);
  EXPECT_THROW(dec.step(std::vector<int>{a, a}, std::vector<int32_t>{2, 2}), Error);
  EXPECT_THROW(dec.step(std::vector<int>{a}, std::vector<int32_t>{int32_t(1000)}), Error);
  dec.remove(a);
  EXPECT_THROW(dec.length(a), Error);
  EXPECT_EQ(dec.pool().free_blocks(), 3);
  const int c = dec.add(prompt, 40);  // the freed blocks again
  EXPECT_EQ(dec.pool().free_blocks(), 0);
  dec.remove(c);
  dec.remove(b);
  EXPECT_EQ(dec.pool().free_blocks(), 5);
  // Limits named: capacity past the model, a prompt longer than the capacity.
  lim.capacity = model.config().max_seq_len + 1;
  EXPECT_THROW(BatchDecoder(model, lim), Error);
  lim.capacity = 8;
  BatchDecoder small(model, lim);
  EXPECT_THROW(small.add(std::vector<int32_t>(9, 1)), Error);
}

TEST(KvBlockPool, ReleasingWhatWasNotTakenIsAnError) {
  KvBlockPool pool(cpu_backend(), 2, 4, 8, 3);
  EXPECT_EQ(pool.bytes(), 3 * 2 * 2 * 8 * 4 * 4);
  const std::vector<int32_t> got = pool.allocate(2);
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1}));
  EXPECT_THROW(pool.allocate(2), Error);
  pool.release(std::vector<int32_t>{1});
  EXPECT_THROW(pool.release(std::vector<int32_t>{1}), Error);
  EXPECT_THROW(pool.release(std::vector<int32_t>{7}), Error);
  EXPECT_EQ(pool.allocate(1), std::vector<int32_t>{1});
}

}  // namespace
}  // namespace zaya

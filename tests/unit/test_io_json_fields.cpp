// The simdjson fast path of a JSON line's fields (io/json_fields.h) gives what nlohmann::json
// always gave, or steps aside: the last of repeated keys wins, integer ids are written in decimal
// (other numbers as nlohmann dumps them), and what it refuses (lone surrogates, control
// characters, trailing bytes) is still refused with the full parser's message.
#include <gtest/gtest.h>

#include <string>

#include "io/document_reader.h"
#include "io/json_fields.h"

namespace zaya {
namespace {

struct Outcome {
  RecordVerdict verdict;
  Document doc;
};

Outcome read_line(const std::string& line, const std::string& id_key = "id",
                  const std::string& text_key = "text") {
  ReadOptions o;
  o.text_key = text_key;
  o.id_key = id_key;
  Record r{line, 1, 0};
  Outcome out;
  out.verdict = to_document(r, InputFormat::kJsonl, o, "x.jsonl", out.doc);
  return out;
}

bool fast(const std::string& line, const std::string& id_key = "id") {
  ReadOptions o;
  o.id_key = id_key;
  Document d;
  return fast_json_fields(line, o, d);
}

TEST(IoJsonFields, FastPathTakesPlainLines) {
  EXPECT_TRUE(fast(R"({"text": "a\nb", "id": "d1"})"));
  EXPECT_TRUE(fast(R"({"id": 18446744073709551615, "text": "a"})"));
  EXPECT_TRUE(fast(R"({"text": "a"})", ""));
  EXPECT_FALSE(fast(R"({"text": "a", "id": 1.5})"));  // nlohmann's dump decides
  EXPECT_FALSE(fast(R"({"text": 3, "id": 1})"));      // the message comes from the full parser
}

TEST(IoJsonFields, SameFieldsAsTheFullParser) {
  auto o = read_line(R"({"text": "first", "id": 1, "text": "last"})");
  ASSERT_TRUE(o.verdict.ok()) << o.verdict.message;
  EXPECT_EQ(o.doc.text, "last");
  o = read_line(R"({"te\u0078t": "\ud83d\ude00 \u00e9", "id": -9223372036854775808})");
  ASSERT_TRUE(o.verdict.ok()) << o.verdict.message;
  EXPECT_EQ(o.doc.text, "\xf0\x9f\x98\x80 \xc3\xa9");
  EXPECT_EQ(o.doc.id, "-9223372036854775808");
  EXPECT_EQ(read_line(R"({"text": "a", "id": 18446744073709551615})").doc.id,
            "18446744073709551615");
  EXPECT_EQ(read_line(R"({"text": "a", "id": -0})").doc.id, "0");
  EXPECT_EQ(read_line(R"({"text": "a", "id": 1e2})").doc.id, "100.0");
  EXPECT_EQ(read_line("\xef\xbb\xbf{\"text\": \"bom\", \"id\": 2}").doc.text, "bom");
  o = read_line(R"({"m": {"t": "x"}, "m": 5})", "", "m.t");
  EXPECT_EQ(o.verdict.reason, BadRecord::kMissingKey);
  EXPECT_EQ(o.verdict.message, "x.jsonl:1: no field 'm.t'");
}

TEST(IoJsonFields, RefusedAsBefore) {
  for (const char* line : {R"({"text": "\udc00"})", R"({"text": "\ud800x"})",
                           "{\"text\": \"a\tb\"}", R"({"text": "a"} x)", R"({"text": "a",})"}) {
    const auto o = read_line(line, "");
    EXPECT_EQ(o.verdict.reason, BadRecord::kBadJson) << line;
    EXPECT_EQ(o.verdict.message.rfind("x.jsonl:1: not a JSON line: parse error", 0), 0u)
        << o.verdict.message;
  }
  const auto o = read_line(R"({"text": "a\u0000b"})", "");
  EXPECT_EQ(o.verdict.reason, BadRecord::kNulByte);
}

}  // namespace
}  // namespace zaya

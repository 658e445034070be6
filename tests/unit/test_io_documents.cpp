// Records and documents: text split exactly as data prepare always has (also when a separator
// straddles two read chunks), JSON Lines with dotted keys and ids, format by name or content,
// every bad line refused with FILE:LINE and its reason, input lists from directories and globs.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "data/prepare.h"
#include "io/document_reader.h"
#include "io/input_files.h"
#include "test_data_helpers.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;

std::vector<Record> all_records(const std::string& path, const ReadOptions& o = {}) {
  RecordReader r(path, o);
  std::vector<Record> out;
  Record rec;
  while (r.next(rec)) out.push_back(rec);
  return out;
}

TEST(IoDocuments, TextRecordsMatchSplitDocumentsAcrossChunks) {
  const fs::path dir = test::temp_dir("io_text_records");
  // Documents whose separators fall on every offset around the 1 MiB chunk boundary.
  std::string text = "  \n";
  while (text.size() < (size_t(3) << 20)) text += std::string(1 + text.size() % 997, 'x') + " \n\n";
  test::write_text(dir / "t.txt", text);
  const auto want = split_documents(text, "\n\n");
  const auto got = all_records((dir / "t.txt").string());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].bytes, want[i]) << i;
    ASSERT_EQ(size_t(got[i].offset), size_t(want[i].data() - text.data())) << i;
  }
  EXPECT_EQ(got[1].line, 4);  // "  \n" + doc 0 "x \n\n": doc 1 starts on line 4
}

TEST(IoDocuments, JsonLinesWithDottedKeysAndIds) {
  const fs::path dir = test::temp_dir("io_jsonl");
  test::write_text(dir / "d.jsonl",
                   "{\"meta\": {\"body\": \"caf\\u00e9\\nline\"}, \"n\": 7}\n\n"
                   "  \n{\"meta\": {\"body\": \"two\"}, \"n\": \"x-2\"}");
  ReadOptions o;
  o.text_key = "meta.body";
  o.id_key = "n";
  DocumentReader r((dir / "d.jsonl").string(), o);
  Document d;
  ASSERT_TRUE(r.next(d));
  EXPECT_EQ(d.text, "caf\xc3\xa9\nline");
  EXPECT_EQ(d.id, "7");
  ASSERT_TRUE(r.next(d));
  EXPECT_EQ(d.text, "two");
  EXPECT_EQ(d.id, "x-2");
  EXPECT_FALSE(r.next(d));
}

TEST(IoDocuments, FormatByNameThenByContent) {
  const fs::path dir = test::temp_dir("io_format");
  test::write_text(dir / "noext", "\n {\"text\": \"a\"}\n");
  test::write_text(dir / "code.txt", "{ not json }\n");
  test::write_text(dir / "plain", "hello\n\nworld\n");
  EXPECT_EQ(RecordReader((dir / "noext").string(), {}).format(), InputFormat::kJsonl);
  EXPECT_EQ(RecordReader((dir / "code.txt").string(), {}).format(), InputFormat::kText);
  EXPECT_EQ(RecordReader((dir / "plain").string(), {}).format(), InputFormat::kText);
  test::write_text(dir / "x.jsonl.gz", "not gzip");
  EXPECT_NE(test::error_of([&] {
              RecordReader((dir / "x.jsonl.gz").string(), {});
            }).find("x.jsonl.gz: named .gz but its content is not gzip"),
            std::string::npos);
}

// The message and reason of the first bad record of `content` read as `name`.
RecordVerdict first_problem(const std::string& name, const std::string& content,
                            const ReadOptions& o = {}) {
  const fs::path dir = test::temp_dir("io_bad");
  test::write_text(dir / name, content);
  const std::string path = (dir / name).string();
  RecordReader r(path, o);
  Record rec;
  Document doc;
  while (r.next(rec)) {
    RecordVerdict v = to_document(rec, r.format(), o, path, doc);
    if (!v.ok()) {
      v.message = v.message.substr(v.message.find(name));  // from the file name on
      return v;
    }
  }
  return {};
}

TEST(IoDocuments, BadRecordsNameFileLineAndReason) {
  const std::string good = "{\"text\": \"ok\"}\n";
  auto v = first_problem("a.jsonl", good + good + "{\"text\": \"cut\n" + good);
  EXPECT_EQ(v.reason, BadRecord::kBadJson);
  EXPECT_EQ(v.message.rfind("a.jsonl:3: not a JSON line", 0), 0u) << v.message;
  v = first_problem("b.jsonl", good + "{\"body\": \"x\"}\n");
  EXPECT_EQ(v.reason, BadRecord::kMissingKey);
  EXPECT_EQ(v.message, "b.jsonl:2: no field 'text'");
  v = first_problem("c.jsonl", "{\"text\": 12}\n");
  EXPECT_EQ(v.reason, BadRecord::kNotString);
  EXPECT_EQ(v.message, "c.jsonl:1: field 'text' is a number, expected a string");
  v = first_problem("d.jsonl", good + "{\"text\": \"bad \xff byte\"}\n");
  EXPECT_EQ(v.reason, BadRecord::kInvalidUtf8);
  EXPECT_EQ(v.message, "d.jsonl:2: invalid UTF-8 at byte 15 of the line");
  v = first_problem("e.jsonl", "[1, 2]\n");
  EXPECT_EQ(v.reason, BadRecord::kBadJson);
  EXPECT_EQ(v.message, "e.jsonl:1: expected a JSON object per line, found an array");
  v = first_problem("f.txt", "fine\n\nline two\nthen \xc3( bad\n");
  EXPECT_EQ(v.reason, BadRecord::kInvalidUtf8);
  EXPECT_EQ(v.message, "f.txt:4: invalid UTF-8 at byte offset 20");
  v = first_problem("g.txt", std::string("ok\n\nbin\0ary", 11));
  EXPECT_EQ(v.reason, BadRecord::kNulByte);
  EXPECT_EQ(v.message, "g.txt:3: not a text file (a NUL byte at offset 7); expected UTF-8 text");
  ReadOptions ids;
  ids.id_key = "id";
  v = first_problem("h.jsonl", "{\"text\": \"a\", \"id\": [1]}\n", ids);
  EXPECT_EQ(v.reason, BadRecord::kNotString);
}

TEST(IoDocuments, InputPathsFromDirectoriesAndGlobs) {
  const fs::path dir = test::temp_dir("io_inputs");
  fs::create_directories(dir / "sub");
  for (const char* f : {"b.jsonl", "a.txt", "sub/c.jsonl.zst", "notes.csv", ".hidden.txt"})
    test::write_text(dir / f, "x");
  const auto files = expand_input_paths({dir.string()});
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0], (dir / "a.txt").string());
  EXPECT_EQ(files[1], (dir / "b.jsonl").string());
  EXPECT_EQ(files[2], (dir / "sub/c.jsonl.zst").string());
  EXPECT_EQ(expand_input_paths({(dir / "*.jsonl").string(), (dir / "a.txt").string()}),
            (std::vector<std::string>{(dir / "b.jsonl").string(), (dir / "a.txt").string()}));
  EXPECT_NE(test::error_of([&] {
              expand_input_paths({(dir / "*.parquet").string()});
            }).find("the pattern matches no file"),
            std::string::npos);
  fs::create_directories(dir / "empty");
  EXPECT_NE(test::error_of([&] {
              expand_input_paths({(dir / "empty").string()});
            }).find("the directory holds no input file"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] {
              expand_input_paths({(dir / "nope.txt").string()});
            }).find("nope.txt: no such file or directory"),
            std::string::npos);
}

}  // namespace
}  // namespace zaya

// `data prepare`: documents survive tokenization, eos separates them, the val split is whole
// documents of about the requested share, and the split is deterministic.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/prepare.h"
#include "data/shard.h"
#include "test_data_helpers.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;

// All tokens of one split, decoded with the byte encoder into documents (split at eos).
std::vector<std::string> decode_split(const fs::path& dir, const std::string& split) {
  std::ifstream in(dir / "index.json");
  const auto index = nlohmann::json::parse(in);
  std::vector<std::string> docs;
  std::string current;
  for (const auto& entry : index.at(split).at("shards")) {
    ShardReader r((dir / entry.at("file").get<std::string>()).string());
    for (int64_t i = 0; i < r.size(); ++i) {
      const int32_t t = r.at(i);
      if (t == ByteEncoder::kEos) {
        docs.push_back(current);
        current.clear();
      } else {
        current += char(uint8_t(t));
      }
    }
  }
  EXPECT_TRUE(current.empty()) << "split " << split << " does not end with eos";
  return docs;
}

TEST(DataPrepare, SplitDocumentsTrimsAndDropsEmpty) {
  const auto docs = split_documents("\n first doc\nline 2 \n\n\n\nsecond\n\n  \n\nthird", "\n\n");
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0], "first doc\nline 2");
  EXPECT_EQ(docs[1], "second");
  EXPECT_EQ(docs[2], "third");
}

TEST(DataPrepare, ShardsDecodeBackToDocuments) {
  const fs::path dir = test::temp_dir("prepare");
  const int n_docs = 400;
  const std::string text = test::synthetic_text("src", n_docs);
  test::write_text(dir / "in.txt", text);
  PrepareOptions o;
  o.inputs = {(dir / "in.txt").string()};
  o.out_dir = (dir / "out").string();
  o.name = "src";
  o.shard_tokens = 1000;  // many shards, documents crossing shard boundaries
  o.val_fraction = 0.2;
  o.progress = false;
  const PrepareSummary s = prepare_source(o, ByteEncoder());
  EXPECT_EQ(s.documents, n_docs);
  EXPECT_GT(s.train_shards, 5);

  const fs::path src = dir / "out" / "src";
  const auto train = decode_split(src, "train");
  const auto val = decode_split(src, "val");
  EXPECT_EQ(int64_t(train.size()), s.train_documents);
  EXPECT_EQ(int64_t(val.size()), s.val_documents);
  EXPECT_EQ(train.size() + val.size(), size_t(n_docs));
  // Every input document appears exactly once, in input order within each split.
  const auto originals = split_documents(text, "\n\n");
  size_t ti = 0, vi = 0;
  for (int64_t d = 0; d < n_docs; ++d) {
    const bool is_val = is_validation_document(o.seed, d, o.val_fraction);
    const std::string& got = is_val ? val.at(vi++) : train.at(ti++);
    EXPECT_EQ(got, originals[size_t(d)]) << "document " << d;
  }
  // About 20% of documents held out (binomial sd for n=400 is 2%).
  EXPECT_NEAR(double(val.size()) / n_docs, 0.2, 0.07);

  // index.json records counts and shard checksums that match the shards.
  std::ifstream in(src / "index.json");
  const auto index = nlohmann::json::parse(in);
  EXPECT_EQ(index.at("train").at("tokens").get<int64_t>(), s.train_tokens);
  EXPECT_EQ(index.at("tokenizer").at("vocab_size").get<int64_t>(), 257);
  EXPECT_EQ(index.at("train").at("shards").size(), size_t(s.train_shards));
  EXPECT_EQ(int64_t(text.size()), index.at("made_by").at("input_bytes").get<int64_t>());

  // Same inputs and seed: identical shards. A finished source is replaced only with --force.
  const auto first = ShardReader((src / "train-00000.bin").string()).info().checksum;
  EXPECT_NE(test::error_of([&] { prepare_source(o, ByteEncoder()); }).find("Pass --force"),
            std::string::npos);
  o.force = true;
  prepare_source(o, ByteEncoder());
  EXPECT_EQ(ShardReader((src / "train-00000.bin").string()).info().checksum, first);
}

TEST(DataPrepare, BadOptionsNameTheFlag) {
  const fs::path dir = test::temp_dir("prepare_bad");
  test::write_text(dir / "in.txt", "a\n\nb\n");
  PrepareOptions o;
  o.inputs = {(dir / "in.txt").string()};
  o.out_dir = dir.string();
  o.name = "x";
  o.val_fraction = 1.5;
  EXPECT_NE(test::error_of([&] { prepare_source(o, ByteEncoder()); }).find("--val-fraction"),
            std::string::npos);
  o.val_fraction = 0.1;
  o.inputs = {(dir / "missing.txt").string()};
  EXPECT_NE(test::error_of([&] { prepare_source(o, ByteEncoder()); }).find("missing.txt"),
            std::string::npos);
  EXPECT_NE(test::error_of([] { make_text_encoder("tok.json"); }).find("--tokenizer 'tok.json'"),
            std::string::npos);
}

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

nlohmann::json read_index(const fs::path& src) {
  std::ifstream in(src / "index.json");
  return nlohmann::json::parse(in);
}

TEST(DataPrepare, ThreadCountDoesNotChangeTheOutput) {
  const fs::path dir = test::temp_dir("prepare_threads");
  test::write_text(dir / "a.txt", test::synthetic_text("a", 700));
  test::write_text(dir / "b.txt", test::synthetic_text("b", 300));
  PrepareOptions o;
  o.inputs = {(dir / "a.txt").string(), (dir / "b.txt").string()};
  o.name = "src";
  o.shard_tokens = 3000;
  o.progress = false;
  std::vector<std::string> shards;
  for (const int threads : {1, 3}) {
    o.threads = threads;
    o.out_dir = (dir / ("t" + std::to_string(threads))).string();
    prepare_source(o, ByteEncoder());
  }
  const auto one = read_index(dir / "t1" / "src"), three = read_index(dir / "t3" / "src");
  EXPECT_EQ(one.at("train"), three.at("train"));
  EXPECT_EQ(one.at("val"), three.at("val"));
  EXPECT_EQ(one.at("report"), three.at("report"));
  for (const auto& e : one.at("train").at("shards")) {
    const std::string f = e.at("file").get<std::string>();
    EXPECT_EQ(file_bytes(dir / "t1" / "src" / f), file_bytes(dir / "t3" / "src" / f)) << f;
  }
}

TEST(DataPrepare, DedupMinCharsAndSkipBadAreCounted) {
  const fs::path dir = test::temp_dir("prepare_clean");
  std::string jsonl;
  for (int d = 0; d < 50; ++d)
    jsonl += "{\"text\": \"document number " + std::to_string(d % 20) +
             "\", \"id\": " + std::to_string(d) + "}\n";
  jsonl += "{\"text\": \"tiny\", \"id\": 50}\n{\"text\": 5, \"id\": 51}\nnot json\n";
  test::write_text(dir / "in.jsonl", jsonl);
  PrepareOptions o;
  o.inputs = {(dir / "in.jsonl").string()};
  o.out_dir = dir.string();
  o.name = "src";
  o.progress = false;
  o.val_fraction = 0;
  o.id_key = "id";
  EXPECT_NE(test::error_of([&] {
              prepare_source(o, ByteEncoder());
            }).find("in.jsonl:52: field 'text' is a number, expected a string"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "src" / "index.json"));  // nothing looks finished
  o.skip_bad = true;
  o.dedup_exact = true;
  o.min_chars = 5;
  const PrepareSummary s = prepare_source(o, ByteEncoder());
  EXPECT_EQ(s.documents, 20);
  const auto report = read_index(dir / "src").at("report");
  EXPECT_EQ(report.at("dropped").at("duplicate"), 30);
  EXPECT_EQ(report.at("dropped").at("too_short"), 1);
  EXPECT_EQ(report.at("skipped").at("not_string"), 1);
  EXPECT_EQ(report.at("skipped").at("bad_json"), 1);
  EXPECT_EQ(report.at("files").at(0).at("documents"), 20);
  // documents.jsonl: the kept documents' ids in order, with their token offsets.
  std::ifstream ids(dir / "src" / "documents.jsonl");
  std::string line;
  int64_t n = 0, offset = 0;
  while (std::getline(ids, line)) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j.at("id"), std::to_string(n));
    EXPECT_EQ(j.at("offset"), offset);
    offset += j.at("tokens").get<int64_t>();
    ++n;
  }
  EXPECT_EQ(n, 20);
}

}  // namespace
}  // namespace zaya

#include "data/prepare.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/rng.h"
#include "data/checksum.h"
#include "data/shard.h"

namespace zaya {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ZAYA_CHECK(in.good(), "--input ", path, ": cannot open input file");
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string text = std::move(ss).str();
  // Text has no NUL bytes; executables, images and compressed files almost always do (an ELF
  // binary starts with one at byte 4). Tokenizing one would fill the shards with junk silently.
  const size_t nul = text.find('\0');
  ZAYA_CHECK(nul == std::string::npos, "--input ", path, ": not a text file (a NUL byte at offset ",
             nul, "); expected UTF-8 text");
  return text;
}

// One output split (train or val): buffers tokens and writes a shard each time the buffer fills.
class SplitWriter {
 public:
  SplitWriter(std::string dir, std::string prefix, int64_t shard_tokens, int64_t vocab_size,
              bool progress)
      : dir_(std::move(dir)),
        prefix_(std::move(prefix)),
        shard_tokens_(shard_tokens),
        vocab_size_(vocab_size),
        progress_(progress) {}

  void add(std::span<const int32_t> tokens) {
    size_t pos = 0;
    while (pos < tokens.size()) {
      const size_t room = size_t(shard_tokens_) - buffer_.size();
      const size_t take = std::min(room, tokens.size() - pos);
      buffer_.insert(buffer_.end(), tokens.begin() + long(pos), tokens.begin() + long(pos + take));
      pos += take;
      if (int64_t(buffer_.size()) == shard_tokens_) flush();
    }
  }

  // Writes the partial last shard; a split with no tokens at all still gets one (empty) shard so
  // that every source has a val-00000.bin to point at.
  void finish() {
    if (!buffer_.empty() || shards_.empty()) flush();
  }

  const std::vector<ShardInfo>& shards() const { return shards_; }
  int64_t tokens() const { return tokens_; }

 private:
  void flush() {
    char name[32];
    std::snprintf(name, sizeof name, "%s-%05zu.bin", prefix_.c_str(), shards_.size());
    ShardInfo info = write_shard((fs::path(dir_) / name).string(), buffer_, vocab_size_);
    info.path = name;  // index.json refers to shards relative to the source directory
    tokens_ += info.tokens;
    if (progress_)
      std::fprintf(stderr, "  wrote %s: %lld tokens\n", name, static_cast<long long>(info.tokens));
    shards_.push_back(std::move(info));
    buffer_.clear();
  }

  std::string dir_, prefix_;
  int64_t shard_tokens_, vocab_size_;
  bool progress_;
  std::vector<int32_t> buffer_;
  std::vector<ShardInfo> shards_;
  int64_t tokens_ = 0;
};

json shards_json(const std::vector<ShardInfo>& shards) {
  json a = json::array();
  for (const auto& s : shards)
    a.push_back({{"file", s.path}, {"tokens", s.tokens}, {"checksum", checksum_hex(s.checksum)}});
  return a;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void write_json_atomic(const fs::path& path, const json& j) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    ZAYA_CHECK(out.good(), tmp.string(), ": cannot create file");
    out << j.dump(2) << "\n";
    ZAYA_CHECK(out.good(), tmp.string(), ": write failed");
  }
  fs::rename(tmp, path);
}

}  // namespace

std::vector<std::string_view> split_documents(std::string_view text, std::string_view separator) {
  ZAYA_CHECK(!separator.empty(), "--doc-separator must not be empty");
  std::vector<std::string_view> docs;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(separator, start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view doc = trim(text.substr(start, end - start));
    if (!doc.empty()) docs.push_back(doc);
    start = end + separator.size();
  }
  return docs;
}

bool is_validation_document(uint64_t seed, int64_t doc_index, double val_fraction) {
  // 53 random bits -> a double in [0, 1); the stream name keeps this split independent of every
  // other use of the same seed.
  const auto w = Philox(seed, hash_name("zaya.data.val_split")).words(uint64_t(doc_index));
  const double u = double(((uint64_t(w[0]) << 32) | w[1]) >> 11) * 0x1.0p-53;
  return u < val_fraction;
}

PrepareSummary prepare_source(const PrepareOptions& o, const TextEncoder& encoder) {
  const auto t0 = std::chrono::steady_clock::now();
  ZAYA_CHECK(!o.inputs.empty(), "--input: at least one input file is required");
  ZAYA_CHECK(
      !o.name.empty() && o.name.find('/') == std::string::npos && o.name != "." && o.name != "..",
      "--name '", o.name, "': expected a plain source name such as 'brown'");
  ZAYA_CHECK(o.val_fraction >= 0 && o.val_fraction < 1, "--val-fraction ", o.val_fraction,
             ": expected a value in [0, 1)");
  ZAYA_CHECK(o.shard_tokens > 0, "--shard-tokens ", o.shard_tokens, ": expected a positive count");
  const int64_t vocab = encoder.vocab_size();
  const int32_t eos = encoder.eos_id();
  ZAYA_CHECK(eos >= 0 && eos < vocab, "tokenizer '", o.tokenizer, "': eos id ", eos,
             " is outside its vocabulary of ", vocab);

  PrepareSummary sum;
  const fs::path dir = fs::path(o.out_dir) / o.name;
  sum.source_dir = dir.string();
  fs::create_directories(dir);
  // A stale index.json would describe shards we are about to overwrite: remove it first, write
  // the new one last.
  fs::remove(dir / "index.json");

  SplitWriter train(dir.string(), "train", o.shard_tokens, vocab, o.progress);
  SplitWriter val(dir.string(), "val", o.shard_tokens, vocab, o.progress);
  std::vector<int32_t> tokens;
  for (const std::string& input : o.inputs) {
    const std::string text = read_text_file(input);
    sum.input_bytes += int64_t(text.size());
    const auto docs = split_documents(text, o.doc_separator);
    if (o.progress)
      std::fprintf(stderr, "prepare %s: %s: %zu bytes, %zu documents\n", o.name.c_str(),
                   input.c_str(), text.size(), docs.size());
    size_t next_report = docs.size() / 10;
    for (size_t i = 0; i < docs.size(); ++i) {
      tokens = encoder.encode(docs[i]);
      tokens.push_back(eos);
      if (is_validation_document(o.seed, sum.documents, o.val_fraction)) {
        val.add(tokens);
        ++sum.val_documents;
      } else {
        train.add(tokens);
        ++sum.train_documents;
      }
      ++sum.documents;
      if (o.progress && docs.size() >= 100 && i + 1 >= next_report && i + 1 < docs.size()) {
        std::fprintf(stderr, "  %zu/%zu documents\n", i + 1, docs.size());
        next_report += docs.size() / 10;
      }
    }
  }
  ZAYA_CHECK(sum.train_documents > 0, "--input: no training documents (", sum.documents,
             " documents found with separator ", json(o.doc_separator).dump(),
             "); expected non-empty text");
  train.finish();
  val.finish();
  if (o.progress && o.val_fraction > 0 && sum.val_documents == 0)
    std::fprintf(stderr, "warning: no document was held out for validation (%lld documents)\n",
                 static_cast<long long>(sum.documents));

  sum.train_tokens = train.tokens();
  sum.val_tokens = val.tokens();
  sum.train_shards = int64_t(train.shards().size());
  sum.val_shards = int64_t(val.shards().size());
  sum.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const json index = {
      {"format", "ZAYATOK1"},
      {"version", kShardVersion},
      {"source", o.name},
      {"dtype", token_dtype_name(token_dtype_for_vocab(vocab))},
      {"checksum", "fnv1a64"},
      {"tokenizer", {{"path", o.tokenizer}, {"vocab_size", vocab}, {"eos_id", eos}}},
      {"documents", sum.documents},
      {"train",
       {{"documents", sum.train_documents},
        {"tokens", sum.train_tokens},
        {"shards", shards_json(train.shards())}}},
      {"val",
       {{"documents", sum.val_documents},
        {"tokens", sum.val_tokens},
        {"shards", shards_json(val.shards())}}},
      {"made_by",
       {{"command", "zaya data prepare"},
        {"inputs", o.inputs},
        {"input_bytes", sum.input_bytes},
        {"doc_separator", o.doc_separator},
        {"val_fraction", o.val_fraction},
        {"split_seed", o.seed},
        {"shard_tokens", o.shard_tokens},
        {"created_utc", utc_now()},
        {"elapsed_s", sum.elapsed_s}}}};
  write_json_atomic(dir / "index.json", index);
  return sum;
}

}  // namespace zaya

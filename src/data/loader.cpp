#include "data/loader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_number.h"
#include "core/rng.h"
#include "data/checksum.h"
#include "data/permutation.h"
#include "io/json_limits.h"
#include "io/text_file.h"

namespace zaya {

namespace fs = std::filesystem;
using nlohmann::json;

void TokenStream::add(ShardReader shard) {
  starts_.push_back(total_);
  total_ += shard.size();
  shards_.push_back(std::move(shard));
}

void TokenStream::read(int64_t begin, std::span<int32_t> out) const {
  const int64_t end = begin + int64_t(out.size());
  ZAYA_CHECK(begin >= 0 && end <= total_, "token range [", begin, ", ", end,
             ") is outside the stream of ", total_, " tokens");
  // The shard holding `begin`: the last one starting at or before it (skipping empty shards).
  size_t s = size_t(std::upper_bound(starts_.begin(), starts_.end(), begin) - starts_.begin()) - 1;
  int64_t pos = begin;
  size_t written = 0;
  while (written < out.size()) {
    while (pos - starts_[s] >= shards_[s].size()) ++s;
    const int64_t local = pos - starts_[s];
    const int64_t take =
        std::min<int64_t>(shards_[s].size() - local, int64_t(out.size() - written));
    shards_[s].read(local, out.subspan(written, size_t(take)));
    written += size_t(take);
    pos += take;
  }
}

namespace {

// Opens one split ("train" or "val") of a source, checking index.json against each shard header.
TokenStream open_split(const fs::path& dir, const json& index, const char* split, int64_t vocab,
                       bool verify) {
  const std::string where = (dir / "index.json").string();
  ZAYA_CHECK(index.contains(split) && index.at(split).contains("shards") &&
                 index.at(split).at("shards").is_array(),
             where, ": field '", split, ".shards' is missing or not an array");
  TokenStream stream;
  for (const json& entry : index.at(split).at("shards")) {
    ZAYA_CHECK(entry.contains("file") && entry.at("file").is_string(), where, ": field '", split,
               ".shards[].file' is missing");
    ShardReader shard((dir / entry.at("file").get<std::string>()).string(), verify);
    const ShardInfo& info = shard.info();
    // Compared as JSON: value<T>() throws json::type_error when index.json holds another type.
    ZAYA_CHECK(entry.contains("tokens") && entry.at("tokens") == info.tokens, info.path,
               ": field 'token_count' ", info.tokens, " differs from index.json's ",
               entry.contains("tokens") ? entry.at("tokens").dump() : "(missing)");
    ZAYA_CHECK(entry.contains("checksum") && entry.at("checksum") == checksum_hex(info.checksum),
               info.path, ": field 'checksum' ", checksum_hex(info.checksum),
               " differs from index.json's ",
               entry.contains("checksum") ? entry.at("checksum").dump() : "(missing)");
    ZAYA_CHECK(info.vocab_size == vocab, info.path, ": field 'vocab_size' ", info.vocab_size,
               " differs from index.json's tokenizer.vocab_size ", vocab);
    stream.add(std::move(shard));
  }
  return stream;
}

}  // namespace

DataLoader::DataLoader(DataConfig config, uint64_t seed, bool verify_checksums)
    : config_(std::move(config)), seed_(seed) {
  for (const std::string& source : config_.sources) {
    const fs::path dir = fs::path(config_.dir) / source;
    const fs::path index_path = dir / "index.json";
    std::ifstream in(index_path);
    ZAYA_CHECK(in.good(), index_path.string(), ": cannot open the index of source '", source,
               "' (prepare it with: zaya data prepare --out ", config_.dir, " --name ", source,
               " --input ...)");
    const std::string text = read_text_file(index_path.string());
    check_json_depth(text, index_path.string());
    json index;
    try {
      index = json::parse(text);
    } catch (const json::exception& e) {
      ZAYA_FAIL(index_path.string(), ": malformed JSON: ", e.what());
    }
    ZAYA_CHECK(index.contains("tokenizer") && index.at("tokenizer").contains("vocab_size") &&
                   index.at("tokenizer").contains("eos_id"),
               index_path.string(), ": field 'tokenizer.vocab_size' or 'tokenizer.eos_id' missing");
    const std::string field = index_path.string() + ": field 'tokenizer.";
    const int64_t vocab =
        json_integer_as<int32_t>(index.at("tokenizer").at("vocab_size"), 1, field + "vocab_size'");
    const int32_t eos =
        json_integer_as<int32_t>(index.at("tokenizer").at("eos_id"), 0, field + "eos_id'");
    ZAYA_CHECK(eos < vocab, field, "eos_id' ", eos, " is outside the vocabulary [0, ", vocab,
               ") of 'tokenizer.vocab_size'");
    if (train_.empty()) {
      vocab_size_ = vocab;
      eos_id_ = eos;
    }
    ZAYA_CHECK(vocab == vocab_size_ && eos == eos_id_, index_path.string(),
               ": field 'tokenizer': vocab_size ", vocab, " / eos_id ", eos,
               " differ from source '", config_.sources[0], "' (", vocab_size_, " / ", eos_id_,
               "); all sources must be prepared with the same tokenizer");
    train_.push_back(open_split(dir, index, "train", vocab, verify_checksums));
    val_.push_back(open_split(dir, index, "val", vocab, verify_checksums));
  }
  // A source the curriculum draws from must have at least one window at that phase's length.
  for (size_t p = 0; p < config_.phases.size(); ++p) {
    const DataPhase& phase = config_.phases[p];
    for (size_t s = 0; s < train_.size(); ++s)
      ZAYA_CHECK(phase.weights[s] == 0 || train_[s].windows(phase.seq_len) > 0, "data.phases[", p,
                 "].mixture.", config_.sources[s], ": source has ", train_[s].size(),
                 " train tokens, fewer than seq_len + 1 = ", phase.seq_len + 1);
  }
}

SampleLocation DataLoader::locate(int64_t g, int phase) const {
  ZAYA_CHECK(g >= 0, "sample index must be >= 0, got ", g);
  ZAYA_CHECK(phase >= 0 && phase < int(config_.phases.size()), "phase ", phase,
             " is outside the config's ", config_.phases.size(), " phases");
  const DataPhase& ph = config_.phases[size_t(phase)];
  // Source: 53-bit uniform against the cumulative normalised weights.
  const auto w = Philox(seed_, hash_name("zaya.data.mixture")).words(uint64_t(g));
  const double u = double(((uint64_t(w[0]) << 32) | w[1]) >> 11) * 0x1.0p-53;
  SampleLocation loc;
  loc.source = -1;
  double cumulative = 0;
  for (size_t s = 0; s < ph.weights.size(); ++s) {
    if (ph.weights[s] <= 0) continue;
    loc.source = int(s);  // rounding: u past the last interval falls to the last weighted source
    cumulative += ph.weights[s];
    if (u < cumulative) break;
  }
  // Window: a fresh permutation of the source's windows for each pass ("epoch") of g over n.
  const uint64_t n = uint64_t(train_[size_t(loc.source)].windows(ph.seq_len));
  const uint64_t epoch = uint64_t(g) / n;
  const uint64_t key = hash_name("zaya.data.window") ^ (seed_ * 0x9E3779B97F4A7C15ull) ^
                       (uint64_t(loc.source) << 48) ^ (epoch * 0xC2B2AE3D27D4EB4Full) ^
                       uint64_t(ph.seq_len);
  loc.window = int64_t(FeistelPermutation(n, key)(uint64_t(g) % n));
  return loc;
}

void DataLoader::sample(int64_t g, int phase, std::span<int32_t> out) const {
  const SampleLocation loc = locate(g, phase);
  const int64_t seq_len = config_.phases[size_t(phase)].seq_len;
  ZAYA_CHECK(int64_t(out.size()) == seq_len + 1, "sample: output holds ", out.size(),
             " tokens, expected seq_len + 1 = ", seq_len + 1, " for phase '",
             config_.phases[size_t(phase)].name, "'");
  train_[size_t(loc.source)].read(loc.window * seq_len, out);
}

int64_t DataLoader::val_windows(int source, int64_t seq_len) const {
  ZAYA_CHECK(source >= 0 && source < num_sources(), "source ", source, " is outside the ",
             num_sources(), " configured sources");
  ZAYA_CHECK(seq_len > 0, "val_windows: seq_len must be > 0, got ", seq_len);
  return val_[size_t(source)].windows(seq_len);
}

void DataLoader::val_sample(int source, int64_t i, std::span<int32_t> out) const {
  ZAYA_CHECK(out.size() >= 2, "val_sample: output must hold seq_len + 1 >= 2 tokens");
  const int64_t seq_len = int64_t(out.size()) - 1;
  const int64_t n = val_windows(source, seq_len);
  ZAYA_CHECK(i >= 0 && i < n, "val_sample: window ", i, " of source '",
             config_.sources[size_t(source)], "' is outside its ", n,
             " validation windows at seq_len ", seq_len);
  val_[size_t(source)].read(i * seq_len, out);
}

}  // namespace zaya

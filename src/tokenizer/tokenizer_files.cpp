#include "tokenizer/tokenizer_files.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/hf_json.h"
#include "tokenizer/hf_sentencepiece_json.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Vocabulary entries: byte-level text -> id, into tokens[id] as raw bytes.
void add_vocab(const json& vocab, const std::string& where, std::vector<std::string>& tokens,
               std::vector<bool>& filled) {
  ZAYA_CHECK(vocab.is_object(), where, " must be an object mapping token to id");
  for (const auto& [text, id_json] : vocab.items()) {
    ZAYA_CHECK(id_json.is_number_integer(), where, "[\"", text, "\"] must be an integer id");
    const int64_t id = id_json.get<int64_t>();
    ZAYA_CHECK(id >= 0 && id < (int64_t(1) << 24), where, "[\"", text, "\"]: id ", id,
               " is out of range");
    const auto bytes = byte_level_to_bytes(text);
    ZAYA_CHECK(bytes.has_value(), where, ": token \"", text,
               "\" has characters outside GPT-2's byte-level alphabet (zaya loads byte-level BPE)");
    if (size_t(id) >= tokens.size()) tokens.resize(id + 1), filled.resize(id + 1, false);
    ZAYA_CHECK(!filled[id], where, ": id ", id, " is given to two tokens");
    tokens[id] = *bytes;
    filled[id] = true;
  }
}

void check_dense(const std::vector<bool>& filled, const std::string& path) {
  for (size_t id = 0; id < filled.size(); ++id)
    ZAYA_CHECK(filled[id], path, ": no token has id ", id, " (ids must run 0..", filled.size() - 1,
               " without gaps)");
}

// Merges by rank, given as "left right" strings or [left, right] pairs of byte-level tokens.
std::vector<std::pair<int32_t, int32_t>> parse_merges(
    const json& merges, const std::string& where,
    const std::unordered_map<std::string, int32_t>& id_of) {
  ZAYA_CHECK(merges.is_array(), where, " must be an array of merges");
  std::vector<std::pair<int32_t, int32_t>> out;
  out.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const json& m = merges[r];
    std::string left, right;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      ZAYA_CHECK(space != std::string::npos && s.find(' ', space + 1) == std::string::npos, where,
                 "[", r, "] \"", s, "\" must be two tokens separated by one space");
      left = s.substr(0, space), right = s.substr(space + 1);
    } else {
      ZAYA_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(), where, "[",
                 r, "] must be \"left right\" or [\"left\", \"right\"]");
      left = m[0].get<std::string>(), right = m[1].get<std::string>();
    }
    const auto a = id_of.find(left), b = id_of.find(right);
    ZAYA_CHECK(a != id_of.end() && b != id_of.end(), where, "[", r, "] (\"", left, "\" \"", right,
               "\"): token \"", a == id_of.end() ? left : right, "\" is not in the vocabulary");
    out.emplace_back(a->second, b->second);
  }
  return out;
}

std::unordered_map<std::string, int32_t> byte_level_ids(const BpeModel& m) {
  std::unordered_map<std::string, int32_t> id_of;
  for (size_t id = 0; id < m.tokens.size(); ++id)
    id_of.emplace(bytes_to_byte_level(m.tokens[id]), int32_t(id));
  return id_of;
}

void check_supported_pipeline(const json& j, const std::string& path) {
  const auto flag = [](const json& o, const char* key, bool dflt) {
    return o.contains(key) && o[key].is_boolean() ? o[key].get<bool>() : dflt;
  };
  if (j.contains("normalizer") && !j["normalizer"].is_null())
    ZAYA_FAIL(
        path, ": normalizer \"", json_type_of(j["normalizer"]),
        "\" is not supported (zaya loads byte-level BPE without a normalizer; expected null)");
  ZAYA_CHECK(j.contains("pre_tokenizer") && json_type_of(j["pre_tokenizer"]) == "ByteLevel", path,
             ": pre_tokenizer \"",
             j.contains("pre_tokenizer") ? json_type_of(j["pre_tokenizer"]) : "missing",
             "\" is not supported (zaya loads BPE with a ByteLevel pre_tokenizer)");
  const json& pre = j["pre_tokenizer"];
  ZAYA_CHECK(!flag(pre, "add_prefix_space", true), path,
             ": pre_tokenizer.add_prefix_space true (or absent) is not supported (expected false)");
  ZAYA_CHECK(flag(pre, "use_regex", true), path,
             ": pre_tokenizer.use_regex false is not supported (zaya splits with GPT-2's pattern)");
  if (j.contains("decoder") && !j["decoder"].is_null())
    ZAYA_CHECK(json_type_of(j["decoder"]) == "ByteLevel", path, ": decoder \"",
               json_type_of(j["decoder"]), "\" is not supported (expected ByteLevel)");
  const json& model = j["model"];
  const auto empty_or_null = [&](const char* key) {
    return !model.contains(key) || model[key].is_null() ||
           (model[key].is_string() && model[key].get<std::string>().empty());
  };
  ZAYA_CHECK(empty_or_null("continuing_subword_prefix") && empty_or_null("end_of_word_suffix"),
             path, ": model.continuing_subword_prefix / end_of_word_suffix are not supported");
  ZAYA_CHECK(!model.contains("dropout") || model["dropout"].is_null(), path,
             ": model.dropout is not supported (expected null)");
  ZAYA_CHECK(!flag(model, "byte_fallback", false) && !flag(model, "ignore_merges", false), path,
             ": model.byte_fallback / model.ignore_merges true are not supported (expected false)");
}

BpeTokenizer load_byte_level_bpe_json(const json& j, const std::string& path) {
  const json& model = j["model"];
  check_supported_pipeline(j, path);
  ZAYA_CHECK(model.contains("vocab") && model.contains("merges"), path,
             ": model.vocab and model.merges are required");

  BpeModel m;
  m.source = path;
  std::vector<bool> filled;
  add_vocab(model["vocab"], path + ": model.vocab", m.tokens, filled);
  const auto id_of = byte_level_ids(m);  // before added tokens: merges use only the vocab
  // Added tokens are kept whole; zaya recognises them only when asked (SpecialTokens).
  for (const AddedTokenEntry& t : parse_added_tokens(j, path)) {
    if (size_t(t.id) >= m.tokens.size()) m.tokens.resize(t.id + 1), filled.resize(t.id + 1, false);
    m.tokens[t.id] = t.content;
    filled[t.id] = true;
    m.special_ids.push_back(t.id);
  }
  check_dense(filled, path);
  m.merges = parse_merges(model["merges"], path + ": model.merges", id_of);
  return BpeTokenizer(std::move(m));
}

}  // namespace

BpeTokenizer load_gpt2_tokenizer(const std::string& encoder_json, const std::string& vocab_bpe) {
  BpeModel m;
  m.source = encoder_json;
  std::vector<bool> filled;
  add_vocab(parse_json_file(encoder_json), encoder_json, m.tokens, filled);
  check_dense(filled, encoder_json);
  const auto id_of = byte_level_ids(m);
  if (const auto eot = id_of.find("<|endoftext|>"); eot != id_of.end())
    m.special_ids.push_back(eot->second);

  std::istringstream lines(read_tokenizer_file(vocab_bpe));
  std::string line;
  json merges = json::array();
  for (int line_no = 1; std::getline(lines, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;
    std::istringstream fields(line);
    std::string left, right, extra;
    fields >> left >> right;
    ZAYA_CHECK(!left.empty() && !right.empty() && !(fields >> extra), vocab_bpe, ": line ", line_no,
               " \"", line, "\" must hold two tokens");
    merges.push_back(json::array({left, right}));
  }
  m.merges = parse_merges(merges, vocab_bpe, id_of);
  return BpeTokenizer(std::move(m));
}

std::unique_ptr<Tokenizer> load_hf_tokenizer_json(const std::string& path) {
  const json j = parse_json_file(path);
  ZAYA_CHECK(j.is_object() && j.contains("model") && j["model"].is_object(), path,
             ": expected a Hugging Face tokenizer.json with a \"model\" object");
  const json& model = j["model"];
  if (model.contains("type"))  // tokenizers reads a model without "type" as BPE
    ZAYA_CHECK(json_type_of(model) == "BPE", path, ": model.type \"", json_type_of(model),
               "\" is not supported (zaya loads BPE)");
  // GPT-2 style files say so with a ByteLevel pre-tokenizer; the rest are read as BPE over
  // characters (SentencePiece-style: Gemma, Llama), which rejects what it does not support.
  const bool byte_level =
      j.contains("pre_tokenizer") && json_type_of(j["pre_tokenizer"]) == "ByteLevel";
  if (byte_level) return std::make_unique<BpeTokenizer>(load_byte_level_bpe_json(j, path));
  return load_sentencepiece_bpe_json(j, path);
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  if (fs::is_directory(path)) {
    const fs::path dir(path);
    if (fs::exists(dir / "tokenizer.json"))
      return load_hf_tokenizer_json((dir / "tokenizer.json").string());
    ZAYA_CHECK(fs::exists(dir / "encoder.json") && fs::exists(dir / "vocab.bpe"), path,
               ": directory holds neither tokenizer.json nor encoder.json + vocab.bpe");
    return std::make_unique<BpeTokenizer>(
        load_gpt2_tokenizer((dir / "encoder.json").string(), (dir / "vocab.bpe").string()));
  }
  return load_hf_tokenizer_json(path);
}

void save_hf_tokenizer_json(const BpeTokenizer& tokenizer, const std::string& path) {
  using ojson = nlohmann::ordered_json;
  const BpeModel& m = tokenizer.model();
  ojson vocab = ojson::object();
  ojson added = ojson::array();
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.is_special(id)) {
      added.push_back({{"id", id},
                       {"content", m.tokens[id]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", true}});
    }
    // Hugging Face keeps added tokens in the vocabulary too when they have a byte-level form.
    vocab[bytes_to_byte_level(m.tokens[id])] = id;
  }
  ojson merges = ojson::array();
  for (const auto& [a, b] : m.merges)
    merges.push_back({bytes_to_byte_level(m.tokens[a]), bytes_to_byte_level(m.tokens[b])});
  const ojson byte_level = {{"type", "ByteLevel"},
                            {"add_prefix_space", false},
                            {"trim_offsets", true},
                            {"use_regex", true}};
  const ojson j = {{"version", "1.0"},
                   {"truncation", nullptr},
                   {"padding", nullptr},
                   {"added_tokens", added},
                   {"normalizer", nullptr},
                   {"pre_tokenizer", byte_level},
                   {"post_processor", nullptr},
                   {"decoder", byte_level},
                   {"model",
                    {{"type", "BPE"},
                     {"dropout", nullptr},
                     {"unk_token", nullptr},
                     {"continuing_subword_prefix", nullptr},
                     {"end_of_word_suffix", nullptr},
                     {"fuse_unk", false},
                     {"byte_fallback", false},
                     {"ignore_merges", false},
                     {"vocab", vocab},
                     {"merges", merges}}}};
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    ZAYA_CHECK(out, path, ": cannot open for writing");
    out << j.dump(1) << '\n';
    out.close();  // the last bytes are written here: a full disk must not pass as success
    if (out.fail()) {
      std::error_code ec;
      fs::remove(tmp, ec);  // nothing half-written is left behind
      ZAYA_FAIL(path, ": write failed (disk full?)");
    }
  }
  fs::rename(tmp, path);
}

}  // namespace zaya

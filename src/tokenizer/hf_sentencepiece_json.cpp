#include "tokenizer/hf_sentencepiece_json.h"

#include "core/error.h"
#include "tokenizer/sentencepiece_tokenizer.h"

namespace zaya {
namespace {

using nlohmann::json;

bool null_or_absent(const json& j, const char* key) {
  return !j.contains(key) || j[key].is_null();
}

void check_model_options(const json& model, const std::string& where) {
  const auto empty = [&](const char* key) {
    return null_or_absent(model, key) ||
           (model[key].is_string() && model[key].get<std::string>().empty());
  };
  ZAYA_CHECK(empty("continuing_subword_prefix") && empty("end_of_word_suffix"), where,
             ".continuing_subword_prefix / end_of_word_suffix are not supported (expected null)");
  ZAYA_CHECK(null_or_absent(model, "dropout"), where, ".dropout is not supported (expected null)");
  ZAYA_CHECK(!json_flag(model, "ignore_merges", false, where), where,
             ".ignore_merges true is not supported (expected false)");
  ZAYA_CHECK(model.contains("vocab") && model["vocab"].is_object(), where,
             ".vocab must be an object mapping piece to id");
  ZAYA_CHECK(model.contains("merges") && model["merges"].is_array(), where,
             ".merges must be an array");
}

std::vector<std::pair<std::string, std::string>> parse_merge_texts(const json& merges,
                                                                   const std::string& where) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const json& m = merges[r];
    if (m.is_string()) {  // the older "left right" form: pieces hold "▁", never a space
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      ZAYA_CHECK(space != std::string::npos && s.find(' ', space + 1) == std::string::npos, where,
                 "[", r, "] \"", s, "\" must be two pieces separated by one space");
      out.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else {
      ZAYA_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(), where, "[",
                 r, "] must be \"left right\" or [\"left\", \"right\"]");
      out.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    }
  }
  return out;
}

// TemplateProcessing whose "single" template is [SpecialToken]? + Sequence A: the leading special
// token is the beginning-of-sequence token. Anything else is an error.
std::optional<int32_t> parse_bos(const json& j, const std::string& path,
                                 const std::unordered_map<std::string, int32_t>& id_of) {
  if (null_or_absent(j, "post_processor")) return std::nullopt;
  const json& p = j["post_processor"];
  const std::string where = path + ": post_processor";
  ZAYA_CHECK(json_type_of(p) == "TemplateProcessing", where, " \"", json_type_of(p),
             "\" is not supported (expected null or TemplateProcessing)");
  ZAYA_CHECK(p.contains("single") && p["single"].is_array(), where, ".single must be an array");
  const json& single = p["single"];
  // {"Sequence": {"id": "A"}} or {"SpecialToken": {"id": "<bos>"}}: the id, or "" for others.
  const auto id_in = [](const json& item, const char* kind) {
    if (!item.is_object() || !item.contains(kind) || !item[kind].is_object()) return std::string();
    const json& inner = item[kind];
    return inner.contains("id") && inner["id"].is_string() ? inner["id"].get<std::string>() : "";
  };
  if (single.size() == 1 && id_in(single[0], "Sequence") == "A") return std::nullopt;
  ZAYA_CHECK(single.size() == 2 && !id_in(single[0], "SpecialToken").empty() &&
                 id_in(single[1], "Sequence") == "A",
             where, ".single is not supported (zaya supports [Sequence A] or [SpecialToken, ",
             "Sequence A]: one leading beginning-of-sequence token)");
  const std::string name = id_in(single[0], "SpecialToken");
  const auto it = id_of.find(name);
  ZAYA_CHECK(it != id_of.end(), where, ".single: special token \"", name,
             "\" is not in the vocabulary");
  return it->second;
}

// Token texts by id: model.vocab (also into `id_of_piece`), then the added tokens, which may repeat
// a piece at its own id. Ids must run from 0 without gaps.
std::vector<std::string> tokens_by_id(const json& vocab, const std::vector<AddedTokenEntry>& added,
                                      const std::string& path,
                                      std::unordered_map<std::string, int32_t>& id_of_piece) {
  std::vector<std::string> tokens;
  std::vector<bool> filled;
  const auto place = [&](int64_t id, const std::string& text) {
    if (size_t(id) >= tokens.size()) tokens.resize(id + 1), filled.resize(id + 1);
    const bool fresh = !filled[id];
    tokens[id] = text;
    filled[id] = true;
    return fresh;
  };
  const std::string where = path + ": model.vocab";
  for (const auto& [piece, id_json] : vocab.items()) {
    ZAYA_CHECK(id_json.is_number_integer(), where, "[\"", piece, "\"] must be an integer id");
    const int64_t id = id_json.get<int64_t>();
    ZAYA_CHECK(id >= 0 && id < (int64_t(1) << 24), where, "[\"", piece, "\"]: id ", id,
               " is out of range");
    const bool fresh = place(id, piece);
    ZAYA_CHECK(fresh, where, ": id ", id, " is given to two pieces");
    id_of_piece.emplace(piece, int32_t(id));
  }
  for (size_t i = 0; i < added.size(); ++i) {
    const AddedTokenEntry& t = added[i];
    ZAYA_CHECK(!t.lstrip && !t.rstrip && !t.single_word && !t.normalized, path, ": added_tokens[",
               i, "] (\"", t.content, "\"): lstrip, rstrip, single_word and normalized true are ",
               "not supported (zaya matches added tokens exactly in the raw text)");
    const bool same = size_t(t.id) < tokens.size() && filled[t.id] && tokens[t.id] == t.content;
    const bool fresh = place(t.id, t.content);
    ZAYA_CHECK(fresh || same, path, ": added_tokens[", i, "] id ", t.id,
               " already belongs to another token (\"", t.content, "\" expected)");
  }
  for (size_t id = 0; id < filled.size(); ++id) {
    ZAYA_CHECK(filled[id], path, ": no token has id ", id, " (ids must run 0..", filled.size() - 1,
               " without gaps)");
  }
  return tokens;
}

}  // namespace

std::unique_ptr<Tokenizer> load_sentencepiece_bpe_json(const json& j, const std::string& path) {
  for (const char* key : {"truncation", "padding"}) {
    ZAYA_CHECK(null_or_absent(j, key), path, ": ", key,
               " is not supported (expected null: zaya encodes whole texts)");
  }
  // The text steps first: they say best whether the file is of a kind zaya reads at all.
  SentencePieceBpeParts parts;
  parts.source = path;
  const auto part = [&](const char* key) { return j.contains(key) ? j[key] : json(nullptr); };
  parts.normalizer = Normalizer::from_json(part("normalizer"), path + ": normalizer");
  parts.pre_tokenizer = PreTokenizer::from_json(part("pre_tokenizer"), path + ": pre_tokenizer");
  parts.decoder = TokenDecoder::from_json(part("decoder"), path + ": decoder");
  const json& model = j["model"];
  const std::string model_where = path + ": model";
  check_model_options(model, model_where);
  PieceBpeSpec spec;
  spec.source = model_where;
  parts.added = parse_added_tokens(j, path);
  parts.tokens = tokens_by_id(model["vocab"], parts.added, path, spec.id_of_piece);
  spec.merges = parse_merge_texts(model["merges"], model_where + ".merges");
  spec.byte_fallback = json_flag(model, "byte_fallback", false, model_where);
  spec.fuse_unk = json_flag(model, "fuse_unk", false, model_where);
  if (!null_or_absent(model, "unk_token")) {
    ZAYA_CHECK(model["unk_token"].is_string(), model_where, ".unk_token must be a string or null");
    const auto it = spec.id_of_piece.find(model["unk_token"].get<std::string>());
    ZAYA_CHECK(it != spec.id_of_piece.end(), model_where, ".unk_token \"",
               model["unk_token"].get<std::string>(), "\" is not in the vocabulary");
    spec.unk_id = it->second;
  }
  std::unordered_map<std::string, int32_t> id_of_token = spec.id_of_piece;
  for (const AddedTokenEntry& t : parts.added) id_of_token[t.content] = t.id;
  parts.bos_id = parse_bos(j, path, id_of_token);
  return std::make_unique<SentencePieceBpeTokenizer>(std::move(parts), std::move(spec));
}

}  // namespace zaya

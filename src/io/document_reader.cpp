#include "io/document_reader.h"

#include <algorithm>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_fields.h"
#include "io/json_limits.h"
#include "io/utf8_check.h"

namespace zaya {

namespace {

using nlohmann::json;

RecordVerdict refuse(BadRecord reason, const std::string& path, int64_t line,
                     const std::string& why) {
  return {reason, str_cat(path, ":", line, ": ", why)};
}

// The value at a dotted path ("meta.text"); nullptr when a step is missing or not an object.
json* find_path(json& root, const std::string& dotted) {
  json* node = &root;
  size_t start = 0;
  while (true) {
    const size_t dot = std::min(dotted.find('.', start), dotted.size());
    if (!node->is_object()) return nullptr;
    const auto it = node->find(dotted.substr(start, dot - start));
    if (it == node->end()) return nullptr;
    node = &*it;
    if (dot == dotted.size()) return node;
    start = dot + 1;
  }
}

// "a number", "an array": the JSON type as a sentence names it.
std::string type_phrase(const json& j) {
  const std::string name = j.type_name();
  return (name[0] == 'a' || name[0] == 'o' ? "an " : "a ") + name;
}

// nlohmann's messages start with "[json.exception.parse_error.101] ": keep what a user reads.
std::string json_reason(const json::exception& e) {
  const std::string_view what = e.what();
  const size_t close = what.find("] ");
  return std::string(close == std::string_view::npos ? what : what.substr(close + 2));
}

RecordVerdict take_json_fields(const Record& r, const ReadOptions& o, const std::string& path,
                               Document& out) {
  // simdjson validates the whole line's UTF-8 as it parses: a line it takes needs no second
  // pass, and only a line it refuses is checked here, first, for the message it gets.
  if (fast_json_fields(r.bytes, o, out)) return {};
  const size_t bad = first_invalid_utf8(r.bytes);
  if (bad != std::string::npos)
    return refuse(BadRecord::kInvalidUtf8, path, r.line,
                  str_cat("invalid UTF-8 at byte ", bad + 1, " of the line"));
  // simdjson refuses a line nested past its own limit; nlohmann::json would build any depth.
  const std::string too_deep = json_depth_problem(r.bytes);
  if (!too_deep.empty())
    return refuse(BadRecord::kBadJson, path, r.line, "not a JSON line: " + too_deep);
  json j;
  try {
    j = json::parse(r.bytes);
  } catch (const json::exception& e) {
    return refuse(BadRecord::kBadJson, path, r.line, "not a JSON line: " + json_reason(e));
  }
  if (!j.is_object())
    return refuse(BadRecord::kBadJson, path, r.line,
                  "expected a JSON object per line, found " + type_phrase(j));
  json* text = find_path(j, o.text_key);
  if (!text) return refuse(BadRecord::kMissingKey, path, r.line, "no field '" + o.text_key + "'");
  if (!text->is_string())
    return refuse(
        BadRecord::kNotString, path, r.line,
        str_cat("field '", o.text_key, "' is ", type_phrase(*text), ", expected a string"));
  out.text = std::move(text->get_ref<std::string&>());  // the line's copy is not needed again
  if (o.id_key.empty()) return {};
  json* id = find_path(j, o.id_key);
  if (!id) return refuse(BadRecord::kMissingKey, path, r.line, "no field '" + o.id_key + "'");
  if (!id->is_string() && !id->is_number())
    return refuse(
        BadRecord::kNotString, path, r.line,
        str_cat("field '", o.id_key, "' is ", type_phrase(*id), ", expected a string or a number"));
  out.id = id->is_string() ? id->get<std::string>() : id->dump();
  return {};
}

// Text is refused with NUL bytes (a binary file, or a JSON "\u0000") or invalid UTF-8.
RecordVerdict check_text(const Document& d, const Record& r, InputFormat format,
                         const std::string& path) {
  const bool from_text = format != InputFormat::kJsonl;
  // The line of a position inside a text record (a JSON record is one line).
  const auto line_at = [&](size_t pos) {
    return r.line + (from_text ? std::count(d.text.begin(), d.text.begin() + long(pos), '\n') : 0);
  };
  const size_t nul = d.text.find('\0');
  if (nul != std::string::npos)
    return refuse(BadRecord::kNulByte, path, line_at(nul),
                  from_text ? str_cat("not a text file (a NUL byte at offset ",
                                      r.offset + int64_t(nul), "); expected UTF-8 text")
                            : "the text holds a NUL character (\\u0000)");
  if (!from_text) return {};  // checked on the raw line
  const size_t bad = first_invalid_utf8(d.text);
  if (bad != std::string::npos)
    return refuse(BadRecord::kInvalidUtf8, path, line_at(bad),
                  str_cat("invalid UTF-8 at byte offset ", r.offset + int64_t(bad)));
  return {};
}

}  // namespace

const char* bad_record_name(BadRecord reason) {
  switch (reason) {
    case BadRecord::kNone:
      return "none";
    case BadRecord::kBadJson:
      return "bad_json";
    case BadRecord::kMissingKey:
      return "missing_key";
    case BadRecord::kNotString:
      return "not_string";
    case BadRecord::kInvalidUtf8:
      return "invalid_utf8";
    case BadRecord::kNulByte:
      return "nul_byte";
    case BadRecord::kDamagedStream:
      return "damaged_stream";
  }
  return "unknown";
}

RecordVerdict to_document(Record& record, InputFormat format, const ReadOptions& options,
                          const std::string& path, Document& out) {
  out.id.clear();
  if (format == InputFormat::kJsonl) {
    RecordVerdict v = take_json_fields(record, options, path, out);
    if (!v.ok()) return v;
  } else {
    out.text = std::move(record.bytes);
  }
  return check_text(out, record, format, path);
}

bool DocumentReader::next(Document& document) {
  while (records_.next(record_)) {
    const RecordVerdict v =
        to_document(record_, records_.format(), options_, records_.path(), document);
    ZAYA_CHECK(v.ok(), v.message);
    return true;
  }
  return false;
}

}  // namespace zaya

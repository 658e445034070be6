#include "io/json_fields.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include <simdjson.h>

namespace zaya {

namespace {

namespace dom = simdjson::dom;

// A parser keeps buffers sized for the longest line it saw; past this it is dropped after use, so
// that one huge line does not pin its size of memory in every worker for the rest of the run.
constexpr size_t kKeepCapacity = size_t(16) << 20;

// The value at a dotted path ("meta.text"), the last of repeated keys winning; false when a step
// is missing or not an object.
bool find_path(dom::element node, std::string_view dotted, dom::element& out) {
  size_t start = 0;
  while (true) {
    const size_t dot = std::min(dotted.find('.', start), dotted.size());
    dom::object object;
    if (node.get(object) != simdjson::SUCCESS) return false;
    const std::string_view key = dotted.substr(start, dot - start);
    bool found = false;
    for (const dom::key_value_pair field : object) {
      if (field.key != key) continue;
      node = field.value;
      found = true;
    }
    if (!found) return false;
    if (dot == dotted.size()) {
      out = node;
      return true;
    }
    start = dot + 1;
  }
}

// A string as it is, an integer in decimal; false for any other value.
bool take_id(dom::element id, std::string& out) {
  std::string_view s;
  if (id.get(s) == simdjson::SUCCESS) {
    out.assign(s);
    return true;
  }
  int64_t i = 0;
  uint64_t u = 0;
  if (id.get(i) == simdjson::SUCCESS) {
    out = std::to_string(i);
  } else if (id.is_uint64() && id.get(u) == simdjson::SUCCESS) {
    out = std::to_string(u);
  } else {
    return false;
  }
  return true;
}

bool take_fields(dom::element root, const ReadOptions& o, Document& out) {
  dom::element text, id;
  std::string_view s;
  if (!root.is_object() || !find_path(root, o.text_key, text)) return false;
  if (text.get(s) != simdjson::SUCCESS) return false;
  out.text.assign(s);
  if (o.id_key.empty()) return true;
  return find_path(root, o.id_key, id) && (id.is_string() || id.is_int64() || id.is_uint64()) &&
         take_id(id, out.id);
}

}  // namespace

bool fast_json_fields(std::string_view line, const ReadOptions& options, Document& out) {
  thread_local dom::parser parser;
  bool ok = false;
  {
    dom::element root;
    if (parser.parse(line.data(), line.size()).get(root) == simdjson::SUCCESS)
      ok = take_fields(root, options, out);
  }
  if (parser.capacity() > kKeepCapacity) parser = dom::parser{};
  return ok;
}

}  // namespace zaya

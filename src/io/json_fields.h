// The fast path of a JSON line's fields for `zaya data prepare`: simdjson (Debian's
// libsimdjson-dev) parses and validates the whole line several times faster than a DOM of
// nlohmann::json, and the text and id are taken from it. It only ever says yes with the exact
// result the full parser would give (a repeated key: the last one wins, as in nlohmann::json; a
// numeric id: integers only, written in decimal as nlohmann::json dumps them); whenever it cannot
// (any parse error, a missing key, a wrong type, a fractional id) it says no and the caller's
// nlohmann::json path decides, with the messages it has always given.
#pragma once

#include <string_view>

#include "io/document_reader.h"

namespace zaya {

// True when `line` is a JSON object whose text_key is a string (and whose id_key, when set, is a
// string or an integer): out.text and out.id are set. False: nothing is decided (out may hold
// partial values). Thread-safe: each thread has its own parser.
bool fast_json_fields(std::string_view line, const ReadOptions& options, Document& out);

}  // namespace zaya

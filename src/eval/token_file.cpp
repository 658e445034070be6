#include "eval/token_file.h"

#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"

namespace zaya {

using nlohmann::json;

namespace {

void append_row(TokenBatch& out, const json& row, const std::string& where) {
  ZAYA_CHECK(row.is_array() && !row.empty(), where, ": expected a non-empty list of token ids");
  for (size_t i = 0; i < row.size(); ++i) {
    const json& v = row[i];
    ZAYA_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 &&
                   v.get<int64_t>() <= std::numeric_limits<int32_t>::max(),
               where, ": token ", i, " = ", v.dump(),
               " is not a token id (a non-negative integer)");
    out.tokens.push_back(int32_t(v.get<int64_t>()));
  }
}

}  // namespace

TokenBatch read_token_file(const std::string& path) {
  const json j = read_json_file(path, "tokens file");
  ZAYA_CHECK(j.is_array() && !j.empty(), path, ": expected a list of token ids or a list of ",
             "equal-length lists of token ids");
  TokenBatch out;
  if (!j[0].is_array()) {
    append_row(out, j, path);
    out.batch = 1;
    out.seq = int(j.size());
    return out;
  }
  out.seq = int(j[0].size());
  for (size_t b = 0; b < j.size(); ++b) {
    const std::string where = path + ": sequence " + std::to_string(b);
    ZAYA_CHECK(j[b].is_array() && int(j[b].size()) == out.seq, where, " has ",
               j[b].is_array() ? std::to_string(j[b].size()) + " tokens" : "no list",
               "; every sequence of a batch must have ", out.seq, " tokens like sequence 0");
    append_row(out, j[b], where);
  }
  out.batch = int(j.size());
  return out;
}

}  // namespace zaya

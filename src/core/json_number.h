// Numbers from JSON files checked against the type that will hold them. nlohmann::json stores an
// integer as int64 or uint64 and get<T>() converts silently, so a value validated as "≥ 1" could
// still become 0 or negative when narrowed to int (keep_last = 2^32 once made retention delete
// every checkpoint). Every integer field of a zaya file goes through json_integer with the range
// of its destination type.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

namespace zaya {

// The value of `v` if it is an integer in [lo, hi]; otherwise an Error naming `what` (e.g.
// "run.json: field 'train.keep_last'"), the range and the value found.
int64_t json_integer(const nlohmann::json& v, int64_t lo, int64_t hi, const std::string& what);

// json_integer with the upper bound of the destination type T.
template <typename T>
T json_integer_as(const nlohmann::json& v, int64_t lo, const std::string& what) {
  constexpr uint64_t type_max = uint64_t(std::numeric_limits<T>::max());
  const int64_t hi = type_max > uint64_t(std::numeric_limits<int64_t>::max())
                         ? std::numeric_limits<int64_t>::max()
                         : int64_t(type_max);
  return static_cast<T>(json_integer(v, lo, hi, what));
}

// The value of `v` if it is a finite number in [lo, hi]; NaN and infinities never pass.
double json_finite(const nlohmann::json& v, double lo, double hi, const std::string& what);

}  // namespace zaya

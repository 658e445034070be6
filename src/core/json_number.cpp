#include "core/json_number.h"

#include <cmath>

#include "core/error.h"

namespace zaya {

int64_t json_integer(const nlohmann::json& v, int64_t lo, int64_t hi, const std::string& what) {
  const bool too_big =
      v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max());
  const bool bounded =
      lo > std::numeric_limits<int64_t>::min() || hi < std::numeric_limits<int64_t>::max();
  ZAYA_CHECK(v.is_number_integer() && !too_big && v.get<int64_t>() >= lo && v.get<int64_t>() <= hi,
             what, " must be an integer",
             bounded ? str_cat(" in [", lo, ", ", hi, "]") : std::string(), ", got ", v.dump());
  return v.get<int64_t>();
}

double json_finite(const nlohmann::json& v, double lo, double hi, const std::string& what) {
  const bool bounded =
      lo > -std::numeric_limits<double>::max() || hi < std::numeric_limits<double>::max();
  ZAYA_CHECK(v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= lo &&
                 v.get<double>() <= hi,
             what, " must be a finite number",
             bounded ? str_cat(" in [", lo, ", ", hi, "]") : std::string(), ", got ", v.dump());
  return v.get<double>();
}

}  // namespace zaya

#include "io/json_file.h"

#include <fstream>

#include "core/error.h"

namespace zaya {

nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  ZAYA_CHECK(in.good(), "cannot open ", what, " '", path, "'");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    ZAYA_FAIL(path, ": malformed JSON: ", e.what());
  }
}

}  // namespace zaya

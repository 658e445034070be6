#include "io/json_file.h"

#include <fstream>

#include "core/error.h"
#include "io/input_files.h"
#include "io/json_limits.h"
#include "io/text_file.h"

namespace zaya {

nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  ZAYA_CHECK(in.good(), "cannot open ", what, " '", path, "'");
  require_regular_file(path, what.c_str());
  return parse_json_checked(read_text_file(path), path);
}

}  // namespace zaya

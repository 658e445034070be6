#include "core/error.h"

#include <cstring>

namespace zaya {

void throw_error(const char* file, int line, const std::string& message) {
  // Keep only the path from src/ on, so messages do not depend on the build directory.
  const char* short_file = std::strstr(file, "src/");
  if (!short_file) short_file = file;
  throw Error(str_cat(message, " [", short_file, ":", line, "]"));
}

}  // namespace zaya

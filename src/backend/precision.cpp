#include "backend/precision.h"

namespace zaya {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kAuto:
      return "auto";
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
  }
  return "?";
}

const std::map<std::string, Precision>& precision_names() {
  static const std::map<std::string, Precision> names{
      {"auto", Precision::kAuto}, {"fp32", Precision::kFp32}, {"bf16", Precision::kBf16}};
  return names;
}

}  // namespace zaya

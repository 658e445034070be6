#include "model/recompute.h"

namespace zaya {

const std::map<std::string, Recompute>& recompute_names() {
  static const std::map<std::string, Recompute> names{
      {"none", Recompute::kNone}, {"selective", Recompute::kSelective}, {"full", Recompute::kFull}};
  return names;
}

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "none";
}

}  // namespace zaya

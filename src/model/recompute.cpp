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

std::string recompute_plan_name(const RecomputePlan& plan) {
  if (plan.attention == plan.moe) return recompute_name(plan.moe);
  return std::string("attention ") + recompute_name(plan.attention) + ", moe " +
         recompute_name(plan.moe);
}

}  // namespace zaya

#include "train/train_modes.h"

namespace zaya {

const std::map<std::string, StoredAs>& stored_as_names() {
  static const std::map<std::string, StoredAs> names{{"bf16", StoredAs::kBf16},
                                                     {"fp32", StoredAs::kFp32}};
  return names;
}

ResumeFrom ResumeFrom::parse(const std::string& text) {
  if (text.empty()) return {};
  if (text == "auto") return {Kind::kLatest, {}};
  return {Kind::kCheckpoint, text};
}

}  // namespace zaya

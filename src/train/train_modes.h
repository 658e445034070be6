// The modes of a training run that its flags name (TrainOptions, train/trainer.h), each parsed
// once where it is read (apps/cmd_train.cpp), so that a library caller cannot pass an unknown one.
#pragma once

#include <map>
#include <string>

namespace zaya {

// Where a bf16 run keeps its weights, or its gradients (TrainOptions): in bf16 alone, or in fp32.
enum class StoredAs { kBf16, kFp32 };
const std::map<std::string, StoredAs>& stored_as_names();  // "bf16", "fp32"

// Where a run starts (`--resume`): afresh, from the newest complete checkpoint under its
// OUT/ckpt (none there: afresh), or from a named checkpoint directory.
struct ResumeFrom {
  enum class Kind { kNone, kLatest, kCheckpoint };
  Kind kind = Kind::kNone;
  std::string checkpoint;  // for kCheckpoint
  // The flag's text: "auto" is kLatest, anything else a checkpoint directory, empty kNone.
  static ResumeFrom parse(const std::string& text);
};

}  // namespace zaya

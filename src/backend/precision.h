// The precision a command's products compute in (`--precision`, backend/device_select.h): a mode
// parsed once where it is read (the CLI, through precision_names()), so that a library caller
// cannot pass an unknown one and a typo cannot fall through to fp32.
#pragma once

#include <map>
#include <string>

namespace zaya {

enum class Precision {
  kAuto,  // bf16 where the device takes it by default (cuda), fp32 elsewhere
  kFp32,
  kBf16,
};

// "auto", "fp32", "bf16".
const char* precision_name(Precision p);
// Every name and its mode, for the flags (CLI11's CheckedTransformer names the flag and lists
// them on a bad value).
const std::map<std::string, Precision>& precision_names();

}  // namespace zaya
